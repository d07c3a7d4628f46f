#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/launch/process_end.hpp"

namespace tandem::harness {

// A child process the harness owns: its own process group (so teardown reaches
// whatever it starts), optionally pinned to CPUs, stderr and stdout written to a log
// file, stdout lines also readable; stdin reads `input` (or nothing). Terminate() sends SIGTERM to the group, waits up
// to a grace period, then SIGKILLs the group; the child is always reaped. If the
// harness itself dies (kill -9), the kernel kills the child (PR_SET_PDEATHSIG), and
// `tandem run --resume` kills what is left of its group (KillLeftovers, session_process.hpp). Create
// it on a thread that outlives it: the death signal follows the creating thread.
class ManagedProcess {
 public:
  // `input` never reaches a command line or a file (a pipe carries it, filled by a thread
  // of the harness): how secrets reach a process on another host.
  ManagedProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env, const std::filesystem::path& log,
                 const std::string& cpus = "", const std::string& input = "");
  ~ManagedProcess();
  ManagedProcess(const ManagedProcess&) = delete;
  ManagedProcess& operator=(const ManagedProcess&) = delete;

  // The next stdout line containing `needle`, or nullopt on timeout or exit. A line
  // containing `progress` (when not empty) starts the timeout over: a process that says
  // it is still getting somewhere is waited for.
  std::optional<std::string> WaitForLine(const std::string& needle, std::chrono::milliseconds timeout, const std::string& progress = "");
  int pid() const;
  // The kernel's start time of the process (clock ticks since boot), which tells it
  // apart from a later process that reuses its pid.
  std::uint64_t start_ticks() const;
  bool running();
  // User + system CPU seconds of the process and its reaped children, from /proc.
  double CpuSeconds() const;
  // How it ended, once it has; nullopt while it runs.
  std::optional<ProcessEnd> End();
  // The last line it wrote to stdout, once its stdout has closed (waiting up to `wait` for
  // that); what a wrapper that outlives the process reports about it.
  std::string LastLine(std::chrono::milliseconds wait);
  // SIGTERM to its process group, SIGKILL after `grace`, and the process reaped. What
  // outlived the group while holding its output (a child started with setsid, say) is
  // found by that pipe, killed, and described in the returned text ("" when nothing was).
  std::string Terminate(std::chrono::milliseconds grace);
  const std::filesystem::path& log() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// SIGTERM to the process group of every ManagedProcess alive in this harness: what an
// interrupted campaign does first, so that the session's requests and waits end at once
// (its teardown then runs as usual). Safe from any thread.
void TerminateEveryProcessGroup();

// What a short command printed, and how it ended.
struct CommandResult {
  int code = -1;   // exit code; -1 when it ran past its timeout (it was killed) or died of a signal
  int signal = 0;  // the signal that killed it (not after a timeout)
  bool timed_out = false;
  std::string out, err;
};

// Runs a short command to completion in its own process group (killed with the harness),
// stdin from `input` (or nothing), capturing stdout and stderr (each cut at 4 MiB).
CommandResult RunCommand(const std::vector<std::string>& argv, std::chrono::milliseconds timeout, const std::filesystem::path& input = {});

// Runs a command to completion (a build step), output appended to `log`. Returns the
// exit code; -1 when it ran past `timeout` (it is then killed) or a signal killed it.
int RunToCompletion(const std::vector<std::string>& argv, const std::filesystem::path& log, std::chrono::seconds timeout,
                    const std::filesystem::path& cwd = {});

// A TCP port on 127.0.0.1 that was free a moment ago (for servers whose port must be
// chosen before they start).
int FreeLoopbackPort();

}  // namespace tandem::harness
