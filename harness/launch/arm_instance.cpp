#include "harness/launch/arm_instance.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/traffic/sse_client.hpp"

namespace tandem::harness {

namespace {

// A line a launched server prints while it loads (Tandem's coordinator: one per expert
// worker, every two seconds while its load advances): the launch timeout starts over.
constexpr const char* kLoadingProgress = "loading progress: ";

std::string Substitute(std::string text, const std::string& key, const std::string& value) {
  for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size())) text.replace(at, key.size(), value);
  return text;
}

std::string AddressOf(const std::string& listening_line) {
  std::string text = listening_line.substr(listening_line.rfind(' ') + 1);
  if (text.rfind("http://", 0) == 0) text = text.substr(7);
  return text;
}

// The last lines of a log, for a failure that should say what the process said.
std::string LogTail(const std::filesystem::path& log, std::size_t lines = 5) {
  std::ifstream in(log, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - 4096);
  in.seekg(from);
  std::string text(static_cast<std::size_t>(size - from), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  std::vector<std::string> kept;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) {
    if (!line.empty()) kept.push_back(line);
  }
  if (kept.size() > lines) kept.erase(kept.begin(), kept.end() - static_cast<std::ptrdiff_t>(lines));
  return kept.empty() ? "" : "; its log ends: " + fmt::format("{}", fmt::join(kept, " | "));
}

// Why a process never said where it listens: it ended (how, after how long, and what it
// said last), or it is still quiet. Its output closes as it exits, just before the exit
// can be seen: a wait that ended early gives the exit a moment instead of calling it quiet.
std::string NotStarted(SessionProcess& process, double timeout_s, std::chrono::steady_clock::time_point since) {
  const auto waited = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count(); };
  if (waited() < timeout_s) {
    for (int i = 0; i < 250 && process.running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!process.running()) {
    return fmt::format("the {} did not start: {} after {:.1f} s{}", process.role(), process.DescribeExit(), waited(),
                       LogTail(process.log()));
  }
  if (waited() < timeout_s) {
    return fmt::format("the {} closed its output after {:.1f} s without saying where it listens (see {}){}", process.role(), waited(),
                       process.log().string(), LogTail(process.log()));
  }
  return fmt::format("the {} did not report where it listens, nor loading progress, for {:.0f} s (timeouts.launch_s; see {}){}",
                     process.role(), timeout_s, process.log().string(), LogTail(process.log()));
}

}  // namespace

struct ArmInstance::LaunchContext {
  const ResolvedArm& arm;
  const LayoutSpec& layout;
  const Cluster& cluster;
  const std::string& tag;
  const std::filesystem::path& log_dir;
  double timeout_s;
  std::chrono::milliseconds timeout;
  const std::map<std::string, std::string>& session_env;
  const std::function<void(const nlohmann::json&)>& on_started;
};

namespace {

// One process of a role on a host: the role's executable there, or its image.
ProcessPlan PlanProcess(const ArmInstance::LaunchContext& c, Role role, const std::string& name, const std::string& host_name) {
  const RoleImage& image = role == Role::kCoordinator ? c.arm.coordinator : c.arm.worker;
  ProcessPlan p;
  p.role = name;
  p.host = &c.cluster.host(host_name);
  p.env = image.env;
  for (const auto& [variable, value] : c.session_env) p.env[variable] = value;
  p.log = c.log_dir / (p.host->local() ? name + ".log" : fmt::format("{}-{}.log", host_name, name));
  if (image.container()) {
    p.engine = image.engine;
    p.image = image.image;
    p.run_args = image.run_args;
    p.read_only = {c.cluster.model_dir(host_name)};
    p.container_name = fmt::format("tandem-{}-{}", c.tag, name);
  } else {
    p.argv = {c.cluster.image(c.arm.spec.label, role, host_name).executable};
  }
  return p;
}

void Append(std::vector<std::string>& argv, const std::vector<std::string>& more) { argv.insert(argv.end(), more.begin(), more.end()); }

// The coordinator's flags for its workers (and its peer rank), as the layout places them.
void AppendExpertFlags(const LayoutSpec& layout, const std::vector<std::string>& experts, const std::string& peer,
                       std::vector<std::string>& argv) {
  if (experts.empty() && peer.empty()) return;
  std::string list;
  for (const std::string& e : experts) list += (list.empty() ? "" : ",") + e;
  if (!list.empty()) Append(argv, {"--experts", list});
  Append(argv, {"--expert-parallel", layout.expert_parallel, "--local-expert-layers", std::to_string(layout.local_expert_layers),
                "--wire-dtype", layout.wire_dtype, "--partial-dtype", layout.partial_dtype});
  if (!peer.empty()) Append(argv, {"--coordinator-ranks", "2", "--peer", peer});
}

}  // namespace

