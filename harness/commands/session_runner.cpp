#include <algorithm>
#include <future>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/redact.hpp"
#include "common/secret_token.hpp"
#include "common/sha256.hpp"
#include "harness/campaign/spec_json.hpp"
#include "harness/commands/campaign_run.hpp"
#include "harness/commands/session_logs.hpp"
#include "harness/launch/arm_instance.hpp"
#include "harness/launch/host_facts.hpp"
#include "harness/launch/worker_token.hpp"
#include "harness/traffic/sse_client.hpp"
#include "harness/traffic/workload_runner.hpp"

namespace tandem::harness {

using nlohmann::json;

namespace {

// The facts of every host a session runs on, read just before it (each takes a one-second
// busy sample; the other hosts are read at once, over SSH). A host that cannot be read
// sets `reason`: the session fails before launching.
json ReadSessionHosts(const Prepared& p, const store::SessionRow& row, Progress& progress, std::string& reason) {
  json host = HostFacts();
  const double busy = host["busy_fraction"];
  if (busy > kOtherLoadBusyFraction) {
    host["load_warning"] = true;
    progress.Line(fmt::format("warning: {:.0f}% of the CPUs were busy before session {}: other work on this machine may skew its timings",
                              100 * busy, row.order_index + 1));
  }
  if (p.campaign->hosts.size() <= 1) return host;
  host["hosts"] = json::object();
  std::vector<std::pair<const Host*, std::future<json>>> reads;
  for (const Host* h : p.cluster->hosts()) {
    if (!h->local()) reads.emplace_back(h, std::async(std::launch::async, [h] { return HostFacts(*h); }));
  }
  for (auto& [h, read] : reads) {
    try {
      json facts = read.get();
      if (facts.value("busy_fraction", 0.0) > kOtherLoadBusyFraction) {
        facts["load_warning"] = true;
        progress.Line(fmt::format("warning: {:.0f}% of the CPUs of host {} were busy before session {}",
                                  100 * facts.value("busy_fraction", 0.0), h->name(), row.order_index + 1));
      }
      host["hosts"][h->name()] = facts;
    } catch (const std::exception& e) {
      if (reason.empty()) reason = e.what();
    }
  }
  return host;
}

// Where a session runs its workloads: the launched arm and what it serves.
struct LiveSession {
  const store::SessionRow* row;
  const ResolvedArm* arm;
  ArmInstance* instance;
  std::string served_id;
  int session_count = 0, nonce_round = 0;
};

// One workload of a running session: its samples stored with the server's /v1/stats
// before and after. Returns its earliest first output (MonotonicSeconds; 0: none). Throws
// when the arm crashed, or on an invalid sample where the campaign fails the session for one.
double RunSessionWorkload(store::Store& store, const Prepared& p, const LiveSession& s, const WorkloadSpec& w, int index,
                          Progress& progress) {
  const Campaign& c = *p.campaign;
  const store::SessionRow& row = *s.row;
  const std::string where = fmt::format("[{}] session {}/{} · {} · {}", row.layout, row.order_index + 1, s.session_count, row.arm, w.name);
  const std::string before = HttpGet(s.instance->base_url(), "/v1/stats", 30, nullptr, s.arm->api_key);
  const std::int64_t run = store.StartWorkloadRun(row.id, w.name, w.kind, w.warmup, WorkloadSpecJson(w).dump(), before);
  WorkloadContext ctx{s.instance->base_url(),
                      c.timeouts.request_s,
                      &p.corpus,
                      &*p.nonces,
                      index,
                      s.nonce_round,
                      &*p.tokenizer,
                      c.quality.cache_bound,
                      [&](int done, int total) { progress.Update(where, done, total); },
                      s.served_id,
                      s.arm->api_key};
  WorkloadOutcome outcome = RunWorkload(w, ctx);
  const std::string after = HttpGet(s.instance->base_url(), "/v1/stats", 30, nullptr, s.arm->api_key);
  store.Transaction([&] {
    for (const store::SampleRow& x : outcome.samples) store.AddSample(run, row.id, x);
    store.FinishWorkloadRun(run, after, outcome.result.dump());
  });
  progress.Add(static_cast<int>(outcome.samples.size()));
  const std::string crashed = s.instance->Crashed();
  if (!crashed.empty()) throw std::runtime_error(crashed);
  if (c.quality.fail_session && !w.warmup) {
    for (const store::SampleRow& x : outcome.samples) {
      // Not failures: a prefill try that was sent again, a sample whose server reports no cached tokens.
      if (!x.valid && x.role != "retry" && x.flags_json.find("_unverified") == std::string::npos)
        throw std::runtime_error(fmt::format("workload {}: an invalid sample ({}, {})", w.name, x.case_id, x.checks_json));
    }
  }
  double first = 0;
  for (const store::SampleRow& x : outcome.samples) {
    if (x.t_first_output > 0 && (first == 0 || x.t_first_output < first)) first = x.t_first_output;
  }
  return first;
}

// The launched arm must serve the campaign's model: its id and revision go to the store.
void CheckServedModel(store::Store& store, const Prepared& p, const store::SessionRow& row, const json& served) {
  store.SetArmModel(row.arm_id, served.value("id", ""), served.value("model_revision", ""), "");
  const std::string served_revision = served.value("model_revision", "");
  if (!served_revision.empty() && !p.model_revision.empty() && served_revision != p.model_revision) {
    throw std::runtime_error(
        fmt::format("the server serves model revision {}, the campaign's model is {}", served_revision, p.model_revision));
  }
}

}  // namespace

// One session: read the hosts, launch the arm, run every workload, tear it down, record
// how it ended. Returns why it failed (empty: complete).
std::string RunSession(store::Store& store, std::int64_t campaign, const Prepared& p, const store::SessionRow& row, Progress& progress,
                       const SessionPlace& place) {
  const Campaign& c = *p.campaign;
  const ResolvedArm& arm = *std::find_if(p.arms.begin(), p.arms.end(), [&](const ResolvedArm& a) { return a.spec.label == row.arm; });
  const LayoutSpec& layout = *std::find_if(c.layouts.begin(), c.layouts.end(), [&](const LayoutSpec& l) { return l.name == row.layout; });
  std::string reason;
  const json host = ReadSessionHosts(p, row, progress, reason);
  const int attempt = store.StartSession(row.id, host.dump());
  const std::filesystem::path logs = AttemptLogDir(c.store, row.order_index, attempt);
  std::unique_ptr<ArmInstance> instance;
  json served = json::object();
  // Names this session's containers apart from any other campaign's on a shared host.
  const std::string tag =
      fmt::format("{}-c{}-s{}", Sha256Hex(std::filesystem::absolute(c.store).string()).substr(0, 8), campaign, row.order_index);
  // A fresh shared secret for this session's coordinator and workers (in their
  // environment only; scrubbed from whatever the session's failure quotes).
  const std::string token = NewSecretToken();
  std::vector<std::string> secrets = p.secrets;
  secrets.push_back(token);
  // Each process is recorded as soon as it starts: a harness that dies during the launch
  // leaves --resume what to clean up (and a failed launch, where its logs are).
  json started = json::array();
  const auto record = [&](const json& processes) {
    started = processes;
    store.SetSessionProcesses(row.id, processes.dump());
  };
  std::unique_ptr<GpuSampler> gpus;  // through the session, once launched
  try {
    if (!reason.empty()) throw std::runtime_error(reason);
    if (InterruptWatch::interrupted()) throw std::runtime_error("not started");
    instance = ArmInstance::Launch(arm, layout, *p.cluster, tag, logs, c.timeouts.launch_s, {{kWorkerTokenVariable, token}}, record);
    if (instance->launch_record().ready_s) {
      gpus = std::make_unique<GpuSampler>(LayoutHosts(layout, *p.cluster), c.conditions.sample_s, instance->launch_record().started_at);
    }
    store::SessionStartup startup = MeasureLaunch(*instance, layout, *p.cluster, place.launch_index < c.startup.discard);
    store.SetSessionStartup(row.id, startup);
    store.SetSessionProcesses(row.id, instance->Processes().dump());
    served = instance->served();
    CheckServedModel(store, p, row, served);
    const LiveSession live{&row, &arm, instance.get(), served.value("id", "tandem"), place.session_count, place.nonce_round};
    int index = 0;
    for (const auto* list : {&c.warmup, &c.workloads}) {
      for (const WorkloadSpec& w : *list) {
        const double first_output = RunSessionWorkload(store, p, live, w, index++, progress);
        if (index == 1 && first_output > 0 && startup.ready_s) {  // the session's first output, from the launch's start
          startup.first_output_s = first_output - instance->launch_record().started_at;
          store.SetSessionStartup(row.id, startup);
        }
      }
    }
  } catch (const std::exception& e) {
    reason = e.what();
  }
  if (InterruptWatch::interrupted()) {
    reason = fmt::format("interrupted: the harness received {} during this session{}", InterruptWatch::signal_name(),
                         reason.empty() ? "" : fmt::format(" (then: {})", reason));
  }
  const json processes = instance ? instance->Processes() : started;
  if (gpus) {
    store::SessionConditions conditions;
    conditions.samples = gpus->Stop();
    conditions.breaches = store::Breaches(c.conditions.controls, conditions.samples);
    if (c.conditions.controls.any() && conditions.samples.empty()) {
      conditions.breaches.push_back("the campaign declares GPU conditions and no host of the layout answered nvidia-smi");
    }
    if (!conditions.samples.empty() || !conditions.breaches.empty()) store.SetSessionConditions(row.id, conditions);
    if (!conditions.breaches.empty()) {
      progress.Line(fmt::format("warning: session {} ran outside the campaign's GPU conditions: {}", row.order_index + 1,
                                conditions.breaches.front()));
    }
  }
  if (instance) {
    const std::string left = instance->Teardown(c.timeouts.teardown_grace_s);
    if (!left.empty() && reason.empty()) reason = "left running after teardown: " + left;
  }
  // A reason may quote a process's output, which may quote its command line.
  reason = ScrubSecrets(reason, secrets);
  if (!reason.empty()) WriteAttemptFailure(logs, reason);
  store.FinishSession(row.id, reason.empty() ? store::SessionStatus::kComplete : store::SessionStatus::kFailed, reason, served.dump(),
                      processes.dump());
  return reason;
}

// A relaunched server starts with an empty prefix cache; an external one does not, so
// its n-th session (n ≥ 1) uses the n-th block of nonce positions: unseen prompts.
int NonceRound(const Prepared& p, const std::vector<store::SessionRow>& sessions, const store::SessionRow& s) {
  const auto arm = std::find_if(p.arms.begin(), p.arms.end(), [&](const ResolvedArm& a) { return a.spec.label == s.arm; });
  if (arm == p.arms.end() || arm->spec.kind != ArmKind::kExternal) return 0;
  int earlier = 0;
  for (const store::SessionRow& other : sessions) earlier += other.arm == s.arm && other.order_index < s.order_index ? 1 : 0;
  return earlier;
}

}  // namespace tandem::harness
