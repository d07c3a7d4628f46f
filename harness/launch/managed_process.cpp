#include "harness/launch/managed_process.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/child_wait.hpp"
#include "common/input_error.hpp"
#include "harness/campaign/cpu_list.hpp"

namespace tandem::harness {

namespace bp = boost::process;

namespace {

// The fields of /proc/PID/stat after the command name: state is [0], pgrp [2],
// utime [11], stime [12], cutime [13], cstime [14], starttime [19].
std::vector<std::string> StatFields(int pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  std::getline(in, stat);
  std::vector<std::string> f;
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 > stat.size()) return f;
  std::istringstream fields(stat.substr(close + 2));
  for (std::string x; fields >> x;) f.push_back(x);
  return f;
}

// Writes `input` to the non-blocking pipe end `fd`, then closes it: the reading process
// sees its end of file. Stops early when the reader is gone (EPIPE; the SIGPIPE that comes
// with it is blocked on this thread and taken, so it kills nothing) or when `stop` is set.
void FeedPipe(int fd, const std::string& input, const std::atomic<bool>& stop) {
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
  std::size_t done = 0;
  while (done < input.size() && !stop) {
    pollfd p{.fd = fd, .events = POLLOUT, .revents = 0};
    const int ready = ::poll(&p, 1, 100);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = ::write(fd, input.data() + done, input.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
      break;
    }
  }
  ::close(fd);
  const timespec now{};
  while (::sigtimedwait(&pipe_signal, nullptr, &now) == SIGPIPE) {
  }
}

}  // namespace

int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  if (fd >= 0) ::close(fd);
  if (port == 0) throw std::runtime_error("cannot find a free loopback port");
  return port;
}

namespace {

// The process groups of the ManagedProcesses alive now (TerminateEveryProcessGroup).
std::mutex g_groups_mutex;
std::set<pid_t> g_groups;

// The processes other than this one that hold the pipe `fd` is an end of, killed, as
// "pid P (command)"; empty when none does.
std::vector<std::string> KillPipeHolders(int fd) {
  struct stat pipe {};
  if (::fstat(fd, &pipe) != 0) return {};
  const std::string target = fmt::format("pipe:[{}]", pipe.st_ino);
  std::vector<std::string> killed;
  std::error_code ec;
  for (const auto& proc : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = proc.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos || std::stoi(name) == ::getpid()) continue;
    bool holds = false;
    std::error_code fd_ec;
    for (const auto& entry : std::filesystem::directory_iterator(proc.path() / "fd", fd_ec)) {
      std::error_code link_ec;
      if (std::filesystem::read_symlink(entry.path(), link_ec).string() == target) {
        holds = true;
        break;
      }
    }
    if (!holds) continue;
    std::ifstream in(proc.path() / "cmdline", std::ios::binary);
    std::string command((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::replace(command.begin(), command.end(), '\0', ' ');
    while (!command.empty() && command.back() == ' ') command.pop_back();
    ::kill(std::stoi(name), SIGKILL);
    killed.push_back(fmt::format("pid {} ({})", name, command.substr(0, 120)));
  }
  return killed;
}

}  // namespace

namespace {

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

// A descriptor owned here: closed unless released to its next owner.
class OwnedFd {
 public:
  OwnedFd() = default;
  explicit OwnedFd(int fd) : fd_(fd) {}
  OwnedFd(OwnedFd&& other) noexcept : fd_(other.release()) {}
  OwnedFd& operator=(OwnedFd&& other) noexcept {
    if (this != &other) {
      Close();
      fd_ = other.release();
    }
    return *this;
  }
  ~OwnedFd() { Close(); }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  int fd_ = -1;
};

// stdin: the input through a pipe that a thread here fills and closes once the process has
// started (a file, even an unlinked one, would reach the disk where /tmp is not a tmpfs; the
// thread, because the input may be more than the pipe holds), else /dev/null. Both ends
// close on exec, so no other process the harness starts meanwhile holds the write end open
// (the reader would never see its end of file).
struct ChildInput {
  File read{nullptr, std::fclose};  // the process's end
  OwnedFd feed;                     // the write end, non-blocking; none for /dev/null
};

ChildInput OpenInput(bool piped) {
  ChildInput in;
  if (!piped) {
    in.read.reset(std::fopen("/dev/null", "rb"));
  } else {
    int ends[2];
    if (::pipe2(ends, O_CLOEXEC) != 0) throw std::runtime_error("cannot create a pipe for a process's standard input");
    OwnedFd read_end(ends[0]);
    in.feed = OwnedFd(ends[1]);
    in.read.reset(::fdopen(read_end.get(), "rb"));
    if (in.read != nullptr) read_end.release();
    ::fcntl(in.feed.get(), F_SETFL, ::fcntl(in.feed.get(), F_GETFL) | O_NONBLOCK);  // the write end only: the process reads as usual
  }
  if (in.read == nullptr) throw std::runtime_error("cannot open a process's standard input");
  return in;
}

// stdout: a pipe read here with a deadline, never waiting on its end of file alone (a child
// that outlives the process may hold it open). Our ends close on exec.
struct ChildOutput {
  File write{nullptr, std::fclose};  // the process's end
  OwnedFd read;
};

ChildOutput OpenOutput() {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) throw std::runtime_error("cannot create a pipe for a process's standard output");
  ChildOutput out;
  out.read = OwnedFd(ends[0]);
  OwnedFd write_end(ends[1]);
  out.write.reset(::fdopen(write_end.get(), "wb"));
  if (out.write == nullptr) throw std::runtime_error("cannot open a process's standard output");
  write_end.release();
  return out;
}

}  // namespace

