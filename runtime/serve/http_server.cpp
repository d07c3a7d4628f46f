#include "runtime/serve/http_server.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include "runtime/serve/request_framing.hpp"

namespace tandem::rt {

namespace {

using Clock = std::chrono::steady_clock;

// Set while a connection's requests run on this thread: where a handler asks for the
// connection to close after its response, and why the current request's head was refused.
thread_local bool* t_close_after = nullptr;
thread_local const std::string* t_head_error = nullptr;
thread_local socket_t t_socket = INVALID_SOCKET;  // the connection this thread serves

int Millis(Clock::duration d) {
  return static_cast<int>(std::clamp<std::int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count(), 0, 1 << 30));
}

// One connection as httplib reads and writes it, plus what the connection loop needs:
// the bytes httplib takes of each request are counted, and its head is checked
// (RequestHeadError) before httplib parses it.
class ConnectionStream : public httplib::Stream {
 public:
  explicit ConnectionStream(const HttpLimits& limits) : limits_(limits) {}
  // Whether a next request begins within `wait` (false: the connection is done).
  virtual bool WaitForRequest(std::chrono::milliseconds wait, const std::atomic<socket_t>& listening) = 0;
  // A request begins: all of it must arrive within `budget`.
  virtual void StartRequest(std::chrono::milliseconds) {
    in_headers_ = true;
    line_end_ = 0;
    header_bytes_ = body_bytes_ = 0;
    head_.clear();
    head_error.clear();
  }
  bool close_after = false;
  std::string head_error;  // why this request's head was refused, or ""

 protected:
  // Counts the bytes httplib takes of this request: its line and headers (up to the
  // empty line) against max_header_bytes, the rest against max_body_bytes. httplib
  // bounds a line only once it is whole, the number of headers not at all, and a
  // chunked body not at all; false (a failed read) stops it at the bound, or at a head
  // that does not say plainly where its body ends (httplib then answers 400).
  bool Account(const char* bytes, std::size_t n) {
    std::size_t i = 0;
    for (; in_headers_ && i < n; ++i) {
      const char c = bytes[i];
      head_ += c;
      if (c == '\n') {
        in_headers_ = line_end_ != 2;  // "\r\n" right after a line end: the empty line, as httplib reads it
        line_end_ = 1;
      } else if (c == '\r' && line_end_ == 1) {
        line_end_ = 2;
      } else {
        line_end_ = 0;
      }
      if (++header_bytes_ > limits_.max_header_bytes) return false;
      if (!in_headers_) {
        head_error = RequestHeadError(head_);
        head_.clear();
        if (!head_error.empty()) return false;
      }
    }
    body_bytes_ += n - i;
    // Chunked framing adds a little to the body itself.
    return body_bytes_ <= limits_.max_body_bytes + limits_.max_body_bytes / 16 + 4096;
  }

  const HttpLimits& limits_;

 private:
  bool in_headers_ = true;
  int line_end_ = 0;  // 0 in a line; 1 just after '\n'; 2 after "\n\r"
  std::size_t header_bytes_ = 0, body_bytes_ = 0;
  std::string head_;
};

// A socket whose reads share one deadline per request and pause at most `idle_read`
// between bytes; reads are buffered, as httplib's own stream does (its line reader asks
// for one byte at a time).
class SocketConnection final : public ConnectionStream {
 public:
  SocketConnection(socket_t sock, const HttpLimits& limits) : ConnectionStream(limits), sock_(sock) {}

  bool WaitForRequest(std::chrono::milliseconds wait, const std::atomic<socket_t>& listening) override {
    if (offset_ < size_) return true;
    const auto until = Clock::now() + wait;
    // In slices, so a stopping server does not wait out every idle connection.
    while (listening != INVALID_SOCKET) {
      const auto left = until - Clock::now();
      if (left <= Clock::duration::zero()) return false;
      pollfd p{sock_, POLLIN, 0};
      const int ready = ::poll(&p, 1, std::min(Millis(left), 100));
      if (ready > 0) return true;
      if (ready < 0 && errno != EINTR) return false;
    }
    return false;
  }

  void StartRequest(std::chrono::milliseconds budget) override {
    ConnectionStream::StartRequest(budget);
    deadline_ = Clock::now() + budget;
  }

  bool is_readable() const override {
    if (offset_ < size_) return true;
    const auto left = deadline_ - Clock::now();
    if (left <= Clock::duration::zero()) return false;
    pollfd p{sock_, POLLIN, 0};
    return ::poll(&p, 1, std::min(Millis(left), static_cast<int>(limits_.idle_read.count()))) > 0;
  }