std::unique_ptr<ArmInstance> ArmInstance::Launch(const ResolvedArm& arm, const LayoutSpec& layout, const Cluster& cluster,
                                                 const std::string& tag, const std::filesystem::path& log_dir, double timeout_s,
                                                 const std::map<std::string, std::string>& session_env,
                                                 const std::function<void(const nlohmann::json&)>& on_started) {
  std::unique_ptr<ArmInstance> self(new ArmInstance());
  self->label_ = arm.spec.label;
  self->api_key_ = arm.api_key;
  self->api_key_env_ = arm.spec.api_key_env;
  const LaunchContext c{
      arm,         layout,    cluster, tag, log_dir, timeout_s, std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000)),
      session_env, on_started};
  try {
    self->launch_.started_at = MonotonicSeconds();
    if (arm.spec.kind == ArmKind::kExternal) {
      self->base_url_ = arm.spec.base_url;
    } else if (arm.coordinator.launched() && arm.worker.launched()) {
      self->StartImages(c);
    } else {
      self->StartCommands(c);
    }
    self->WaitReady(timeout_s);
    if (arm.spec.kind != ArmKind::kExternal) self->RecordReady();
  } catch (...) {
    self->Teardown(5);
    throw;
  }
  return self;
}

SessionProcess& ArmInstance::Start(const ProcessPlan& plan, const LaunchContext& c) {
  processes_.push_back(SessionProcess::Start(plan, c.timeout));
  if (c.on_started) c.on_started(Processes(false));
  return *processes_.back();
}

std::string ArmInstance::StartWorker(const LaunchContext& c, const std::string& role, int index, const std::string& host_name) {
  const std::string name = fmt::format("{}-{}", role, index);
  ProcessPlan p = PlanProcess(c, Role::kWorker, name, host_name);
  Append(p.argv, {"expert", "--listen", p.host->address() + ":0", "--model", c.cluster.model_dir(host_name), "--threads",
                  std::to_string(c.layout.worker_threads), "--role", role});
  if (c.layout.emulated_rtt_us > 0) Append(p.argv, {"--emulated-rtt-us", std::to_string(c.layout.emulated_rtt_us)});
  Append(p.argv, c.arm.worker.options);
  p.cpus = c.layout.worker_cpus;
  SessionProcess& started = Start(p, c);
  const auto since = std::chrono::steady_clock::now();
  const auto line = started.WaitForLine("listening on ", c.timeout);
  if (!line) throw std::runtime_error(NotStarted(started, c.timeout_s, since));
  launch_.listening.emplace_back(name, MonotonicSeconds() - launch_.started_at);
  return AddressOf(*line);
}

void ArmInstance::StartImages(const LaunchContext& c) {
  const LayoutSpec& layout = c.layout;
  std::string peer;
  std::vector<std::string> experts;
  if (layout.coordinator_ranks == 2) peer = StartWorker(c, "peer", 0, PeerHost(layout));
  for (int i = 0; i < layout.workers; ++i) experts.push_back(StartWorker(c, "worker", i, WorkerHost(layout, i)));

  ProcessPlan p = PlanProcess(c, Role::kCoordinator, "coordinator", layout.coordinator_host);
  Append(p.argv, {"serve", "--model", c.cluster.model_dir(layout.coordinator_host), "--listen", p.host->address() + ":0",
                  "--served-model-name", "tandem"});
  AppendExpertFlags(layout, experts, peer, p.argv);
  if (layout.coordinator_threads > 0) Append(p.argv, {"--threads", std::to_string(layout.coordinator_threads)});
  Append(p.argv, layout.options);
  Append(p.argv, c.arm.coordinator.options);
  p.cpus = layout.coordinator_cpus;
  SessionProcess& coordinator = Start(p, c);
  const auto since = std::chrono::steady_clock::now();
  const auto line = coordinator.WaitForLine("listening on ", c.timeout, kLoadingProgress);
  if (!line) throw std::runtime_error(NotStarted(coordinator, c.timeout_s, since));
  launch_.listening.emplace_back("coordinator", MonotonicSeconds() - launch_.started_at);
  base_url_ = "http://" + AddressOf(*line);
}