struct ManagedProcess::Impl {
  std::filesystem::path log;
  int out = -1;  // the read end of the process's standard output
  std::atomic<bool> stop_reading = false;
  bp::child child;
  std::thread reader;
  std::thread writer;  // feeds stdin its input
  std::atomic<bool> stop_writing = false;
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::string> lines;
  bool closed = false;
  std::string last_line;
  std::optional<ProcessEnd> end;

  // The reader thread: each line of the output to the log's .stdout file and to the waiters.
  void ReadOutput();
  void Deliver(const std::string& line);
};

void ManagedProcess::Impl::Deliver(const std::string& line) {
  { std::ofstream(log.string() + ".stdout", std::ios::app) << line << '\n'; }
  std::lock_guard lock(mutex);
  last_line = line;
  lines.push_back(line);
  ready.notify_all();
}

void ManagedProcess::Impl::ReadOutput() {
  std::string pending;
  char buffer[4096];
  while (!stop_reading) {
    pollfd p{.fd = out, .events = POLLIN, .revents = 0};
    const int polled = ::poll(&p, 1, 100);
    if (polled < 0 && errno != EINTR) break;
    if (polled <= 0) continue;
    const ssize_t n = ::read(out, buffer, sizeof buffer);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;  // end of file: every writer is gone
    pending.append(buffer, static_cast<std::size_t>(n));
    for (std::size_t end_of_line; (end_of_line = pending.find('\n')) != std::string::npos;) {
      Deliver(pending.substr(0, end_of_line));
      pending.erase(0, end_of_line + 1);
    }
    if (pending.size() > (1u << 20)) {  // a line without end: taken as it is, bounded
      Deliver(pending);
      pending.clear();
    }
  }
  if (!pending.empty()) Deliver(pending);
  std::lock_guard lock(mutex);
  closed = true;
  ready.notify_all();
}

ManagedProcess::ManagedProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                               const std::filesystem::path& log, const std::string& cpus, const std::string& input)
    : impl_(std::make_unique<Impl>()) {
  if (argv.empty()) throw InputError("cannot start an empty command");
  Impl& s = *impl_;
  s.log = log;
  std::error_code ec;
  if (log.has_parent_path()) std::filesystem::create_directories(log.parent_path(), ec);
  std::vector<int> cpu_list;
  if (!cpus.empty()) cpu_list = ParseCpuList(cpus);
  bp::environment environment = boost::this_process::environment();
  for (const auto& [key, value] : env) environment[key] = value;
  const std::string program = argv[0].find('/') == std::string::npos ? bp::search_path(argv[0]).string() : argv[0];
  if (program.empty()) throw InputError(fmt::format("'{}' is not on PATH", argv[0]));
  // In the child, before exec: its own process group, death with the harness, and the
  // CPU pinning. (If the harness died before the prctl, the child is already orphaned.)
  const pid_t harness = ::getpid();
  auto setup = [cpu_list, harness](auto&) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != harness) ::_exit(127);
    if (!cpu_list.empty()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int c : cpu_list) CPU_SET(c, &set);
      ::sched_setaffinity(0, sizeof set, &set);
    }
  };
  ChildInput in = OpenInput(!input.empty());
  ChildOutput out = OpenOutput();
  try {
    s.child =
        bp::child(bp::exe = program, bp::args = std::vector<std::string>(argv.begin() + 1, argv.end()), environment,
                  bp::std_in<in.read.get(), bp::std_out> out.write.get(), bp::std_err > log.string(), bp::extend::on_exec_setup = setup);
  } catch (const bp::process_error& e) {
    throw InputError(fmt::format("cannot start {}: {}", program, e.what()));
  }
  s.out = out.read.release();
  {
    std::lock_guard lock(g_groups_mutex);
    g_groups.insert(static_cast<pid_t>(s.child.id()));
  }
  in.read.reset();    // the process holds the read end now: once it is gone, writing fails
  out.write.reset();  // and the write end of its output: once every holder is gone, reading ends
  if (in.feed.get() >= 0) {
    s.writer = std::thread(FeedPipe, in.feed.get(), input, std::cref(s.stop_writing));
    in.feed.release();  // FeedPipe closes it
  }
  s.reader = std::thread([&s] { s.ReadOutput(); });
}

