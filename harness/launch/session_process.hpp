#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/launch/host.hpp"
#include "harness/launch/managed_process.hpp"

namespace tandem::harness {

// One process of a session, on some host: the runtime's command line, run directly or
// inside a container.
struct ProcessPlan {
  std::string role;  // coordinator | worker-N | peer-0
  const Host* host = nullptr;
  std::vector<std::string> argv;  // executable (a path on the host) and arguments; for a container, the image's arguments
  std::map<std::string, std::string> env;
  std::string cpus;           // "0-3": pinned there; empty: not pinned
  std::filesystem::path log;  // on the harness's machine: the process's output is streamed here
  std::string engine;         // docker | podman: run argv in a container of `image`
  std::string image;
  std::vector<std::string> run_args;   // extra `engine run` arguments
  std::vector<std::string> read_only;  // host directories the container sees at the same path, read-only
  std::string container_name;          // unique per campaign, session and role
};

// A session's process, started from a plan. Every process runs in its own process group
// on its host (a container: as the container), its output streamed into the plan's log.
// Terminate() stops it (SIGTERM, then SIGKILL after the grace period; a container with
// `engine stop` then `engine rm -f`) and checks that nothing of it is left on the host.
// A harness that dies leaves a record (Record()) from which KillLeftovers finds what
// remains, on whichever host it ran.
class SessionProcess {
 public:
  // Throws std::runtime_error naming the role and host when it cannot start.
  static std::unique_ptr<SessionProcess> Start(const ProcessPlan& plan, std::chrono::milliseconds timeout);
  ~SessionProcess();  // Terminate with a short grace
  SessionProcess(const SessionProcess&) = delete;
  SessionProcess& operator=(const SessionProcess&) = delete;

  const std::string& role() const { return plan_.role; }
  const Host& host() const { return *plan_.host; }
  const std::filesystem::path& log() const { return plan_.log; }
  // The next output line containing `needle`, or nullopt on timeout or exit; a line
  // containing `progress` starts the timeout over (ManagedProcess::WaitForLine).
  std::optional<std::string> WaitForLine(const std::string& needle, std::chrono::milliseconds timeout, const std::string& progress = "");
  bool running();
  // Why it ended, for a failed session: "the worker-2 on host dodo (ssh …) exited with code 1
  // (see LOG)", "the coordinator was killed by signal 9 (SIGKILL) (see LOG)". On another host
  // the wrapper there reports how the process ended; when the SSH connection ended first,
  // the message says that, and that the process's fate there is unknown.
  std::string DescribeExit();
  // Stops it; returns "" when nothing of it is left on its host, else what is.
  std::string Terminate(std::chrono::milliseconds grace);
  // role, host, pid (its process group on its host), start_ticks, cpu_seconds, log, and
  // container (its name) for a container: what `tandem show` prints and resume needs.
  nlohmann::json Record(bool cpu_seconds = true) const;  // without: no cpu_seconds, no command on the host
  // Resident memory now, in bytes: the sum over the live members of its process group on
  // its host (a container: its main process); none when it cannot be read.
  std::optional<std::uint64_t> ResidentBytes() const;

 private:
  explicit SessionProcess(ProcessPlan plan) : plan_(std::move(plan)) {}

  ProcessPlan plan_;
  std::unique_ptr<ManagedProcess> process_;  // here: the process itself, or the ssh / engine client that runs it
  int pid_ = 0;                              // the process group on its host
  std::uint64_t start_ticks_ = 0;
  bool stopped_ = false;
};

// The script that runs `command` on another host (through Host::Command). It first reads its
// environment from stdin (EnvironmentScript: secrets never stand on a command line, where
// `ps` shows them), then runs the command in a session and process group of its own
// (setsid), printing "tandem-process PID START_TICKS" as it starts, and once it has ended
// "tandem-ended code N" or "tandem-ended signal N" ("… core" when it dumped core) as the
// last line of stdout: ssh's own exit code cannot tell an exit with 137 from a SIGKILL.
std::string RemoteProcessScript(const std::vector<std::string>& command);
// `export NAME='value'` lines, the stdin of RemoteProcessScript. Throws std::invalid_argument
// for a name that is not a shell variable name.
std::string EnvironmentScript(const std::map<std::string, std::string>& env);
// How the process ended, from RemoteProcessScript's last line; nullopt for any other line.
std::optional<ProcessEnd> ParseRemoteEnd(const std::string& line);
// The `engine run` command line of a container process: its environment by name only
// (`--env NAME`: the engine client passes its own value on, so no value is on a command line).
std::vector<std::string> ContainerCommand(const ProcessPlan& plan);

// Kills (SIGKILL) what is left of a recorded process (Record()) on `host`: the members of
// its process group started no earlier than it, or its container. Returns how many
// processes or containers it removed.
int KillLeftovers(const nlohmann::json& record, const Host& host);

}  // namespace tandem::harness
