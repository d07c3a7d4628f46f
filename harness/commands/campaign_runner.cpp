#include "harness/commands/campaign_runner.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/input_error.hpp"
#include "common/redact.hpp"
#include "common/secret_token.hpp"
#include "common/sha256.hpp"
#include "harness/campaign/campaign_secrets.hpp"
#include "harness/campaign/corpus.hpp"
#include "harness/campaign/nonce.hpp"
#include "harness/campaign/session_plan.hpp"
#include "harness/campaign/spec_json.hpp"
#include "harness/commands/session_logs.hpp"
#include "harness/launch/arm.hpp"
#include "harness/launch/arm_instance.hpp"
#include "harness/launch/cluster.hpp"
#include "harness/launch/host_facts.hpp"
#include "harness/launch/managed_process.hpp"
#include "harness/launch/worker_token.hpp"
#include "harness/traffic/sse_client.hpp"
#include "harness/traffic/workload_runner.hpp"
#include "runtime/model/cache_dir.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/model_revision.hpp"
#include "runtime/model/tokenizer.hpp"
#include "stats/log_ratio.hpp"
#include "store/campaign_record.hpp"
#include "store/comparison.hpp"
#include "store/gate_decision.hpp"
#include "store/record_fields.hpp"
#include "store/session_scores.hpp"
#include "store/store.hpp"
#include "store/workload_description.hpp"