ManagedProcess::~ManagedProcess() { Terminate(std::chrono::milliseconds(2000)); }

std::optional<std::string> ManagedProcess::WaitForLine(const std::string& needle, std::chrono::milliseconds timeout,
                                                       const std::string& progress) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock lock(impl_->mutex);
  for (;;) {
    while (!impl_->lines.empty()) {
      std::string line = std::move(impl_->lines.front());
      impl_->lines.pop_front();
      if (line.find(needle) != std::string::npos) return line;
      if (!progress.empty() && line.find(progress) != std::string::npos) deadline = std::chrono::steady_clock::now() + timeout;
    }
    if (impl_->closed) return std::nullopt;
    if (impl_->ready.wait_until(lock, deadline) == std::cv_status::timeout && impl_->lines.empty()) return std::nullopt;
  }
}

int ManagedProcess::pid() const { return impl_->child.id(); }

bool ManagedProcess::running() {
  std::error_code ec;
  return impl_->child.valid() && impl_->child.running(ec);
}

std::uint64_t ManagedProcess::start_ticks() const {
  const std::vector<std::string> f = StatFields(impl_->child.id());
  return f.size() < 20 ? 0 : std::stoull(f[19]);
}

double ManagedProcess::CpuSeconds() const {
  const std::vector<std::string> f = StatFields(impl_->child.id());
  if (f.size() < 15) return 0.0;
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  return (std::stod(f[11]) + std::stod(f[12]) + std::stod(f[13]) + std::stod(f[14])) / ticks;
}

std::optional<ProcessEnd> ManagedProcess::End() {
  std::error_code ec;
  // native_exit_code: the wait status; Boost's exit_code() gives a killing signal's number
  // as if it were an exit code.
  if (!impl_->end && impl_->child.valid() && !impl_->child.running(ec))
    impl_->end = ProcessEnd::FromWaitStatus(impl_->child.native_exit_code());
  return impl_->end;
}

std::string ManagedProcess::LastLine(std::chrono::milliseconds wait) {
  std::unique_lock lock(impl_->mutex);
  impl_->ready.wait_for(lock, wait, [this] { return impl_->closed; });
  return impl_->last_line;
}

void TerminateEveryProcessGroup() {
  std::lock_guard lock(g_groups_mutex);
  for (const pid_t group : g_groups) ::kill(-group, SIGTERM);
}

std::string ManagedProcess::Terminate(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  std::error_code ec;
  if (s.child.valid() && s.child.running(ec)) {
    const pid_t group = s.child.id();
    ::kill(-group, SIGTERM);
    if (!WaitForExit(s.child, grace)) {
      ::kill(-group, SIGKILL);
    }
  }
  if (s.child.valid()) {
    s.child.wait(ec);
    if (!s.end) s.end = ProcessEnd::FromWaitStatus(s.child.native_exit_code());
    ::kill(-s.child.id(), SIGKILL);  // anything the child left behind in its group
    std::lock_guard lock(g_groups_mutex);
    g_groups.erase(static_cast<pid_t>(s.child.id()));
  }
  s.stop_writing = true;  // in case something outside the group still holds the read end
  if (s.writer.joinable()) s.writer.join();
  std::string left;
  if (s.reader.joinable()) {
    // The output ends once its last writer is gone; one still open a moment after the
    // group is dead is held by something that escaped it.
    {
      std::unique_lock lock(s.mutex);
      s.ready.wait_for(lock, std::chrono::milliseconds(500), [&s] { return s.closed; });
    }
    if (!s.closed) {
      const std::vector<std::string> held = KillPipeHolders(s.out);
      if (!held.empty()) {
        left = fmt::format("{} outlived its process group holding its output, killed: {}", held.size() == 1 ? "a process" : "processes",
                           fmt::join(held, ", "));
      }
    }
    s.stop_reading = true;
    s.reader.join();
  }
  if (s.out >= 0) {
    ::close(s.out);
    s.out = -1;
  }
  return left;
}

