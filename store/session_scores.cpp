#include "store/session_scores.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stats/decode_metrics.hpp"
#include "stats/descriptive.hpp"
#include "stats/stats_error.hpp"
#include "store/sample_times.hpp"
#include "store/store.hpp"
#include "store/workload_scorers.hpp"

namespace tandem::store {

namespace {

// A JSON list of numbers or of words, as the harness stored it; anything else reads as none
// (the stored record's reader, not this one, reports a malformed column).
std::vector<double> NumberList(const std::string& text) {
  std::vector<double> out;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_array()) return out;
  for (const nlohmann::json& x : j) {
    if (x.is_number()) out.push_back(x.get<double>());
  }
  return out;
}

std::vector<FamilyMetric> LatencyList(const std::string& text, const std::string& where) {
  std::vector<FamilyMetric> out;
  const nlohmann::json j = nlohmann::json::parse(text.empty() ? "[]" : text, nullptr, false);
  if (!j.is_array()) return out;
  for (const nlohmann::json& x : j) {
    if (x.is_string()) out.push_back(ParseFamilyMetric(x.get<std::string>(), where));
  }
  return out;
}

std::vector<ScoredSample> LoadSamples(const Store& store, std::int64_t campaign) {
  // A store from before inter-token gaps were recorded has none.
  const std::string gaps = store.HasColumn("sample", "gaps_json") ? "x.gaps_json" : "'[]'";
  const std::string new_tokens = store.HasColumn("sample", "new_tokens") ? "x.new_tokens" : "0";
  Statement s(store.handle(),
              "SELECT se.id, l.name, a.label, w.name, w.kind, x.case_id, x.role, x.repeat, x.level, x.batch, x.slot, x.context, "
              "x.weight, x.completion_tokens, x.t_first_output, x.t_finish, x.valid, l.position, "
              "coalesce(json_extract(w.spec_json, '$.greedy'), 1), x.t_start, w.id, " +
                  gaps + ", coalesce(json_extract(w.spec_json, '$.latency'), '[]'), " + new_tokens +
                  " "
                  "FROM sample x JOIN workload_run w ON w.id = x.workload_run_id JOIN session se ON se.id = x.session_id "
                  "JOIN layout l ON l.id = se.layout_id JOIN arm a ON a.id = se.arm_id "
                  "WHERE se.campaign_id = ? AND se.status = 'complete' AND w.warmup = 0 ORDER BY se.order_index, x.id");
  s.Bind(1, campaign);
  std::vector<ScoredSample> rows;
  std::map<std::int64_t, std::vector<FamilyMetric>> latency_of_run;
  while (s.Step()) {
    const std::int64_t run = s.Int(20);
    const std::string where = fmt::format("{}: workload_run {}", store.file().string(), run);
    rows.push_back({s.Int(0), static_cast<int>(s.Int(17)), s.Int(18) != 0, s.Text(1), s.Text(2), s.Text(3),
                    ParseWorkloadKind(s.Text(4), where + ": kind"), s.Text(5), s.Text(6), static_cast<int>(s.Int(7)),
                    static_cast<int>(s.Int(8)), static_cast<int>(s.Int(9)), static_cast<int>(s.Int(10)), static_cast<int>(s.Int(11)),
                    s.Double(12), static_cast<int>(s.Int(13)), s.Double(14), s.Double(15),
                    s.Int(16) != 0 && ImplausibleTimes(s.Double(19), s.Double(14), s.Double(15)).empty()});
    ScoredSample& x = rows.back();
    x.t_start = s.Double(19);
    x.new_tokens = static_cast<int>(s.Int(23));
    auto [latency, fresh] = latency_of_run.try_emplace(run);
    if (fresh) latency->second = LatencyList(s.Text(22), where + ": spec_json: latency");
    x.latency = latency->second;
    if (!x.latency.empty()) x.gaps = NumberList(s.Text(21));
  }
  return rows;
}

// Where a session ran: what a family of the session itself (startup, memory) is filed under.
struct SessionOrigin {
  std::int64_t session;
  int layout_position;
  std::string layout, arm;
};

// The launch records of the campaign's complete sessions, with where each session ran.
std::vector<std::pair<SessionOrigin, SessionStartup>> LoadStartups(const Store& store, std::int64_t campaign) {
  std::vector<std::pair<SessionOrigin, SessionStartup>> out;
  if (!store.HasColumn("session", "startup_json")) return out;  // a store from before launches were timed
  Statement s(store.handle(),
              "SELECT se.id, l.position, l.name, a.label, se.startup_json FROM session se JOIN layout l ON l.id = se.layout_id "
              "JOIN arm a ON a.id = se.arm_id WHERE se.campaign_id = ? AND se.status = 'complete' ORDER BY se.order_index");
  s.Bind(1, campaign);
  while (s.Step()) {
    out.emplace_back(SessionOrigin{s.Int(0), static_cast<int>(s.Int(1)), s.Text(2), s.Text(3)},
                     SessionStartup::FromJson(s.Text(4), fmt::format("{}: session {}: startup_json", store.file().string(), s.Int(0))));
  }
  return out;
}

// Where a family sits in the report: batteries (greedy, then sampled; weighted before
// cases), then every concurrency/mixed family at C1, then the higher levels grouped by
// case, then retained context. Ties keep first-seen order.
// `first_seen` orders families, `series_seen` the (workload, case) series of the
// concurrency families.
std::tuple<int, int, int, int> SortKey(const FamilyScores& f, int first_seen, int series_seen) {
  switch (f.metric) {
    case FamilyMetric::kWeighted:
      return {f.greedy ? 0 : 1, 0, first_seen, 0};
    case FamilyMetric::kCase:
      return {f.greedy ? 0 : 1, 1, first_seen, 0};
    case FamilyMetric::kAggregate:
      return {f.level == 1 ? 2 : 3, series_seen, f.level, 0};
    case FamilyMetric::kRetained:
    case FamilyMetric::kPrefill:
    case FamilyMetric::kPooledPrefill:
      return {4, first_seen, 0, 0};
    case FamilyMetric::kPooledCases:
      return {f.greedy ? 0 : 1, 0, first_seen, 1};
    case FamilyMetric::kPooledLevels:
      return {3, series_seen, 1 << 30, 0};  // after the series' own levels
    case FamilyMetric::kTtft:
    case FamilyMetric::kItl:
    case FamilyMetric::kTpot:
    case FamilyMetric::kE2e:  // per workload and level: TTFT, ITL, TPOT, E2E, each p50, p90, p99
      return {5, series_seen, f.level, 1000 * static_cast<int>(f.metric) + f.percentile};
    case FamilyMetric::kStartup:
      return {6, first_seen, 0, 0};
    case FamilyMetric::kMemory:
      return {7, first_seen, 0, 0};
  }
  return {5, first_seen, 0, 0};
}

}  // namespace

