#include "store/campaign_record.hpp"

#include <fmt/format.h>

#include "common/input_error.hpp"
#include "store/record_fields.hpp"
#include "store/sample_times.hpp"
#include "store/store.hpp"

namespace tandem::store {

namespace {

using nlohmann::json;

json Parse(const std::string& text, json fallback) {
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? fallback : j;
}

}  // namespace

const ArmRecord* CampaignRecord::Arm(const std::string& label) const {
  for (const ArmRecord& a : arms) {
    if (a.label == label) return &a;
  }
  return nullptr;
}

const SessionRecord* CampaignRecord::Session(std::int64_t session) const {
  for (const SessionRecord& s : sessions) {
    if (s.id == session) return &s;
  }
  return nullptr;
}

const WorkloadRecord* CampaignRecord::Workload(std::int64_t run) const {
  for (const WorkloadRecord& w : workloads) {
    if (w.id == run) return &w;
  }
  return nullptr;
}

GateDesign LoadGateDesign(const Store& store, std::int64_t campaign) {
  return GateDesign::FromJson(store.CampaignField(campaign, "gate_json"),
                              fmt::format("{}: campaign {}: gate_json", store.file().string(), campaign));
}

namespace {

void LoadCampaign(const Store& store, std::int64_t campaign, CampaignRecord& r) {
  Statement s(store.handle(),
              "SELECT id, name, file, yaml_sha256, model_path, model_revision, status, created_at, host_json, gate_json "
              "FROM campaign WHERE id = ?");
  s.Bind(1, campaign);
  if (!s.Step()) throw InputError(fmt::format("{}: no campaign {}", r.store_path, campaign));
  r.id = s.Int(0);
  r.name = s.Text(1);
  r.file = s.Text(2);
  r.yaml_sha256 = s.Text(3);
  r.model_path = s.Text(4);
  r.model_revision = s.Text(5);
  r.status = s.Text(6);
  r.created_at = s.Text(7);
  r.host = ReadHostFacts(Parse(s.Text(8), json::object()), fmt::format("{}: campaign {}: host_json", r.store_path, r.id));
  r.gate = LoadGateDesign(store, r.id);
}

void LoadArms(const Store& store, CampaignRecord& r) {
  Statement s(store.handle(),
              "SELECT id, position, label, source_kind, runtime_revision, coordinator_image, worker_image, launch_json, model_id, "
              "model_revision, config_sha256 FROM arm WHERE campaign_id = ? ORDER BY position");
  s.Bind(1, r.id);
  while (s.Step()) {
    const std::string where = fmt::format("{}: arm {}: launch_json", r.store_path, s.Int(0));
    r.arms.push_back({s.Int(0), static_cast<int>(s.Int(1)), s.Text(2),
                      ParseArmKind(s.Text(3), fmt::format("{}: arm {}: source_kind", r.store_path, s.Int(0))), s.Text(4), s.Text(5),
                      s.Text(6), s.Text(8), s.Text(9), s.Text(10), ReadArmLaunch(Parse(s.Text(7), json::object()), where)});
  }
}

void LoadLayouts(const Store& store, CampaignRecord& r) {
  Statement s(store.handle(), "SELECT id, position, name, spec_json FROM layout WHERE campaign_id = ? ORDER BY position");
  s.Bind(1, r.id);
  while (s.Step()) {
    LayoutRecord& l = r.layouts.emplace_back(LayoutRecord{s.Int(0), static_cast<int>(s.Int(1)), s.Text(2)});
    ReadLayoutSpec(Parse(s.Text(3), json::object()), l, fmt::format("{}: layout {}: spec_json", r.store_path, l.id));
  }
}

void LoadSessions(const Store& store, CampaignRecord& r) {
  // A store from before GPU conditions were sampled has none.
  const std::string conditions = store.HasColumn("session", "conditions_json") ? "se.conditions_json" : "'{}'";
  Statement s(store.handle(),
              "SELECT se.id, se.order_index, l.name, a.label, se.status, se.reason, coalesce(se.started_at, ''), "
              "coalesce(se.finished_at, ''), se.attempts, se.host_json, " +
                  conditions +
                  " FROM session se "
                  "JOIN layout l ON l.id = se.layout_id JOIN arm a ON a.id = se.arm_id WHERE se.campaign_id = ? ORDER BY se.order_index");
  s.Bind(1, r.id);
  while (s.Step()) {
    const std::string where = fmt::format("{}: session {}: host_json", r.store_path, s.Int(0));
    r.sessions.push_back({s.Int(0), static_cast<int>(s.Int(1)), s.Text(2), s.Text(3),
                          ParseSessionStatus(s.Text(4), fmt::format("{}: session {}: status", r.store_path, s.Int(0))), s.Text(5),
                          s.Text(6), s.Text(7), static_cast<int>(s.Int(8)), ReadHostFacts(Parse(s.Text(9), json::object()), where),
                          SessionConditions::FromJson(s.Text(10), fmt::format("{}: session {}: conditions_json", r.store_path, s.Int(0)))});
  }
}

void LoadWorkloads(const Store& store, CampaignRecord& r) {
  Statement s(store.handle(),
              "SELECT w.id, w.session_id, w.name, w.kind, w.warmup, w.spec_json, w.stats_before, coalesce(w.stats_after, '') "
              "FROM workload_run w JOIN session se ON se.id = w.session_id WHERE se.campaign_id = ? ORDER BY w.id");
  s.Bind(1, r.id);
  while (s.Step()) {
    const std::string where = fmt::format("{}: workload_run {}: spec_json", r.store_path, s.Int(0));
    r.workloads.push_back({s.Int(0), s.Int(1), s.Text(2),
                           ParseWorkloadKind(s.Text(3), fmt::format("{}: workload_run {}: kind", r.store_path, s.Int(0))), s.Int(4) != 0,
                           ReadWorkloadSettings(Parse(s.Text(5), json::object()), where),
                           ReadPredictionSums(Parse(s.Text(6), json::object())), ReadPredictionSums(Parse(s.Text(7), json::object()))});
  }
}

void LoadSamples(const Store& store, CampaignRecord& r) {
  Statement s(store.handle(),
              "SELECT x.id, x.workload_run_id, x.session_id, w.name, x.case_id, x.role, x.nonce, x.error, x.content, x.content_sha256, "
              "x.finish_reason, x.repeat, x.level, x.batch, x.slot, x.context, x.status, x.weight, x.t_start, x.t_first_output, "
              "x.t_finish, x.prompt_tokens, x.completion_tokens, x.cached_tokens, x.chunks, x.tokenizer_tokens, x.checks_json, "
              "x.flags_json, x.draft_json, x.valid, x.passed, x.t_first_content, " +
                  // A store from before gaps were recorded, read as it is: no gaps.
                  std::string(store.HasColumn("sample", "gaps_json") ? "x.gaps_json" : "'[]'") + ", " +
                  std::string(store.HasColumn("sample", "new_tokens") ? "x.new_tokens" : "0") +
                  " FROM sample x JOIN workload_run w ON w.id = "
                  "x.workload_run_id "
                  "JOIN session se ON se.id = x.session_id WHERE se.campaign_id = ? ORDER BY x.id");
  s.Bind(1, r.id);
  while (s.Step()) {
    SampleRecord x;
    x.id = s.Int(0);
    x.run = s.Int(1);
    x.session = s.Int(2);
    x.workload = s.Text(3);
    x.case_id = s.Text(4);
    x.role = s.Text(5);
    x.nonce = s.Text(6);
    x.error = s.Text(7);
    x.content = s.Text(8);
    x.content_sha256 = s.Text(9);
    x.finish_reason = s.Text(10);
    x.repeat = static_cast<int>(s.Int(11));
    x.level = static_cast<int>(s.Int(12));
    x.batch = static_cast<int>(s.Int(13));
    x.slot = static_cast<int>(s.Int(14));
    x.context = static_cast<int>(s.Int(15));
    x.status = static_cast<int>(s.Int(16));
    x.weight = s.Double(17);
    x.t_start = s.Double(18);
    x.t_first_output = s.Double(19);
    x.t_finish = s.Double(20);
    x.prompt_tokens = static_cast<int>(s.Int(21));
    x.completion_tokens = static_cast<int>(s.Int(22));
    x.cached_tokens = static_cast<int>(s.Int(23));
    x.chunks = static_cast<int>(s.Int(24));
    x.tokenizer_tokens = static_cast<int>(s.Int(25));
    const std::string where = fmt::format("{}: sample {}", r.store_path, x.id);
    x.checks = ReadChecks(Parse(s.Text(26), json::object()), where + ": checks_json");
    const json flags = Parse(s.Text(27), json::object());
    x.token_count_mismatch = ReadTokenCountMismatch(flags, where + ": flags_json");
    x.unverified = flags.is_object() && (flags.contains("prefill_unverified") || flags.contains("retained_unverified"));
    x.new_tokens = static_cast<int>(s.Int(33));
    x.draft = ReadDraftCounts(Parse(s.Text(28), json::object()), where + ": draft_json");
    x.valid = s.Int(29) != 0;
    x.passed = s.Int(30) != 0;
    x.t_first_content = s.Double(31);
    if (const json gaps = Parse(s.Text(32), json::array()); gaps.is_array()) {
      for (const json& g : gaps) {
        if (g.is_number()) x.gaps.push_back(g.get<double>());
      }
    }
    if (x.valid && !ImplausibleTimes(x.t_start, x.t_first_output, x.t_finish).empty()) {
      x.valid = false;
      r.implausible_samples.push_back(x.id);
    }
    r.samples.push_back(std::move(x));
  }
}

}  // namespace

CampaignRecord LoadCampaignRecord(const Store& store, std::optional<std::int64_t> campaign) {
  CampaignRecord r;
  r.store_path = store.file().string();
  if (!campaign) campaign = store.LatestCampaign();
  if (!campaign) throw InputError(fmt::format("{}: holds no campaign", r.store_path));
  LoadCampaign(store, *campaign, r);
  LoadArms(store, r);
  if (r.gate.baseline.empty() && !r.arms.empty()) r.gate.baseline = r.arms[0].label;
  if (r.gate.candidate.empty() && r.arms.size() >= 2) r.gate.candidate = r.arms[1].label;
  for (ArmRecord& a : r.arms) {
    Statement s(store.handle(), "SELECT role, host, image_id, location FROM arm_image WHERE arm_id = ? ORDER BY role, host");
    s.Bind(1, a.id);
    while (s.Step()) a.images.push_back({s.Text(0), s.Text(1), s.Text(2), s.Text(3)});
  }
  LoadLayouts(store, r);
  LoadSessions(store, r);
  LoadWorkloads(store, r);
  LoadSamples(store, r);
  r.families = ComputeSessionScores(store, r.id);
  return r;
}

}  // namespace tandem::store