const std::filesystem::path& ManagedProcess::log() const { return impl_->log; }

CommandResult RunCommand(const std::vector<std::string>& argv, std::chrono::milliseconds timeout, const std::filesystem::path& input) {
  if (argv.empty()) throw InputError("cannot run an empty command");
  const std::string program = argv[0].find('/') == std::string::npos ? bp::search_path(argv[0]).string() : argv[0];
  if (program.empty()) throw InputError(fmt::format("'{}' is not on PATH", argv[0]));
  // Output goes to unlinked temporary files: a pipe would need reader threads, and a
  // command must never block on a full pipe the harness is not draining.
  auto scratch = [](const char* what) {
    std::FILE* f = std::tmpfile();
    if (f == nullptr) throw std::runtime_error(fmt::format("cannot create a temporary file for a command's {}", what));
    return std::unique_ptr<std::FILE, int (*)(std::FILE*)>(f, std::fclose);
  };
  auto out = scratch("stdout"), err = scratch("stderr");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(std::fopen(input.empty() ? "/dev/null" : input.c_str(), "rb"), std::fclose);
  if (in == nullptr) throw InputError(fmt::format("{}: cannot read", input.string()));
  const pid_t harness = ::getpid();
  std::error_code ec;
  CommandResult r;
  bp::child child;
  try {
    child = bp::child(
        bp::exe = program, bp::args = std::vector<std::string>(argv.begin() + 1, argv.end()), bp::std_in<in.get(), bp::std_out> out.get(),
        bp::std_err > err.get(), bp::extend::on_exec_setup = [harness](auto&) {
          ::setpgid(0, 0);
          ::prctl(PR_SET_PDEATHSIG, SIGKILL);
          if (::getppid() != harness) ::_exit(127);
        });
  } catch (const bp::process_error& e) {
    throw InputError(fmt::format("cannot start {}: {}", program, e.what()));
  }
  if (WaitForExit(child, timeout)) {
    const ProcessEnd end = ProcessEnd::FromWaitStatus(child.native_exit_code());
    r.code = end.killed() ? -1 : end.code;
    r.signal = end.signal;
  } else {
    r.timed_out = true;
    ::kill(-child.id(), SIGKILL);
    child.wait(ec);
  }
  ::kill(-child.id(), SIGKILL);  // what it left in its group
  auto slurp = [](std::FILE* f) {
    std::string text;
    std::rewind(f);
    char buffer[65536];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, f)) > 0 && text.size() < (4u << 20);) text.append(buffer, n);
    return text;
  };
  r.out = slurp(out.get());
  r.err = slurp(err.get());
  return r;
}

int RunToCompletion(const std::vector<std::string>& argv, const std::filesystem::path& log, std::chrono::seconds timeout,
                    const std::filesystem::path& cwd) {
  const std::string program = argv[0].find('/') == std::string::npos ? bp::search_path(argv[0]).string() : argv[0];
  if (program.empty()) throw InputError(fmt::format("'{}' is not on PATH", argv[0]));
  std::error_code ec;
  if (log.has_parent_path()) std::filesystem::create_directories(log.parent_path(), ec);
  FILE* out = std::fopen(log.c_str(), "a");
  if (out == nullptr) throw InputError(fmt::format("{}: cannot write", log.string()));
  bp::child child(
      bp::exe = program, bp::args = std::vector<std::string>(argv.begin() + 1, argv.end()),
      bp::start_dir = cwd.empty() ? std::filesystem::current_path().string() : cwd.string(), bp::std_in.close(),
      (bp::std_out & bp::std_err) > out, bp::extend::on_exec_setup = [](auto&) { ::setpgid(0, 0); });
  int code = -1;
  if (WaitForExit(child, timeout)) {
    const ProcessEnd end = ProcessEnd::FromWaitStatus(child.native_exit_code());
    code = end.killed() ? -1 : end.code;
  } else {
    ::kill(-child.id(), SIGKILL);
    child.wait(ec);
  }
  std::fclose(out);
  return code;
}

}  // namespace tandem::harness