void ArmInstance::StartCommands(const LaunchContext& c) {
  const ArmSpec& s = c.arm.spec;
  const std::string model = c.cluster.model_dir("local");
  auto shell = [&](const std::string& role, const std::string& cmd, const std::string& cpus) {
    ProcessPlan p;
    p.role = role;
    p.host = &c.cluster.host("local");
    p.argv = {"/bin/sh", "-c", cmd};
    p.env = s.env;
    for (const auto& [variable, value] : c.session_env) p.env[variable] = value;
    p.cpus = cpus;
    p.log = c.log_dir / (role + ".log");
    Start(p, c);
  };
  std::string experts;
  if (!s.worker_command.empty()) {
    for (int i = 0; i < c.layout.workers; ++i) {
      const int port = FreeLoopbackPort();
      shell(fmt::format("worker-{}", i), Substitute(Substitute(s.worker_command, "{port}", std::to_string(port)), "{model}", model),
            c.layout.worker_cpus);
      experts += fmt::format("{}127.0.0.1:{}", experts.empty() ? "" : ",", port);
    }
  }
  const int port = FreeLoopbackPort();
  std::string cmd =
      Substitute(Substitute(Substitute(s.coordinator_command, "{port}", std::to_string(port)), "{model}", model), "{experts}", experts);
  for (const std::string& o : s.options) cmd += " " + o;
  shell("coordinator", cmd, c.layout.coordinator_cpus);
  base_url_ = fmt::format("http://127.0.0.1:{}", port);
}

