#include "harness/commands/campaign_runner.hpp"

#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/input_error.hpp"
#include "common/redact.hpp"
#include "common/sha256.hpp"
#include "harness/campaign/campaign_secrets.hpp"
#include "harness/campaign/spec_json.hpp"
#include "harness/commands/campaign_run.hpp"
#include "harness/commands/session_logs.hpp"
#include "harness/launch/host_facts.hpp"
#include "store/session_scores.hpp"

namespace tandem::harness {

namespace {

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
      reason = RunSession(store, campaign, p, s, progress,
                          {static_cast<int>(sessions.size()), NonceRound(p, sessions, s), LaunchIndex(sessions, s)});
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

namespace {

// A prefill or retained-context workload's prompts are cut from its source text: a resumed
// campaign must cut them from the text its earlier sessions used (the sha256 their stored
// specs recorded), or its sessions would not send the same prompts.
void RequireSameSources(const store::Store& store, std::int64_t campaign, const Campaign& c) {
  for (const WorkloadSpec& w : c.workloads) {
    if (w.source_sha256.empty()) continue;
    store::Statement s(store.handle(),
                       "SELECT coalesce(json_extract(w.spec_json, '$.source_sha256'), '') FROM workload_run w JOIN session se ON "
                       "se.id = w.session_id WHERE se.campaign_id = ? AND w.name = ? LIMIT 1");
    s.Bind(1, campaign).Bind(2, w.name);
    if (!s.Step() || s.Text(0).empty() || s.Text(0) == w.source_sha256) continue;
    throw InputError(
        fmt::format("{}: workload '{}': its prompt source {} changed since the campaign started (sha256 {} then, {} "
                    "now); restore that text to resume",
                    store.file().string(), w.name, w.source.string(), s.Text(0).substr(0, 16), w.source_sha256.substr(0, 16)));
  }
}

}  // namespace

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
  RequireSameSources(store, *id, c);
  if (options.extend > 0) Extend(store, *id, c, options.extend);
  return Execute(store, *id, p, options);
}

}  // namespace tandem::harness
