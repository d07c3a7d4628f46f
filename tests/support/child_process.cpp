#include "tests/support/child_process.hpp"

#include <csignal>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include <boost/process.hpp>

#include "common/child_wait.hpp"

namespace tandem::testing {

namespace bp = boost::process;

struct ChildProcess::Impl {
  bp::ipstream out;
  bp::child child;
  std::thread reader;
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::string> lines;
  bool closed = false;
};

ChildProcess::ChildProcess(const std::string& program, const std::vector<std::string>& args, const std::string& stderr_path)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.child = bp::child(bp::exe = program, bp::args = args, bp::std_in.close(), bp::std_out > s.out, bp::std_err > stderr_path);
  s.reader = std::thread([&s] {
    std::string line;
    while (std::getline(s.out, line)) {
      std::lock_guard lock(s.mutex);
      s.lines.push_back(line);
      s.ready.notify_all();
    }
    std::lock_guard lock(s.mutex);
    s.closed = true;
    s.ready.notify_all();
  });
}

ChildProcess::~ChildProcess() {
  Kill();
  if (impl_->reader.joinable()) impl_->reader.join();
}

std::optional<std::string> ChildProcess::ReadLine(std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mutex);
  if (!impl_->ready.wait_for(lock, timeout, [&] { return !impl_->lines.empty() || impl_->closed; })) return std::nullopt;
  if (impl_->lines.empty()) return std::nullopt;
  std::string line = std::move(impl_->lines.front());
  impl_->lines.pop_front();
  return line;
}

int ChildProcess::pid() const { return impl_->child.id(); }

bool ChildProcess::running() { return impl_->child.valid() && impl_->child.running(); }

void ChildProcess::Kill() {
  std::error_code ec;
  if (impl_->child.valid() && impl_->child.running(ec)) ::kill(impl_->child.id(), SIGCONT);  // a stopped child must be able to die
  KillAndReap(impl_->child);
}

std::optional<int> ChildProcess::WaitExit(std::chrono::milliseconds timeout) {
  if (!WaitForExit(impl_->child, timeout)) return std::nullopt;
  return impl_->child.exit_code();
}

void ChildProcess::Signal(int signal) { ::kill(impl_->child.id(), signal); }

void ChildProcess::Pause() { ::kill(impl_->child.id(), SIGSTOP); }
void ChildProcess::Resume() { ::kill(impl_->child.id(), SIGCONT); }

std::string ReadProcFile(int pid, const char* name) {
  const std::string path = "/proc/" + std::to_string(pid) + "/" + name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) out.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  return n < 0 ? "" : out;
}

}  // namespace tandem::testing