namespace {

// /v1/stats "startup" as Tandem's runtime reports it: {"phases": [[name, seconds], …],
// "weight_bytes": B}. Anything else (another server's "startup", or none) reads as nothing.
void ReadServerStartup(const std::string& stats_body, ArmInstance::LaunchRecord& launch) {
  const nlohmann::json stats = nlohmann::json::parse(stats_body, nullptr, false);
  if (!stats.is_object() || !stats.contains("startup") || !stats["startup"].is_object()) return;
  const nlohmann::json& startup = stats["startup"];
  if (startup.contains("phases") && startup["phases"].is_array()) {
    for (const nlohmann::json& p : startup["phases"]) {
      if (launch.server_phases.size() >= 32) break;  // a bound: a report row each
      if (!p.is_array() || p.size() != 2 || !p[0].is_string() || !p[1].is_number() || !(p[1].get<double>() >= 0)) continue;
      const std::string name = p[0].get<std::string>();
      if (name.empty() || name.size() > 40 || name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
        continue;
      launch.server_phases.emplace_back(name, p[1].get<double>());
    }
  }
  if (startup.contains("weight_bytes") && startup["weight_bytes"].is_number_unsigned()) {
    launch.weight_bytes = startup["weight_bytes"].get<std::uint64_t>();
  }
  // The workers' own loads: rank r (1-based) is worker-(r-1).
  if (!stats.contains("workers") || !stats["workers"].is_array()) return;
  for (const nlohmann::json& w : stats["workers"]) {
    if (launch.worker_loads.size() >= 1024) break;
    if (!w.is_object() || !w.contains("rank") || !w["rank"].is_number_integer() || !w.contains("load_s") || !w["load_s"].is_number())
      continue;
    const long long rank = w["rank"].get<long long>();
    const double seconds = w["load_s"].get<double>();
    if (rank < 1 || rank > 1024 || !(seconds >= 0) || seconds > 1e7) continue;
    launch.worker_loads.emplace_back(fmt::format("worker-{}", rank - 1), seconds);
  }
}

}  // namespace

void ArmInstance::RecordReady() {
  launch_.ready_s = MonotonicSeconds() - launch_.started_at;
  // Read after the clock stopped: reading memory over SSH takes a moment of its own.
  for (const auto& p : processes_) {
    if (const std::optional<std::uint64_t> bytes = p->ResidentBytes()) launch_.resident_bytes.emplace_back(p->role(), *bytes);
  }
  int status = 0;
  const std::string stats = HttpGet(base_url_, "/v1/stats", 10, &status, api_key_);
  if (status == 200) ReadServerStartup(stats, launch_);
}

void ArmInstance::WaitReady(double timeout_s) {
  double deadline = MonotonicSeconds() + timeout_s;
  std::string last = "no answer";
  SessionProcess* coordinator = nullptr;
  for (auto& p : processes_) {
    if (p->role() == "coordinator") coordinator = p.get();
  }
  while (MonotonicSeconds() < deadline) {
    // A server still loading says so: the timeout counts from its last progress.
    if (coordinator != nullptr && coordinator->WaitForLine(kLoadingProgress, std::chrono::milliseconds(0))) {
      deadline = MonotonicSeconds() + timeout_s;
    }
    const std::string crashed = Crashed();
    if (!crashed.empty()) throw std::runtime_error(crashed);
    int status = 0;
    HttpGet(base_url_, "/health", 5, &status, api_key_);
    // Refused is definitive: waiting out launch_s would not change the answer.
    if (status == 401 || status == 403) throw std::runtime_error(Refused("/health", status));
    if (status == 200) {
      const std::string models = HttpGet(base_url_, "/v1/models", 10, &status, api_key_);
      if (status == 401 || status == 403) throw std::runtime_error(Refused("/v1/models", status));
      const auto j = nlohmann::json::parse(models, nullptr, false);
      if (!j.is_discarded() && j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
          j["data"][0].is_object() && j["data"][0].contains("id") && j["data"][0]["id"].is_string()) {
        served_ = j["data"][0];
        // Revisions are compared as strings; anything else is not a revision.
        for (const char* key : {"model_revision", "runtime_revision"}) {
          if (served_.contains(key) && !served_[key].is_string()) served_.erase(key);
        }
        return;
      }
      last = fmt::format("/v1/models answered {} without a model (data[0].id)", status);
    } else {
      last = status == 0 ? "no answer on /health" : fmt::format("/health answered {}", status);
    }
    // Polled at 1% of the time waited so far (5–100 ms): the ready time is a measured phase.
    const double waited = MonotonicSeconds() - launch_.started_at;
    std::this_thread::sleep_for(std::chrono::duration<double>(std::clamp(0.01 * waited, 0.005, 0.1)));
  }
  throw std::runtime_error(fmt::format("{} was not ready within {:.0f} s (timeouts.launch_s) of its start or its last loading progress: {}",
                                       base_url_, timeout_s, last));
}

std::string ArmInstance::Refused(const std::string& path, int status) const {
  if (api_key_.empty()) {
    return fmt::format(
        "{}{} answered {}: the server requires an API key; give arm '{}' `api_key_env: NAME` and export NAME with the key "
        "(the harness then sends 'Authorization: Bearer KEY' on every request)",
        base_url_, path, status, label_);
  }
  return fmt::format("{}{} answered {} to the API key from ${} (arm '{}'): the server does not accept that key", base_url_, path, status,
                     api_key_env_, label_);
}

std::string ArmInstance::Crashed() {
  for (auto& p : processes_) {
    if (!p->running()) return p->DescribeExit();
  }
  return "";
}

nlohmann::json ArmInstance::Processes(bool cpu_seconds) const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : processes_) out.push_back(p->Record(cpu_seconds));
  return out;
}

std::string ArmInstance::Teardown(double grace_s) {
  const auto grace = std::chrono::milliseconds(static_cast<std::int64_t>(grace_s * 1000));
  // The coordinator first (it drains), then the workers, all at once: each may wait out
  // its grace period on its own host.
  std::vector<std::string> left(processes_.size());
  std::vector<std::thread> stops;
  for (std::size_t i = processes_.size(); i-- > 0;) {
    if (processes_[i]->role() == "coordinator") {
      left[i] = processes_[i]->Terminate(grace);
    } else {
      stops.emplace_back([&, i] { left[i] = processes_[i]->Terminate(grace); });
    }
  }
  for (std::thread& t : stops) t.join();
  processes_.clear();
  std::string all;
  for (const std::string& l : left) {
    if (!l.empty()) all += (all.empty() ? "" : "; ") + l;
  }
  return all;
}

ArmInstance::~ArmInstance() { Teardown(5); }

}  // namespace tandem::harness
