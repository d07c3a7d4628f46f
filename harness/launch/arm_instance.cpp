#include "harness/launch/arm_instance.hpp"

#include <thread>

#include <fmt/format.h>

#include "harness/traffic/sse_client.hpp"

namespace tandem::harness {

namespace {

std::string Substitute(std::string text, const std::string& key, const std::string& value) {
  for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size())) text.replace(at, key.size(), value);
  return text;
}

std::string AddressOf(const std::string& listening_line) {
  std::string text = listening_line.substr(listening_line.rfind(' ') + 1);
  if (text.rfind("http://", 0) == 0) text = text.substr(7);
  return text;
}

}  // namespace

std::unique_ptr<ArmInstance> ArmInstance::Launch(const ResolvedArm& arm, const LayoutSpec& layout, const std::filesystem::path& model,
                                                 const std::filesystem::path& log_dir, double timeout_s) {
  std::unique_ptr<ArmInstance> self(new ArmInstance());
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000));
  const ArmSpec& s = arm.spec;
  try {
    if (s.kind == ArmSourceKind::kExternal) {
      self->base_url_ = s.base_url;
      self->WaitReady(timeout_s);
      return self;
    }
    std::vector<std::string> experts;
    std::string peer;
    if (s.kind == ArmSourceKind::kBinary || s.kind == ArmSourceKind::kGit) {
      auto start_worker = [&](const std::string& role, int index) {
        std::vector<std::string> argv = {arm.worker.string(),
                                         "expert",
                                         "--listen",
                                         "127.0.0.1:0",
                                         "--model",
                                         model.string(),
                                         "--threads",
                                         std::to_string(layout.worker_threads),
                                         "--role",
                                         role};
        if (layout.emulated_rtt_us > 0) argv.insert(argv.end(), {"--emulated-rtt-us", std::to_string(layout.emulated_rtt_us)});
        argv.insert(argv.end(), s.worker_options.begin(), s.worker_options.end());
        auto p = std::make_unique<ManagedProcess>(argv, s.env, log_dir / fmt::format("{}-{}.log", role, index), layout.worker_cpus);
        const auto line = p->WaitForLine("listening on ", timeout);
        if (!line) throw std::runtime_error(fmt::format("the {} did not start (see {})", role, p->log().string()));
        const std::string address = AddressOf(*line);
        self->processes_.emplace_back(fmt::format("{}-{}", role, index), std::move(p));
        return address;
      };
      if (layout.coordinator_ranks == 2) peer = start_worker("peer", 0);
      for (int i = 0; i < layout.workers; ++i) experts.push_back(start_worker("worker", i));

      std::vector<std::string> argv = {arm.coordinator.string(), "serve", "--model", model.string(), "--listen", "127.0.0.1:0",
                                       "--served-model-name",    "tandem"};
      if (!experts.empty() || !peer.empty()) {
        std::string list;
        for (const std::string& e : experts) list += (list.empty() ? "" : ",") + e;
        if (!list.empty()) argv.insert(argv.end(), {"--experts", list});
        argv.insert(argv.end(),
                    {"--expert-parallel", layout.expert_parallel, "--local-expert-layers", std::to_string(layout.local_expert_layers),
                     "--wire-dtype", layout.wire_dtype, "--partial-dtype", layout.partial_dtype});
        if (!peer.empty()) argv.insert(argv.end(), {"--coordinator-ranks", "2", "--peer", peer});
      }
      if (layout.coordinator_threads > 0) argv.insert(argv.end(), {"--threads", std::to_string(layout.coordinator_threads)});
      argv.insert(argv.end(), layout.options.begin(), layout.options.end());
      argv.insert(argv.end(), s.options.begin(), s.options.end());
      auto p = std::make_unique<ManagedProcess>(argv, s.env, log_dir / "coordinator.log", layout.coordinator_cpus);
      const auto line = p->WaitForLine("listening on ", timeout);
      if (!line) throw std::runtime_error(fmt::format("the coordinator did not start (see {})", p->log().string()));
      self->base_url_ = "http://" + AddressOf(*line);
      self->processes_.emplace_back("coordinator", std::move(p));
    } else {  // command: the templates name the port; workers first if there is a worker command
      if (!s.worker_command.empty()) {
        for (int i = 0; i < layout.workers; ++i) {
          const int port = FreeLoopbackPort();
          const std::string cmd = Substitute(Substitute(s.worker_command, "{port}", std::to_string(port)), "{model}", model.string());
          self->processes_.emplace_back(fmt::format("worker-{}", i),
                                        std::make_unique<ManagedProcess>(std::vector<std::string>{"/bin/sh", "-c", cmd}, s.env,
                                                                         log_dir / fmt::format("worker-{}.log", i), layout.worker_cpus));
          experts.push_back(fmt::format("127.0.0.1:{}", port));
        }
      }
      std::string list;
      for (const std::string& e : experts) list += (list.empty() ? "" : ",") + e;
      const int port = FreeLoopbackPort();
      std::string cmd = Substitute(Substitute(Substitute(s.coordinator_command, "{port}", std::to_string(port)), "{model}", model.string()),
                                   "{experts}", list);
      for (const std::string& o : s.options) cmd += " " + o;
      self->processes_.emplace_back("coordinator", std::make_unique<ManagedProcess>(std::vector<std::string>{"/bin/sh", "-c", cmd}, s.env,
                                                                                    log_dir / "coordinator.log", layout.coordinator_cpus));
      self->base_url_ = fmt::format("http://127.0.0.1:{}", port);
    }
    self->WaitReady(timeout_s);
  } catch (...) {
    self->Teardown(5);
    throw;
  }
  return self;
}

void ArmInstance::WaitReady(double timeout_s) {
  const double deadline = MonotonicSeconds() + timeout_s;
  std::string last = "no answer";
  while (MonotonicSeconds() < deadline) {
    const std::string crashed = Crashed();
    if (!crashed.empty()) throw std::runtime_error(crashed);
    int status = 0;
    HttpGet(base_url_, "/health", 5, &status);
    if (status == 200) {
      const std::string models = HttpGet(base_url_, "/v1/models", 10, &status);
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
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw std::runtime_error(fmt::format("{} was not ready within {:.0f} s: {}", base_url_, timeout_s, last));
}

std::string ArmInstance::Crashed() {
  for (auto& [role, p] : processes_) {
    if (!p->running()) {
      const auto code = p->ExitCode();
      return fmt::format("the {} exited with code {} (see {})", role, code.value_or(-1), p->log().string());
    }
  }
  return "";
}

nlohmann::json ArmInstance::Processes() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [role, p] : processes_) {
    out.push_back({{"role", role},
                   {"pid", p->pid()},
                   {"start_ticks", p->start_ticks()},
                   {"cpu_seconds", p->CpuSeconds()},
                   {"log", p->log().string()}});
  }
  return out;
}

void ArmInstance::Teardown(double grace_s) {
  // The coordinator first (it drains), then the workers.
  for (auto it = processes_.rbegin(); it != processes_.rend(); ++it) {
    it->second->Terminate(std::chrono::milliseconds(static_cast<std::int64_t>(grace_s * 1000)));
  }
  processes_.clear();
}

ArmInstance::~ArmInstance() { Teardown(5); }

}  // namespace tandem::harness