namespace tandem::harness {

namespace {

using nlohmann::json;

// Everything a run needs that does not depend on the session.
struct Prepared {
  const Campaign* campaign = nullptr;
  Corpus corpus;
  std::vector<ResolvedArm> arms;
  std::filesystem::path model;
  std::string model_revision;
  std::optional<rt::Tokenizer> tokenizer;
  std::optional<NonceBook> nonces;
  std::vector<PlannedSession> plan;
  int requests_per_session = 0;
  std::unique_ptr<Cluster> cluster;  // null in a dry run that does not check hosts
  // Every secret value the processes get: scrubbed from what is stored and printed.
  std::vector<std::string> secrets;
};

std::filesystem::path BuildCache() { return rt::TandemCacheDir() / "builds"; }

// The checkpoint: a path, a trained preset's committed one, or a synthetic preset
// written once into the cache by the first arm that has a tandem-rt.
std::filesystem::path PrepareModel(const Campaign& c, const std::vector<ResolvedArm>& arms, bool dry_run) {
  if (!c.model.path.empty()) return c.model.path;
  if (!c.model.trained.empty()) return c.model.trained;
  const auto dir = rt::TandemCacheDir() / "models" / fmt::format("{}-seed{}", c.model.preset, c.model.seed);
  if (std::filesystem::exists(dir / "model.safetensors") || dry_run) return dir;
  // A binary or git arm's tandem-rt, else a container arm's image run by the local engine.
  const RoleImage* writer = nullptr;
  for (const ResolvedArm& a : arms) {
    if (!a.built) continue;
    for (const RoleImage* role : {&a.coordinator, &a.worker}) {
      if (!role->executable.empty() && (writer == nullptr || writer->container())) writer = role;
      if (role->container() && writer == nullptr) writer = role;
    }
  }
  if (writer == nullptr) throw InputError("model.preset needs a binary, git or container arm whose tandem-rt can write it (init-model)");
  const auto log = rt::TandemCacheDir() / "models" / "init-model.log";
  const auto partial = dir.string() + ".partial";
  std::error_code ec;
  std::filesystem::remove_all(partial, ec);
  std::filesystem::create_directories(dir.parent_path(), ec);
  std::vector<std::string> argv = {"init-model", "--preset", c.model.preset, "--seed", std::to_string(c.model.seed), "--out", partial};
  if (writer->container()) {
    const std::string parent = dir.parent_path().string();
    argv.insert(argv.begin(), {writer->engine, "run", "--rm", "-v", parent + ":" + parent, writer->image});
  } else {
    argv.insert(argv.begin(), writer->executable.string());
  }
  if (RunToCompletion(argv, log, std::chrono::seconds(600)) != 0) {
    throw InputError(fmt::format("init-model for preset {} failed; see {}", c.model.preset, log.string()));
  }
  std::filesystem::rename(partial, dir);
  return dir;
}

Prepared Prepare(const Campaign& c, bool dry_run, bool check_hosts, std::ostream& log) {
  Prepared p;
  p.campaign = &c;
  p.secrets = CampaignSecretValues(c);
  // Every arm's API key is in the environment before anything is built or started.
  for (const ArmSpec& arm : c.arms) {
    if (const std::string key = ReadApiKey(arm); !key.empty()) p.secrets.push_back(key);
  }
  p.corpus = LoadCorpus(c.corpus);
  for (const auto* workloads : {&c.warmup, &c.workloads}) {
    for (const WorkloadSpec& w : *workloads) {
      for (const std::string& id : w.cases) p.corpus.Case(id);  // an unknown case is an error now, not mid-run
    }
  }
  for (const ArmSpec& arm : c.arms) {
    if (arm.kind == ArmKind::kMixed) {  // composed below, from its resolved sides
      p.arms.push_back(ResolvedArm{.spec = arm});
      continue;
    }
    ResolvedArm resolved = ResolveArm(arm, {.build = false, .build_cache = BuildCache()});
    if (!resolved.built && !dry_run) {
      log << fmt::format("building arm {}: {} at {} ({}) into {}...\n", arm.label, arm.repository, arm.ref, resolved.revision.substr(0, 12),
                         BuildCache().string());
      resolved = ResolveArm(arm, {.build = true, .build_cache = BuildCache()});
    }
    p.arms.push_back(std::move(resolved));
  }
  // A mixed arm takes its images from its two sides, resolved above.
  for (ResolvedArm& a : p.arms) {
    if (a.spec.kind != ArmKind::kMixed) continue;
    const auto side = [&](const std::string& label) -> const ResolvedArm& {
      return *std::find_if(p.arms.begin(), p.arms.end(), [&](const ResolvedArm& r) { return r.spec.label == label; });
    };
    a = ComposeMixedArm(a.spec, side(a.spec.coordinator_from), side(a.spec.worker_from));
  }
  p.model = PrepareModel(c, p.arms, dry_run);
  const bool have_model = std::filesystem::exists(p.model / "config.json");
  if (have_model) {
    try {
      p.model_revision = rt::ModelRevision(p.model);
      p.tokenizer.emplace(rt::Tokenizer::Load(p.model / "tokenizer.json"));
    } catch (const rt::ModelError& e) {
      throw InputError(e.what());
    }
  }
  const int workloads = static_cast<int>(c.warmup.size() + c.workloads.size());
  p.plan = PlanSessions(c);
  // An external arm is not relaunched, so each of its sessions needs fresh markers.
  int rounds = 1;
  for (const ArmSpec& arm : c.arms) {
    if (arm.kind != ArmKind::kExternal) continue;
    rounds = std::max(
        rounds, static_cast<int>(std::count_if(p.plan.begin(), p.plan.end(), [&](const PlannedSession& s) { return s.arm == arm.label; })));
  }
  if (p.tokenizer) {
    p.nonces.emplace(*p.tokenizer, workloads);
    for (const auto* list : {&c.warmup, &c.workloads}) {
      for (const WorkloadSpec& w : *list) {
        const int n = CountRequests(w, p.corpus);
        if (static_cast<std::size_t>(n) * static_cast<std::size_t>(rounds) > p.nonces->per_workload()) {
          throw InputError(
              fmt::format("{}: workload '{}' sends {} requests per session{}, but the tokenizer offers {} nonce markers per "
                          "workload; use fewer repeats or levels{}",
                          c.file.string(), w.name, n, rounds > 1 ? fmt::format(" in each of an external arm's {} sessions", rounds) : "",
                          p.nonces->per_workload(), rounds > 1 ? ", or fewer sessions" : ""));
        }
      }
    }
  }
  for (const auto* list : {&c.warmup, &c.workloads}) {
    for (const WorkloadSpec& w : *list) p.requests_per_session += CountRequests(w, p.corpus);
  }
  // Every host reachable, with the model and every image in place, before anything starts.
  if (!dry_run || check_hosts) p.cluster = Cluster::Prepare(c, p.arms, p.model, p.model_revision, dry_run, log);
  return p;
}

void PrintPlan(const Prepared& p, std::ostream& out) {
  const Campaign& c = *p.campaign;
  out << fmt::format("campaign {} ({})\n", c.name, c.file.string());
  out << fmt::format("model    {} (revision {})\n", p.model.string(), p.model_revision.empty() ? "written on first run" : p.model_revision);
  out << "arms\n";
  for (const ResolvedArm& a : p.arms) {
    out << fmt::format("  {:<8} {:<8} revision {}\n", a.spec.label, ToString(a.spec.kind), a.revision);
    if (a.spec.kind == ArmKind::kMixed) {
      out << fmt::format("           the coordinator of {}, the workers of {}\n", a.spec.coordinator_from, a.spec.worker_from);
    }
    for (const auto& [role, image] : {std::pair{"coordinator", &a.coordinator}, std::pair{"worker     ", &a.worker}}) {
      if (image->container()) {
        out << fmt::format("           {} {} {} image {}\n", role, image->engine, image->image,
                           image->id.empty() ? std::string("(read on each host)") : image->id.substr(0, 19));
      } else if (!image->executable.empty()) {
        out << fmt::format("           {} {} image {}\n", role, image->executable.string(),
                           a.built ? image->id.substr(0, 16) : std::string("(built on the first run)"));
      }
    }
    if (!a.spec.base_url.empty()) out << fmt::format("           external server {} (not relaunched)\n", a.spec.base_url);
    if (!a.spec.api_key_env.empty())
      out << fmt::format("           API key from ${} (sent as Authorization: Bearer)\n", a.spec.api_key_env);
    if (!a.spec.coordinator_command.empty()) out << fmt::format("           command {}\n", RedactShellCommand(a.spec.coordinator_command));
    if (!a.spec.worker_command.empty()) out << fmt::format("           worker command {}\n", RedactShellCommand(a.spec.worker_command));
    if (!a.spec.options.empty()) out << fmt::format("           options {}\n", fmt::join(RedactArgs(a.spec.options), " "));
    if (!a.spec.worker_options.empty()) {
      out << fmt::format("           worker options {}\n", fmt::join(RedactArgs(a.spec.worker_options), " "));
    }
  }
  out << "layouts\n";
  std::size_t width = 0;
  for (const LayoutSpec& l : c.layouts) width = std::max(width, l.name.size());
  for (const LayoutSpec& l : c.layouts) {
    out << fmt::format("  {:<{}}  {} workers {}, local expert layers {}, coordinator ranks {}, wire {}, partials {}{}\n", l.name, width,
                       l.workers, l.expert_parallel, l.local_expert_layers, l.coordinator_ranks, l.wire_dtype, l.partial_dtype,
                       l.emulated_rtt_us > 0 ? fmt::format(", emulated link {} us", l.emulated_rtt_us) : "");
    if (c.hosts.size() > 1) {
      std::vector<std::string> workers;
      for (int w = 0; w < l.workers; ++w) workers.push_back(WorkerHost(l, w));
      out << fmt::format("  {:<{}}  coordinator on {}{}{}\n", "", width, l.coordinator_host,
                         workers.empty() ? "" : fmt::format(", workers on {}", fmt::join(workers, " ")),
                         l.coordinator_ranks == 2 ? fmt::format(", peer on {}", PeerHost(l)) : "");
    }
  }
  if (c.hosts.size() > 1) {
    out << "hosts\n";
    for (const HostSpec& h : c.hosts) {
      if (h.local()) continue;
      out << fmt::format("  {:<12} ssh {}{}, reached at {}\n", h.name, h.ssh, h.port > 0 ? fmt::format(" port {}", h.port) : "", h.address);
    }
    if (p.cluster) out << "  every host answered and was checked (--check-hosts); what a run would copy or pull is listed above\n";
  }
  if (c.sessions.until_decided) {
    out << fmt::format("sessions (at most {} per layout: the gate looks after every block of {} and stops a layout once it is decided{})\n",
                       c.sessions.per_layout, c.sessions.block(c.arms.size()),
                       c.sessions.precision > 0 ? fmt::format(" and within ±{:.1f}%", 100 * c.sessions.precision) : "");
  } else {
    out << fmt::format("sessions ({} per layout)\n", c.sessions.per_layout);
  }
  std::string current;
  for (const PlannedSession& s : p.plan) {
    if (s.layout != current) {
      out << fmt::format("  {}: ", s.layout);
      current = s.layout;
    }
    out << s.arm << (s.index_in_layout + 1 == c.sessions.per_layout ? "\n" : " ");
  }
  out << fmt::format("workloads (each session, {} requests)\n", p.requests_per_session);
  for (const auto* list : {&c.warmup, &c.workloads}) {
    for (const WorkloadSpec& w : *list) {
      out << fmt::format("  {}{}; {} requests\n", w.warmup ? "[warmup] " : "",
                         store::DescribeWorkload(w.name, w.kind, store::ReadWorkloadSettings(WorkloadSpecJson(w), w.name)),
                         CountRequests(w, p.corpus));
    }
  }
  out << fmt::format("store    {}\n", c.store.string());
}

// The live status line, on a terminal only.
class Progress {
 public:
  Progress(bool enabled, int total_requests)
      : enabled_(enabled && ::isatty(STDERR_FILENO)), total_(total_requests), start_(MonotonicSeconds()) {}
  void Update(const std::string& where, int requests_done_in_workload, int workload_total) {
    if (!enabled_) return;
    const int done = done_ + requests_done_in_workload;
    const double elapsed = MonotonicSeconds() - start_;
    const double eta = done > 0 ? elapsed / done * (total_ - done) : 0;
    fmt::print(stderr, "\r\033[K{} · {}/{} requests · ETA {:.0f}m{:02.0f}s", where, requests_done_in_workload, workload_total,
               std::floor(eta / 60), std::fmod(eta, 60));
    std::fflush(stderr);
  }
  void Add(int requests) { done_ += requests; }
  void Line(const std::string& text) {
    if (enabled_) fmt::print(stderr, "\r\033[K");
    fmt::print(stderr, "{}\n", text);
  }

