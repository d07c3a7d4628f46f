#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace tandem::testing {

// A long-running child (an expert worker, a server) for integration tests. Its
// stdout lines are collected by a reader thread; stderr goes to a file. The
// destructor kills the child if it still runs and always reaps it.
class ChildProcess {
 public:
  ChildProcess(const std::string& program, const std::vector<std::string>& args, const std::string& stderr_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The next stdout line, or nullopt if none arrives within `timeout` (or stdout closed).
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout);
  int pid() const;
  bool running();
  // The exit code once the child has ended within `timeout`; nullopt if it still runs.
  std::optional<int> WaitExit(std::chrono::milliseconds timeout);
  void Kill();  // SIGKILL and reap
  void Signal(int signal);
  void Pause();   // SIGSTOP
  void Resume();  // SIGCONT

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A process's /proc file (cmdline, status, environ): empty when the process has gone
// meanwhile. Reading one whose process exits mid-read fails with ESRCH, which
// std::ifstream turns into an exception.
std::string ReadProcFile(int pid, const char* name);

}  // namespace tandem::testing