FamilyId FamilyScores::Id() const {
  return {.workload = workload,
          .metric = metric,
          .case_id = case_id,
          .level = level,
          .context = context,
          .new_tokens = new_tokens,
          .percentile = percentile,
          .greedy = greedy};
}

std::optional<double> DecodeRateOf(const ScoredSample& r) {
  if (!r.valid || r.completion_tokens < 2) return std::nullopt;
  try {
    return stats::DecodeRate({r.completion_tokens, r.t_first_output, r.t_finish});
  } catch (const stats::StatsError&) {
    return std::nullopt;
  }
}

WorkloadScorer ScorerFor(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kBattery:
      return ScoreBattery;
    case WorkloadKind::kConcurrency:
    case WorkloadKind::kMixed:
      return ScoreConcurrency;
    case WorkloadKind::kRetainedContext:
      return ScoreRetainedContext;
    case WorkloadKind::kPrefill:
      return ScorePrefill;
  }
  return nullptr;
}

namespace {

// The families of a campaign as the scorers fill them: by (layout position, label), each
// with its values by session; and the orders the report sorts them by.
struct FamilyTable {
  std::map<std::pair<int, std::string>, FamilyScores> families;
  std::map<std::pair<int, std::string>, std::map<std::int64_t, std::pair<std::string, std::vector<double>>>> scores;
  std::map<std::string, int> first_seen;   // family label → order of first appearance
  std::map<std::string, int> series_seen;  // "workload\x1fcase" → the same, for the concurrency series

  void Put(const ScoredSample& any, FamilyScores meta, std::vector<double> values) {
    meta.workload = any.workload;
    meta.kind = any.kind;
    meta.greedy = any.greedy;
    Put({any.session, any.layout_position, any.layout, any.arm}, std::move(meta), std::move(values));
  }

  // A family of a session itself (startup, memory): its workload named by the caller.
  void Put(const SessionOrigin& origin, FamilyScores meta, std::vector<double> values) {
    meta.layout = origin.layout;
    first_seen.try_emplace(meta.family, static_cast<int>(first_seen.size()));
    series_seen.try_emplace(meta.workload + '\x1f' + meta.case_id, static_cast<int>(series_seen.size()));
    const auto key = std::make_pair(origin.layout_position, meta.family);
    families.try_emplace(key, std::move(meta));
    scores[key][origin.session] = {origin.arm, std::move(values)};
  }