 private:
  bool enabled_;
  int total_;
  int done_ = 0;
  double start_;
};

// Runs one session; returns "" when it completed, else the reason it failed.
// SIGINT or SIGTERM while a campaign runs: the session running stops at once (a thread
// sends SIGTERM to every process group the harness started, so its requests and waits
// end), it is torn down as always and recorded as interrupted, and `tandem run` exits 130;
// `--resume` redoes that session. A second signal exits at once (the kernel then ends the
// children: PR_SET_PDEATHSIG).
volatile std::sig_atomic_t g_interrupt = 0;
int g_interrupt_pipe[2] = {-1, -1};

extern "C" void OnInterrupt(int signal) {
  if (g_interrupt != 0) ::_exit(130);
  g_interrupt = signal;
  const char byte = 1;
  (void)!::write(g_interrupt_pipe[1], &byte, 1);
}

class InterruptWatch {
 public:
  InterruptWatch() {
    if (::pipe2(g_interrupt_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("cannot create a pipe for signals");
    struct sigaction action {};
    action.sa_handler = OnInterrupt;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &old_int_);
    ::sigaction(SIGTERM, &action, &old_term_);
    watcher_ = std::thread([this] {
      while (!stop_) {
        pollfd p{.fd = g_interrupt_pipe[0], .events = POLLIN, .revents = 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        char byte;
        while (::read(g_interrupt_pipe[0], &byte, 1) > 0) {
        }
        fmt::print(stderr, "\ntandem: {} received: stopping the session, tearing it down (again to exit at once)\n",
                   g_interrupt == SIGTERM ? "SIGTERM" : "SIGINT");
        TerminateEveryProcessGroup();
      }
    });
  }
  ~InterruptWatch() {
    stop_ = true;
    watcher_.join();
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    ::close(g_interrupt_pipe[0]);
    ::close(g_interrupt_pipe[1]);
  }
  InterruptWatch(const InterruptWatch&) = delete;
  InterruptWatch& operator=(const InterruptWatch&) = delete;
  static bool interrupted() { return g_interrupt != 0; }
  static const char* signal_name() { return g_interrupt == SIGTERM ? "SIGTERM" : "SIGINT"; }

 private:
  struct sigaction old_int_ {
  }, old_term_{};
  std::atomic<bool> stop_ = false;
  std::thread watcher_;
};

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
// before and after. Throws when the arm crashed, or on an invalid sample where the
// campaign fails the session for one.
void RunSessionWorkload(store::Store& store, const Prepared& p, const LiveSession& s, const WorkloadSpec& w, int index,
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
      if (!x.valid) throw std::runtime_error(fmt::format("workload {}: an invalid sample ({}, {})", w.name, x.case_id, x.checks_json));
    }
  }
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

// One session: read the hosts, launch the arm, run every workload, tear it down, record
// how it ended. Returns why it failed (empty: complete).
std::string RunSession(store::Store& store, std::int64_t campaign, const Prepared& p, const store::SessionRow& row, Progress& progress,
                       int session_count, int nonce_round) {
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
  try {
    if (!reason.empty()) throw std::runtime_error(reason);
    if (InterruptWatch::interrupted()) throw std::runtime_error("not started");
    instance = ArmInstance::Launch(arm, layout, *p.cluster, tag, logs, c.timeouts.launch_s, {{kWorkerTokenVariable, token}}, record);
    store.SetSessionProcesses(row.id, instance->Processes().dump());
    served = instance->served();
    CheckServedModel(store, p, row, served);
    const LiveSession live{&row, &arm, instance.get(), served.value("id", "tandem"), session_count, nonce_round};
    int index = 0;
    for (const auto* list : {&c.warmup, &c.workloads}) {
      for (const WorkloadSpec& w : *list) RunSessionWorkload(store, p, live, w, index++, progress);
    }
  } catch (const std::exception& e) {
    reason = e.what();
  }
  if (InterruptWatch::interrupted()) {
    reason = fmt::format("interrupted: the harness received {} during this session{}", InterruptWatch::signal_name(),
                         reason.empty() ? "" : fmt::format(" (then: {})", reason));
  }
  const json processes = instance ? instance->Processes() : started;
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

void PrintSummary(const store::Store& store, std::int64_t campaign, const std::vector<ResolvedArm>& arms,
                  const store::GreedyAgreementCounts& greedy, std::ostream& out) {
  const std::vector<store::FamilyScores> families = ComputeSessionScores(store, campaign);
  if (families.empty() || arms.size() < 2) return;
  const std::string& a = arms[0].spec.label;
  out << fmt::format("\nsummary: candidate / baseline ratio of geometric means over sessions, Welch 95% interval (* excludes 1)\n");
  for (std::size_t k = 1; k < arms.size(); ++k) {
    const std::string& b = arms[k].spec.label;
    out << fmt::format("{} vs {}\n", b, a);
    std::string layout;
    for (const store::FamilyComparison& c : store::CompareArms(families, a, b)) {
      if (c.scores->layout != layout) {
        out << fmt::format("  [{}]\n", c.scores->layout);
        layout = c.scores->layout;
      }
      std::string cell = "—";
      if (c.interval) {
        const stats::RatioInterval& r = *c.interval;
        cell =
            fmt::format("{:.3f} ({:.3f}–{:.3f}){} n={}/{}", r.ratio, r.lo, r.hi, r.excludes_one() ? " *" : "", r.n_baseline, r.n_candidate);
      } else if (c.n_baseline > 0 && c.n_candidate > 0) {
        cell = fmt::format("— ({})", c.missing);
      }
      out << fmt::format("    {:<40} {}\n", c.scores->family, cell);
    }
  }
  if (greedy.within_compared > 0) {
    out << fmt::format("greedy determinism: {} of {} prompts gave identical output in every session of the arm that sent them\n",
                       greedy.within_agree, greedy.within_compared);
  }
  if (greedy.across_compared > 0) {
    out << fmt::format("greedy agreement across arms: {} of {} prompts gave the same output in every arm\n", greedy.across_agree,
                       greedy.across_compared);
  }
  for (const ResolvedArm& arm : arms) {
    if (arm.spec.kind == ArmKind::kExternal) {
      out << fmt::format(
          "note: arm {} is an external server ({}), not relaunched between sessions: its state carried over, and its "
          "sessions after the first used salted nonces\n",
          arm.spec.label, arm.spec.base_url);
    }
  }
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

// A session left "running" belongs to a harness that died: its local processes got
// SIGKILL from the kernel (PR_SET_PDEATHSIG), but anything they started may remain, and on
// other hosts (processes, containers) everything may.
void KillLeftovers(store::Store& store, const Cluster& cluster, const store::SessionRow& s, Progress& progress) {
  int killed = 0;
  json processes = json::parse(store.SessionProcesses(s.id), nullptr, false);
  if (!processes.is_array()) processes = json::array();
  for (const json& p : processes) {
    if (!p.is_object()) continue;
    const std::string name = p.value("host", "local");
    try {
      killed += KillLeftovers(p, cluster.host(name));
    } catch (const std::out_of_range&) {
      progress.Line(fmt::format("session {}: process {} ran on host {}, which this campaign no longer uses: check it by hand",
                                s.order_index + 1, p.value("role", "?"), name));
    } catch (const std::exception& e) {
      progress.Line(fmt::format("session {}: could not clean up on host {}: {}", s.order_index + 1, name, e.what()));
    }
  }
  if (killed > 0)
    progress.Line(fmt::format("session {}: killed {} process(es) left running by the interrupted run", s.order_index + 1, killed));
}

// A sequential campaign looks after every block of a layout: once every gated family of
// the layout is decided, its remaining sessions are skipped (status "skipped"). The gate
// recomputes the same looks from the store, so `tandem gate` gives the verdict seen here.
void StopIfDecided(store::Store& store, std::int64_t campaign, const Campaign& c, std::vector<store::SessionRow>& sessions,
                   const store::SessionRow& done, Progress& progress) {
  if (!c.sessions.until_decided) return;
  int position = 0, total = 0;
  for (const store::SessionRow& s : sessions) {
    if (s.layout != done.layout) continue;
    if (s.order_index < done.order_index) ++position;
    ++total;
  }
  const std::vector<int> looks = store::LoadGateDesign(store, campaign).looks;
  if (std::find(looks.begin(), looks.end(), position + 1) == looks.end() || position + 1 == total) return;
  const store::CampaignRecord record = store::LoadCampaignRecord(store, campaign);
  std::vector<store::FamilyGate> gates;
  try {
    gates = store::DecideGate(record, record.gate);
  } catch (const std::exception& e) {
    progress.Line(fmt::format("[{}] look after {} sessions: {}; going on", done.layout, position + 1, e.what()));
    return;
  }
  if (!store::LayoutDecided(gates, done.layout)) {
    progress.Line(fmt::format("[{}] look after {} sessions: undecided, going on", done.layout, position + 1));
    return;
  }
  if (c.sessions.precision > 0) {
    const std::vector<const store::FamilyGate*> wide = store::ImpreciseFamilies(gates, done.layout, c.sessions.precision);
    if (!wide.empty()) {
      const std::optional<double> w = store::RelativeHalfWidth(*wide.front());
      progress.Line(fmt::format("[{}] look after {} sessions: decided, but {}'s interval {} (precision: ±{:.1f}%), going on", done.layout,
                                position + 1, wide.front()->family,
                                w ? fmt::format("is ±{:.1f}%", *w * 100) : std::string("is not computed yet"), c.sessions.precision * 100));
      return;
    }
  }
  const std::string why =
      fmt::format("not needed: the gated families of layout {} were decided{} after {} sessions", done.layout,
                  c.sessions.precision > 0 ? fmt::format(" and within ±{:.1f}%", c.sessions.precision * 100) : "", position + 1);
  int skipped = 0;
  for (store::SessionRow& s : sessions) {
    if (s.layout != done.layout || s.order_index <= done.order_index || s.status == store::SessionStatus::kComplete) continue;
    store.FinishSession(s.id, store::SessionStatus::kSkipped, why, "{}", "[]");
    s.status = store::SessionStatus::kSkipped;
    ++skipped;
  }
  progress.Line(fmt::format("[{}] decided{} after {} sessions: {} planned session(s) skipped", done.layout,
                            c.sessions.precision > 0 ? " and precise" : "", position + 1, skipped));
}

int Execute(store::Store& store, std::int64_t campaign, const Prepared& p, const RunOptions& options) {
  const Campaign& c = *p.campaign;
  std::vector<store::SessionRow> sessions = store.Sessions(campaign);
  int remaining = 0;
  for (const store::SessionRow& s : sessions) remaining += s.status == store::SessionStatus::kComplete ? 0 : 1;
  Progress progress(!options.quiet, remaining * p.requests_per_session);
  const InterruptWatch interrupts;
  bool any_failed = false;
  for (store::SessionRow& s : sessions) {
    if (s.status == store::SessionStatus::kComplete || s.status == store::SessionStatus::kSkipped) continue;
    if (s.status == store::SessionStatus::kRunning) {  // the harness died during it
      KillLeftovers(store, *p.cluster, s, progress);
      const std::filesystem::path interrupted = AttemptLogDir(c.store, s.order_index, s.attempts);
      if (std::filesystem::exists(interrupted)) {
        WriteAttemptFailure(interrupted, "interrupted: the harness ended during this attempt, and `tandem run --resume` redid the session");
      }
    }
    if (s.status == store::SessionStatus::kRunning || s.status == store::SessionStatus::kFailed)
      store.ResetSession(s.id);  // killed or retried: from scratch
    std::string reason;
    for (int attempt = 0; attempt <= c.sessions.retry; ++attempt) {
      if (attempt > 0) {
        progress.Line(fmt::format("session {} ({}, {}) failed: {}; retrying", s.order_index + 1, s.layout, s.arm, reason));
        store.ResetSession(s.id);
      }
      reason = RunSession(store, campaign, p, s, progress, static_cast<int>(sessions.size()), NonceRound(p, sessions, s));
      if (reason.empty() || InterruptWatch::interrupted()) break;
    }
    if (InterruptWatch::interrupted()) {
      store.SetCampaignStatus(campaign, "aborted");
      progress.Line(fmt::format("session {} ({}, {}) {}; every process is stopped. `tandem run --resume {}` goes on from it.",
                                s.order_index + 1, s.layout, s.arm, reason, store.file().string()));
      return 130;
    }
    if (reason.empty()) {
      if (!options.quiet)
        progress.Line(fmt::format("session {}/{} ({}, {}) complete", s.order_index + 1, sessions.size(), s.layout, s.arm));
      StopIfDecided(store, campaign, c, sessions, s, progress);
      continue;
    }
    any_failed = true;
    progress.Line(fmt::format("session {} ({}, {}) failed: {}", s.order_index + 1, s.layout, s.arm, reason));
    StopIfDecided(store, campaign, c, sessions, s, progress);
    if (c.sessions.abort_on_failure) {
      store.SetCampaignStatus(campaign, "aborted");
      progress.Line("aborting the campaign (sessions.on_failure: abort)");
      return 1;
    }
  }
  const auto greedy = MarkGreedyMatches(store, campaign);
  store.SetCampaignStatus(campaign, any_failed ? "complete with failures" : "complete");
  PrintSummary(store, campaign, p.arms, greedy, std::cout);
  std::cout << fmt::format("store: {} (campaign {})\n", store.file().string(), campaign);
  return any_failed ? 1 : 0;
}

// One harness per store at a time: an exclusive flock on the database file (SQLite's
// own locks are fcntl locks and do not interact). The kernel drops it when we die.
class StoreLock {
 public:
  explicit StoreLock(const std::filesystem::path& db) : fd_(::open(db.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) throw InputError(fmt::format("{}: cannot open: {}", db.string(), std::strerror(errno)));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      throw InputError(fmt::format("{}: another `tandem run` is using this store", db.string()));
    }
  }
  ~StoreLock() { ::close(fd_); }
  StoreLock(const StoreLock&) = delete;
  StoreLock& operator=(const StoreLock&) = delete;

 private:
  int fd_;
};

// The campaign's `gate:` section plus its design: the looks the gate takes (sessions per
// layout), the block size and whether the campaign is sequential.
store::GateDesign GateDesignOf(const Campaign& c) {
  store::GateDesign d;
  d.baseline = c.gate.baseline;
  d.candidate = c.gate.candidate;
  d.families = c.gate.families;
  if (c.gate.max_regression) d.max_regression = *c.gate.max_regression;
  d.rule = c.gate.proven ? store::GateDesign::Rule::kProven : store::GateDesign::Rule::kNoninferior;
  d.require_identical_greedy = c.gate.require_identical_greedy;
  d.looks = c.sessions.looks(c.arms.size());
  d.block = c.sessions.block(c.arms.size());
  d.sequential = c.sessions.until_decided;
  d.precision = c.sessions.precision;
  d.method = c.sessions.paired ? store::GateDesign::Method::kPaired : store::GateDesign::Method::kWelch;
  return d;
}

// `--extend N`: N more sessions per layout, continuing each layout's order, and the gate's
// looks to go with them (every block when sequential, else one more at the new end). The
// gate then computes every look's boundary for the new size: docs/statistics.md says what
// that does to the error rates.
void Extend(store::Store& store, std::int64_t campaign, const Campaign& c, int more) {
  const int block = c.sessions.block(c.arms.size());
  if (c.sessions.order == SessionSpec::Order::kExplicit) {
    throw InputError(
        fmt::format("{}: an explicit session order cannot be extended; use a pattern (e.g. ABBA) or random", store.file().string()));
  }
  if (more % block != 0) throw InputError(fmt::format("--extend {}: must be a whole number of blocks of {} sessions", more, block));
  const std::vector<store::SessionRow> sessions = store.Sessions(campaign);
  store::GateDesign gate = store::LoadGateDesign(store, campaign);
  std::vector<int>& looks = gate.looks;
  int next = 0;
  for (const store::SessionRow& s : sessions) next = std::max(next, s.order_index + 1);
  std::map<std::string, std::vector<const store::SessionRow*>> by_layout;
  std::vector<std::string> layouts;
  for (const store::SessionRow& s : sessions) {
    if (!by_layout.contains(s.layout)) layouts.push_back(s.layout);
    by_layout[s.layout].push_back(&s);
  }
  int have = 0;
  store.Transaction([&] {
    for (const std::string& name : layouts) {
      const std::vector<const store::SessionRow*>& rows = by_layout[name];
      have = static_cast<int>(rows.size());
      if (std::any_of(rows.begin(), rows.end(), [](const store::SessionRow* r) { return r->status == store::SessionStatus::kSkipped; })) {
        std::cerr << fmt::format("layout {}: decided before its last session; not extended\n", name);
        continue;
      }
      Campaign longer = c;
      longer.sessions.per_layout = have + more;
      std::map<std::string, std::int64_t> arm_ids;
      for (const store::SessionRow* r : rows) arm_ids[r->arm] = r->arm_id;
      for (const PlannedSession& planned : PlanSessions(longer)) {
        if (planned.layout != name || planned.index_in_layout < have) continue;
        store.AddSession(campaign, next++, rows.front()->layout_id, arm_ids.at(planned.arm));
      }
    }
    if (c.sessions.until_decided) {
      for (int n = have + block; n <= have + more; n += block) looks.push_back(n);
    } else {
      looks.push_back(have + more);
    }
    gate.extended.push_back({have, have + more});
    store.SetCampaignGate(campaign, gate.ToJson());
  });
  std::cerr << fmt::format("extended campaign {} by {} sessions per layout ({} → {})\n", campaign, more, have, have + more);
}

// The text a campaign started from: the stored one, unless its secrets were redacted
// there; then the campaign file, which must still be that text (its sha256 is stored).
std::string CampaignTextToResume(const store::Store& store, std::int64_t campaign) {
  const std::string stored = store.CampaignYaml(campaign);
  const std::string sha256 = store.CampaignField(campaign, "yaml_sha256");
  if (Sha256Hex(stored) == sha256) return stored;
  const std::filesystem::path file = store.CampaignField(campaign, "file");
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  const std::string why = !in ? "cannot be read" : Sha256Hex(text.str()) != sha256 ? "changed since the campaign started" : "";
  if (!why.empty()) {
    throw InputError(
        fmt::format("{}: its campaign's secrets (arm env values, secret options) were not stored, so --resume reads them from "
                    "the campaign file, but {} {}; restore that file as it was (sha256 {})",
                    store.file().string(), file.string(), why, sha256.substr(0, 16)));
  }
  return text.str();
}

}  // namespace

int RunCampaign(const Campaign& campaign, const RunOptions& options) {
  Campaign c = campaign;
  if (options.db) c.store = *options.db;
  const Prepared p = Prepare(c, options.dry_run, options.check_hosts, std::cerr);
  if (options.dry_run) {
    PrintPlan(p, std::cout);
    return 0;
  }
  store::Store store = store::Store::Open(c.store);
  const StoreLock lock(c.store);
  std::int64_t id = 0;
  const std::string host = HostFacts().dump();
  const std::string config_sha256 = FileSha256(p.model / "config.json");
  store.Transaction([&] {
    // The text without its secrets; its sha256 is the file's, which lets --resume find the secrets again.
    id = store.CreateCampaign(c.name, std::filesystem::absolute(c.file).string(), RedactCampaignYaml(c.yaml_text), c.yaml_sha256,
                              p.model.string(), p.model_revision, host);
    store.SetCampaignGate(id, GateDesignOf(c).ToJson());
    std::map<std::string, std::int64_t> arms, layouts;
    for (std::size_t i = 0; i < p.arms.size(); ++i) {
      const ResolvedArm& a = p.arms[i];
      arms[a.spec.label] =
          store.AddArm(id, static_cast<int>(i), a.spec.label, a.spec.kind, a.revision, a.coordinator.id, a.worker.id, a.LaunchJson());
      // An external server's checkpoint is not ours to read; the others serve the campaign's.
      if (a.spec.kind != ArmKind::kExternal) store.SetArmModel(arms[a.spec.label], "", "", config_sha256);
    }
    for (std::size_t i = 0; i < c.layouts.size(); ++i) {
      layouts[c.layouts[i].name] = store.AddLayout(id, static_cast<int>(i), c.layouts[i].name, LayoutSpecJson(c.layouts[i]).dump());
    }
    for (const PlannedSession& s : p.plan) store.AddSession(id, s.order_index, layouts[s.layout], arms[s.arm]);
    // Where each role of each arm runs, and its identity read on that host.
    for (const PlacedImage& image : p.cluster->images()) {
      store.AddArmImage(arms[image.arm], std::string(ToString(image.role)), image.host, image.id,
                        image.executable.empty() ? image.image : image.executable);
    }
  });
  return Execute(store, id, p, options);
}

int ResumeCampaign(const std::filesystem::path& db, const RunOptions& options) {
  store::Store store = store::Store::Open(db, store::OpenMode::kExisting);
  const StoreLock lock(db);
  const auto id = store.LatestCampaign();
  if (!id) throw InputError(fmt::format("{}: holds no campaign", db.string()));
  // The campaign as it was started (its stored text), its relative paths resolved
  // where its file was.
  Campaign c = ParseCampaign(CampaignTextToResume(store, *id), store.CampaignField(*id, "file"));
  c.store = db;
  const Prepared p = Prepare(c, false, false, std::cerr);
  // Images must be the ones the campaign started with.
  for (const store::ArmRow& stored : store.Arms(*id)) {
    for (const ResolvedArm& a : p.arms) {
      if (a.spec.label == stored.label && (a.coordinator.id != stored.coordinator_image || a.worker.id != stored.worker_image)) {
        throw InputError(
            fmt::format("arm {}: its images changed since the campaign started ({} / {} then, {} / {} now); resume "
                        "would mix versions",
                        a.spec.label, stored.coordinator_image, stored.worker_image, a.coordinator.id, a.worker.id));
      }
    }
  }
  if (options.extend > 0) Extend(store, *id, c, options.extend);
  return Execute(store, *id, p, options);
}

}  // namespace tandem::harness
