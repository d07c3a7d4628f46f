#pragma once

#include <atomic>
#include <memory>

#include <httplib.h>
#include <sys/socket.h>

// cpp-httplib 0.11 (Debian's, compiled into its library) listens with a backlog of 5: when
// more clients connect at once — a concurrency-16 batch — the kernel drops the extra SYNs
// and those clients retry a second later, which a benchmark then measures as a 1 s time
// to first token. WidenListenBacklog records the listening socket as httplib creates it
// and, once bound, listens again on it with a backlog that fits (Linux updates it in place).
namespace tandem::rt {

class ListenBacklog {
 public:
  // Before bind: keeps httplib's own socket options and remembers the socket.
  explicit ListenBacklog(httplib::Server& server) : fd_(std::make_shared<std::atomic<int>>(-1)) {
    server.set_socket_options([fd = fd_](socket_t sock) {
      httplib::default_socket_options(sock);
      fd->store(sock);
    });
  }
  // After bind: true when the backlog is now `backlog` (the kernel caps it at somaxconn).
  bool Widen(int backlog) const {
    const int fd = fd_->load();
    return fd >= 0 && ::listen(fd, backlog) == 0;
  }

 private:
  std::shared_ptr<std::atomic<int>> fd_;
};

}  // namespace tandem::rt
