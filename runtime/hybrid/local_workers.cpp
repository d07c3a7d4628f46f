#include "runtime/hybrid/local_workers.hpp"

#include <csignal>
#include <cstring>
#include <future>
#include <stdexcept>

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <fmt/format.h>

#include "runtime/hybrid/worker_token.hpp"

namespace tandem::rt {

namespace bp = boost::process;

struct LocalWorkers::Child {
  bp::ipstream out;
  bp::child process;
  std::string role;
  std::string address;
};

namespace {

// SIGKILL, then reaped. Not child::terminate: in Boost 1.74 it reaps only a child
// already gone when it looks (waitpid with WNOHANG right after the signal) and then
// makes wait() do nothing, leaving a zombie.
void KillAndReap(bp::child& child) {
  std::error_code ec;
  if (!child.valid() || !child.running(ec)) return;  // running() reaps one that ended
  ::kill(child.id(), SIGKILL);
  child.wait(ec);
}

std::filesystem::path SelfExecutable() { return std::filesystem::read_symlink("/proc/self/exe"); }

// Runs in the child between fork and exec, so only async-signal-safe calls. A signal
// mask and ignored signals survive exec: `serve` blocks SIGTERM and SIGINT in every
// thread to sigwait on them, and a worker must not start with them blocked. The
// death signal makes the kernel kill the worker when the thread that forked it ends —
// the spawning thread is the coordinator's main thread, so when the coordinator dies,
// however it dies (SIGKILL included). If the coordinator died before the prctl took
// effect, the worker has already been reparented: then it must not start at all.
void StartClean(pid_t coordinator) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  for (int signal = 1; signal < NSIG; ++signal) {
    if (signal != SIGKILL && signal != SIGSTOP) sigaction(signal, &default_action, nullptr);  // fails harmlessly for invalid ones
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != coordinator) _exit(127);
}

}  // namespace

LocalWorkers::LocalWorkers(const std::filesystem::path& model, int workers, bool peer, int threads_each, std::filesystem::path tandem_rt,
                           std::vector<std::string> extra_args, std::chrono::milliseconds start_timeout,
                           const std::optional<std::string>& token) {
  const std::filesystem::path self = tandem_rt.empty() ? SelfExecutable() : tandem_rt;
  const pid_t coordinator = getpid();
  bp::environment environment = boost::this_process::environment();
  if (token) {
    environment[kWorkerTokenEnv] = *token;
  } else {
    environment.erase(kWorkerTokenEnv);
  }
  auto spawn = [&](const std::string& role) {
    auto child = std::make_unique<Child>();
    std::vector<std::string> args = {
        "expert", "--listen", "127.0.0.1:0", "--model", model.string(), "--threads", std::to_string(threads_each), "--role", role};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    child->process = bp::child(
        bp::exe = self.string(), bp::args = args, environment, bp::std_in.close(), bp::std_out > child->out,
        bp::extend::on_exec_setup = [coordinator](auto&) { StartClean(coordinator); });
    // The first line says where it listens; a reader thread makes the wait bounded.
    auto line = std::async(std::launch::async, [&out = child->out] {
      std::string l;
      std::getline(out, l);
      return l;
    });
    if (line.wait_for(start_timeout) != std::future_status::ready) {
      KillAndReap(child->process);  // closes the pipe, which ends the reader
      line.wait();
      throw std::runtime_error(fmt::format("a spawned expert {} did not start within {} ms", role, start_timeout.count()));
    }
    const std::string text = line.get();
    const auto at = text.rfind(' ');
    if (text.find("listening on ") == std::string::npos || at == std::string::npos) {
      throw std::runtime_error(fmt::format("a spawned expert {} failed to start (said: '{}')", role, text));
    }
    std::string address = text.substr(at + 1);
    child->role = role;
    child->address = address;
    children_.push_back(std::move(child));
    return address;
  };
  try {
    if (peer) peer_ = spawn("peer");
    for (int i = 0; i < workers; ++i) workers_.push_back(spawn("worker"));
  } catch (...) {
    for (auto& c : children_) KillAndReap(c->process);
    throw;
  }
}

std::string LocalWorkers::Ended() {
  std::string ended;
  for (auto& c : children_) {
    std::error_code ec;
    if (!c->process.valid() || c->process.running(ec)) continue;  // running() reaps one that has ended
    const int status = c->process.native_exit_code();
    std::string how;
    if (WIFSIGNALED(status)) {
      const int signal = WTERMSIG(status);
      const char* name = sigabbrev_np(signal);
      how = fmt::format("was killed by signal {}{}", signal, name != nullptr ? fmt::format(" (SIG{})", name) : "");
    } else {
      how = fmt::format("exited with code {}", WEXITSTATUS(status));
    }
    ended += fmt::format("{}the spawned expert {} {} (pid {}) {}", ended.empty() ? "" : "; ", c->role, c->address, c->process.id(), how);
  }
  return ended;
}

LocalWorkers::~LocalWorkers() {
  for (auto& c : children_) KillAndReap(c->process);
}

}  // namespace tandem::rt
