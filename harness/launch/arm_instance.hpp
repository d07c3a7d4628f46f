#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/launch/arm.hpp"
#include "harness/launch/cluster.hpp"
#include "harness/launch/session_process.hpp"

namespace tandem::harness {

// One session's running image pair: the coordinator (an OpenAI-compatible server) and
// its expert workers, launched for a layout on the layout's hosts (workers listening on
// their host's address, ports chosen at run time), or an external server that is only
// checked. Teardown (also on destruction) stops every process it started, on every host.
class ArmInstance {
 public:
  // How a launch went, as the harness saw it: seconds from the launch's start (just before its
  // first process started) to each process saying where it listens and to the server being
  // ready (/health answers and /v1/models lists the model), and each process's resident
  // memory once ready. None of it for an external server, which is not launched.
  struct LaunchRecord {
    double started_at = 0;                                  // MonotonicSeconds() at the start
    std::vector<std::pair<std::string, double>> listening;  // role → seconds, in start order
    std::optional<double> ready_s;
    std::vector<std::pair<std::string, std::uint64_t>> resident_bytes;  // role → bytes, once ready
    // What the server itself reports of its startup (/v1/stats "startup", Tandem's runtime):
    // seconds from its process's start to each phase it marks; none from other servers.
    std::vector<std::pair<std::string, double>> server_phases;
    std::optional<std::uint64_t> weight_bytes;
    // Each expert worker's own load of its slices, as its handshake told the coordinator
    // (/v1/stats "workers": load_s): role → seconds.
    std::vector<std::pair<std::string, double>> worker_loads;
  };

  struct LaunchContext;  // what one launch was given; only arm_instance.cpp sees inside

  // `tag` names this session's containers (unique per campaign and session);
  // `session_env` goes into the environment of every process it starts (the session's
  // worker token), over the arm's own; `on_started` gets the records (SessionProcess::
  // Record, without CPU time) of every process started so far, each time one starts, so
  // that a harness that dies during the launch leaves them for --resume to clean up. Throws
  // std::runtime_error when a process does not start, or the server is not healthy and
  // serving the model within `launch_timeout_s` (at once when it refuses the harness with
  // 401 or 403: a server that wants an API key); everything started is torn down first.
  static std::unique_ptr<ArmInstance> Launch(const ResolvedArm& arm, const LayoutSpec& layout, const Cluster& cluster,
                                             const std::string& tag, const std::filesystem::path& log_dir, double launch_timeout_s,
                                             const std::map<std::string, std::string>& session_env = {},
                                             const std::function<void(const nlohmann::json&)>& on_started = {});
  ~ArmInstance();

  const std::string& base_url() const { return base_url_; }
  const LaunchRecord& launch_record() const { return launch_; }
  // /v1/models as the server answered it once healthy (model id, revisions).
  const nlohmann::json& served() const { return served_; }
  // role, host, pid, CPU seconds and log of every process (read now; without CPU seconds:
  // no command on the hosts).
  nlohmann::json Processes(bool cpu_seconds = true) const;
  // Why a process it started has ended; empty while every one runs.
  std::string Crashed();
  // Stops everything; returns what was found left on a host afterwards (empty: nothing).
  std::string Teardown(double grace_s);

 private:
  ArmInstance() = default;
  // Starts a process and records it (and tells on_started) before anything waits on it.
  SessionProcess& Start(const ProcessPlan& plan, const LaunchContext& c);
  // Launched images: workers (and a peer rank) first, each on its host, then the coordinator.
  void StartImages(const LaunchContext& c);
  // Returns the address the worker says it listens on.
  std::string StartWorker(const LaunchContext& c, const std::string& role, int index, const std::string& host_name);
  // Command templates: they name the port, on this host.
  void StartCommands(const LaunchContext& c);
  void WaitReady(double timeout_s);
  // Ready: the time since the launch's start, then each process's memory.
  void RecordReady();
  // Why the server refused the harness (401/403 on `path`): with no key, that it wants one.
  std::string Refused(const std::string& path, int status) const;

  std::string base_url_;
  std::string label_;
  std::string api_key_;  // sent on every request; "" for a server that wants none
  std::string api_key_env_;
  nlohmann::json served_;
  LaunchRecord launch_;
  std::vector<std::unique_ptr<SessionProcess>> processes_;
};

}  // namespace tandem::harness