  // Each session's score (the median of its values), families in report order.
  std::vector<FamilyScores> InReportOrder() {
    std::vector<FamilyScores> out;
    for (auto& [key, f] : families) {
      for (const auto& [session, arm_values] : scores[key]) {  // session ids ascend with run order
        const auto& [arm, values] = arm_values;
        const double score = values.empty() ? 0 : f.percentile > 0 ? stats::Percentile(values, f.percentile) : stats::Median(values);
        if (f.percentile > 0 && !(score > 0)) {  // too few requests, or a tail of zero gaps: no log score
          ++f.not_estimable_by_arm[arm];
          continue;
        }
        f.by_arm[arm].push_back(score);
        f.sessions_by_arm[arm].push_back(session);
        f.values_by_arm[arm].push_back(values);
      }
      out.push_back(std::move(f));
    }
    std::map<std::string, int> layout_position;
    for (const auto& [key, f] : families) layout_position[f.layout] = key.first;
    std::stable_sort(out.begin(), out.end(), [&](const FamilyScores& a, const FamilyScores& b) {
      const auto ka = SortKey(a, first_seen[a.family], series_seen[a.workload + '\x1f' + a.case_id]);
      const auto kb = SortKey(b, first_seen[b.family], series_seen[b.workload + '\x1f' + b.case_id]);
      if (ka != kb) return ka < kb;
      if (a.family != b.family) return first_seen[a.family] < first_seen[b.family];
      return layout_position[a.layout] < layout_position[b.layout];
    });
    return out;
  }
};

}  // namespace

std::vector<FamilyScores> ComputeSessionScores(const Store& store, std::int64_t campaign) {
  const std::vector<ScoredSample> samples = LoadSamples(store, campaign);
  // Samples by session and workload, in run order.
  std::map<std::tuple<std::int64_t, std::string>, std::vector<const ScoredSample*>> runs;
  std::vector<std::tuple<std::int64_t, std::string>> run_order;
  for (const ScoredSample& x : samples) {
    const auto key = std::make_tuple(x.session, x.workload);
    if (!runs.contains(key)) run_order.push_back(key);
    runs[key].push_back(&x);
  }
  FamilyTable table;
  for (const auto& key : run_order) {
    const std::vector<const ScoredSample*>& run = runs[key];
    const ScoredSample& first = *run.front();
    const FamilySink put = [&](FamilyScores family, std::vector<double> values) { table.Put(first, std::move(family), std::move(values)); };
    ScorerFor(first.kind)(run, put);
    if (!first.latency.empty()) ScoreLatency(run, put);
  }
  // Named, not bound: clang 14 (the fuzzers' compiler) cannot capture a structured binding.
  for (const auto& session : LoadStartups(store, campaign)) {
    const SessionOrigin& origin = session.first;
    ScoreStartup(session.second,
                 [&](FamilyScores family, std::vector<double> values) { table.Put(origin, std::move(family), std::move(values)); });
  }
  return table.InReportOrder();
}

GreedyAgreementCounts MarkGreedyMatches(Store& store, std::int64_t campaign) {
  Statement s(store.handle(),
              "SELECT x.id, l.name, w.name, x.case_id, x.repeat, x.batch, x.slot, x.content_sha256, w.spec_json, x.nonce, se.arm_id "
              "FROM sample x JOIN workload_run w ON w.id = x.workload_run_id JOIN session se ON se.id = x.session_id "
              "JOIN layout l ON l.id = se.layout_id WHERE se.campaign_id = ? AND se.status = 'complete' AND x.valid = 1");
  s.Bind(1, campaign);
  // The same prompt: layout, workload, case, repeat, batch, slot and nonce marker.
  using Key = std::tuple<std::string, std::string, std::string, int, int, int, std::string>;
  std::map<Key, std::map<std::int64_t, std::vector<std::pair<std::int64_t, std::string>>>> groups;  // prompt → arm → samples
  while (s.Step()) {
    const auto spec = nlohmann::json::parse(s.Text(8), nullptr, false);
    if (spec.is_discarded() || !spec.value("greedy", false)) continue;
    groups[{s.Text(1), s.Text(2), s.Text(3), static_cast<int>(s.Int(4)), static_cast<int>(s.Int(5)), static_cast<int>(s.Int(6)), s.Text(9)}]
          [s.Int(10)]
              .emplace_back(s.Int(0), s.Text(7));
  }
  GreedyAgreementCounts counts;
  store.Transaction([&] {
    for (const auto& [key, arms] : groups) {
      std::set<std::string> majorities;
      for (const auto& [arm, members] : arms) {
        std::map<std::string, int> votes;
        for (const auto& [id, sha] : members) ++votes[sha];
        const auto majority =
            std::max_element(votes.begin(), votes.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
        majorities.insert(majority->first);
        if (members.size() < 2) continue;  // nothing of its own arm to compare with (e.g. a salted external session)
        ++counts.within_compared;
        counts.within_agree += votes.size() == 1 ? 1 : 0;
        for (const auto& [id, sha] : members) store.SetSampleCheck(id, "greedy_match", sha == majority->first);
      }
      if (arms.size() >= 2) {
        ++counts.across_compared;
        counts.across_agree += majorities.size() == 1 ? 1 : 0;
      }
    }
  });
  return counts;
}

}  // namespace tandem::store