  bool is_writable() const override {
    pollfd p{sock_, POLLOUT, 0};
    if (::poll(&p, 1, static_cast<int>(limits_.write.count())) <= 0 || (p.revents & (POLLERR | POLLHUP)) != 0) return false;
    // Writable, but is the client still there? A closed peer reads as end of stream.
    pollfd r{sock_, POLLIN, 0};
    if (::poll(&r, 1, 0) <= 0) return true;
    char byte;
    return ::recv(sock_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
  }

  ssize_t read(char* ptr, size_t size) override {
    if (offset_ == size_) {
      if (!is_readable()) return -1;
      offset_ = size_ = 0;
      ssize_t n;
      do {
        n = ::recv(sock_, buffer_, sizeof buffer_, 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      size_ = static_cast<std::size_t>(n);
    }
    const std::size_t n = std::min(size, size_ - offset_);
    if (!Account(buffer_ + offset_, n)) return -1;
    std::copy_n(buffer_ + offset_, n, ptr);
    offset_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do {
      n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { Address(::getpeername, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { Address(::getsockname, ip, port); }
  socket_t socket() const override { return sock_; }

  // Half-closes, then reads and drops what the client still sends for a moment, so
  // unread request bytes do not turn the close into a reset that discards the answer
  // before the client reads it.
  void LingeringClose() {
    ::shutdown(sock_, SHUT_WR);
    const auto until = Clock::now() + std::chrono::milliseconds(200);
    std::size_t dropped = 0;
    char sink[4096];
    while (dropped < (1u << 20)) {
      pollfd p{sock_, POLLIN, 0};
      if (::poll(&p, 1, Millis(until - Clock::now())) <= 0) break;
      const ssize_t n = ::recv(sock_, sink, sizeof sink, 0);
      if (n <= 0) break;
      dropped += static_cast<std::size_t>(n);
    }
  }

  // Answers without reading the request, then closes: for a connection over a cap.
  void Refuse(const std::string& message) {
    const std::string body =
        fmt::format(R"({{"error":{{"message":"{}","type":"server_error","code":"too_many_connections","param":null}}}})", message);
    const std::string response = fmt::format(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\nRetry-After: 1\r\n"
        "Connection: close\r\n\r\n{}",
        body.size(), body);
    (void)write(response.data(), response.size());
    LingeringClose();
  }

 private:
  using NameOf = int (*)(int, sockaddr*, socklen_t*);
  void Address(NameOf name_of, std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t length = sizeof addr;
    ip.clear();
    port = 0;
    if (name_of(sock_, reinterpret_cast<sockaddr*>(&addr), &length) != 0) return;
    char host[NI_MAXHOST], service[NI_MAXSERV];
    if (::getnameinfo(reinterpret_cast<sockaddr*>(&addr), length, host, sizeof host, service, sizeof service,
                      NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
      ip = host;
      port = std::atoi(service);
    }
  }

  socket_t sock_;
  Clock::time_point deadline_ = Clock::now();
  char buffer_[4096];
  std::size_t offset_ = 0, size_ = 0;
};

// A connection read from bytes in memory, written to a string.
class MemoryConnection final : public ConnectionStream {
 public:
  MemoryConnection(const std::string& in, const HttpLimits& limits) : ConnectionStream(limits), in_(in) {}
  bool WaitForRequest(std::chrono::milliseconds, const std::atomic<socket_t>&) override { return offset_ < in_.size(); }
  bool is_readable() const override { return offset_ < in_.size(); }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    const std::size_t n = std::min(size, in_.size() - offset_);
    if (!Account(in_.data() + offset_, n)) return -1;
    std::copy_n(in_.data() + offset_, n, ptr);
    offset_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    out.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 1;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 2;
  }
  socket_t socket() const override { return INVALID_SOCKET; }
  std::string out;

 private:
  const std::string& in_;
  std::size_t offset_ = 0;
};

// Connection threads started with the server (ConnectionThreads): a concurrency
// campaign's batch of 16, twice over.
constexpr int kReadyConnectionThreads = 32;

// A thread per connection, made when no idle one is left, up to `max_threads`; idle
// threads are reused. httplib's fixed pool let a few long streams hold every thread.
// `ready` threads are started up front, so that a burst of new connections (a client
// sending 16 requests at once, each on a connection of its own) does not wait on thread
// creation, one after another on the accepting thread, before its requests are read.
class ConnectionThreads final : public httplib::TaskQueue {
 public:
  ConnectionThreads(std::size_t max_threads, std::size_t ready) : max_threads_(max_threads) {
    std::lock_guard lock(mutex_);
    try {
      while (threads_.size() < ready && threads_.size() < max_threads_) threads_.emplace_back([this] { Work(); });
    } catch (const std::system_error&) {
      // Out of threads: the rest are made as connections come, as always.
    }
  }

  void enqueue(std::function<void()> fn) override {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(fn));
    if (idle_ < jobs_.size() && threads_.size() < max_threads_) {
      try {
        threads_.emplace_back([this] { Work(); });
      } catch (const std::system_error&) {
        // Out of threads (a limit of the system's): the job waits for a running one. With
        // none at all, serve it here rather than never.
        if (threads_.empty()) {
          std::function<void()> job = std::move(jobs_.back());
          jobs_.pop_back();
          job();
          return;
        }
      }
    }
    ready_.notify_one();
  }

  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_all();
    for (std::thread& t : threads_) t.join();  // no enqueue after shutdown: listening has ended
  }

 private:
  void Work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      ++idle_;
      ready_.wait(lock, [&] { return !jobs_.empty() || stopping_; });
      --idle_;
      if (jobs_.empty()) return;  // stopping, and every accepted connection was served
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      try {
        job();
      } catch (...) {
        // A connection's failure (out of memory, say) ends that connection, not the server.
      }
      lock.lock();
    }
  }

  const std::size_t max_threads_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  std::size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace

struct HttpServer::Connections {
  std::mutex mutex;
  int open = 0;
  std::map<std::string, int> by_client;

  // Empty when admitted, else why not.
  std::string Admit(const std::string& client, const HttpLimits& limits) {
    std::lock_guard lock(mutex);
    if (open >= limits.max_connections) return fmt::format("the server has {} connections open, its limit", open);
    int& mine = by_client[client];
    if (mine >= limits.max_connections_per_client) {
      return fmt::format("this client address has {} connections open, the limit per client", mine);
    }
    ++mine;
    ++open;
    return "";
  }
  void Release(const std::string& client) {
    std::lock_guard lock(mutex);
    --open;
    if (--by_client[client] == 0) by_client.erase(client);
  }
};

HttpServer::HttpServer(HttpLimits limits) : limits_(limits), connections_(std::make_unique<Connections>()) {
  // Connections over a cap still need a thread to be refused on: a few beyond it.
  const auto threads = static_cast<std::size_t>(limits_.max_connections) + 16;
  new_task_queue = [threads, ready = static_cast<std::size_t>(std::min(limits_.max_connections, kReadyConnectionThreads))] {
    return new ConnectionThreads(threads, ready);
  };
  // httplib sets these as SO_RCVTIMEO/SO_SNDTIMEO on accepted sockets; the reads and
  // writes here wait with poll() on the limits themselves.
  set_read_timeout(std::chrono::duration_cast<std::chrono::seconds>(limits_.idle_read) + std::chrono::seconds(1));
  set_write_timeout(std::chrono::duration_cast<std::chrono::seconds>(limits_.write) + std::chrono::seconds(1));
}

HttpServer::~HttpServer() = default;

void HttpServer::CloseConnectionAfterResponse(httplib::Response& res) {
  if (t_close_after != nullptr) *t_close_after = true;
  res.set_header("Connection", "close");
}

std::string HttpServer::RequestHeadRefusal() { return t_head_error != nullptr ? *t_head_error : ""; }

bool HttpServer::ClientGone() {
  if (t_socket == INVALID_SOCKET) return false;
  pollfd p{t_socket, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if ((p.revents & (POLLERR | POLLHUP)) != 0) return true;
  char byte;
  return ::recv(t_socket, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;  // end of stream: the client closed
}

int HttpServer::open_connections() const {
  std::lock_guard lock(connections_->mutex);
  return connections_->open;
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  SocketConnection connection(sock, limits_);
  std::string client;
  int port = 0;
  connection.get_remote_ip_and_port(client, port);
  bool served = false;
  if (const std::string refusal = connections_->Admit(client, limits_); !refusal.empty()) {
    connection.Refuse(refusal);
  } else {
    t_close_after = &connection.close_after;
    t_head_error = &connection.head_error;
    t_socket = sock;
    try {
      for (std::size_t left = keep_alive_max_count_; left > 0; --left) {
        if (!connection.WaitForRequest(limits_.keep_alive, svr_sock_)) break;
        connection.StartRequest(limits_.request_read);
        bool closed = false;
        served = process_request(connection, left == 1, closed, nullptr);
        if (!served || closed || connection.close_after) break;
      }
    } catch (...) {
      served = false;  // outside httplib's own handler (a failed allocation): this connection ends
    }
    t_close_after = nullptr;
    t_head_error = nullptr;
    t_socket = INVALID_SOCKET;
    if (connection.close_after) connection.LingeringClose();
    connections_->Release(client);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return served;
}

std::string HttpServer::ProcessForTesting(const std::string& raw) {
  MemoryConnection connection(raw, limits_);
  t_close_after = &connection.close_after;
  t_head_error = &connection.head_error;
  const std::atomic<socket_t> listening{0};
  for (std::size_t left = keep_alive_max_count_; left > 0; --left) {
    if (!connection.WaitForRequest(limits_.keep_alive, listening)) break;
    connection.StartRequest(limits_.request_read);
    bool closed = false;
    if (!process_request(connection, left == 1, closed, nullptr) || closed || connection.close_after) break;
  }
  t_close_after = nullptr;
  t_head_error = nullptr;
  return connection.out;
}

}  // namespace tandem::rt
