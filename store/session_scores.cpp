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

namespace tandem::store {

namespace {

struct Row {
  std::int64_t session;
  int layout_position;
  bool greedy;
  std::string layout, arm, workload;
  WorkloadKind kind;
  std::string case_id, role;
  int repeat, level, batch, slot, context;
  double weight;
  int completion_tokens;
  double t_first_output, t_finish;
  bool valid;  // as stored, and with times a request can have (ImplausibleTimes)
};

std::vector<Row> LoadRows(const Store& store, std::int64_t campaign) {
  Statement s(store.handle(),
              "SELECT se.id, l.name, a.label, w.name, w.kind, x.case_id, x.role, x.repeat, x.level, x.batch, x.slot, x.context, "
              "x.weight, x.completion_tokens, x.t_first_output, x.t_finish, x.valid, l.position, "
              "coalesce(json_extract(w.spec_json, '$.greedy'), 1), x.t_start, w.id "
              "FROM sample x JOIN workload_run w ON w.id = x.workload_run_id JOIN session se ON se.id = x.session_id "
              "JOIN layout l ON l.id = se.layout_id JOIN arm a ON a.id = se.arm_id "
              "WHERE se.campaign_id = ? AND se.status = 'complete' AND w.warmup = 0 ORDER BY se.order_index, x.id");
  s.Bind(1, campaign);
  std::vector<Row> rows;
  while (s.Step()) {
    rows.push_back({s.Int(0), static_cast<int>(s.Int(17)), s.Int(18) != 0, s.Text(1), s.Text(2), s.Text(3),
                    ParseWorkloadKind(s.Text(4), fmt::format("{}: workload_run {}: kind", store.file().string(), s.Int(20))), s.Text(5),
                    s.Text(6), static_cast<int>(s.Int(7)), static_cast<int>(s.Int(8)), static_cast<int>(s.Int(9)),
                    static_cast<int>(s.Int(10)), static_cast<int>(s.Int(11)), s.Double(12), static_cast<int>(s.Int(13)), s.Double(14),
                    s.Double(15), s.Int(16) != 0 && ImplausibleTimes(s.Double(19), s.Double(14), s.Double(15)).empty()});
  }
  return rows;
}

std::optional<double> Rate(const Row& r) {
  if (!r.valid || r.completion_tokens < 2) return std::nullopt;
  try {
    return stats::DecodeRate({r.completion_tokens, r.t_first_output, r.t_finish});
  } catch (const stats::StatsError&) {
    return std::nullopt;
  }
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
      return {4, first_seen, f.context, 0};
    case FamilyMetric::kPooledCases:
      return {f.greedy ? 0 : 1, 0, first_seen, 1};
    case FamilyMetric::kPooledLevels:
      return {3, series_seen, 1 << 30, 0};  // after the series' own levels
  }
  return {5, first_seen, 0, 0};
}

}  // namespace

FamilyId FamilyScores::Id() const {
  return {.workload = workload, .metric = metric, .case_id = case_id, .level = level, .context = context, .greedy = greedy};
}

std::vector<FamilyScores> ComputeSessionScores(const Store& store, std::int64_t campaign) {
  const std::vector<Row> rows = LoadRows(store, campaign);
  // Families by (layout position, name), each with its scores by session.
  std::map<std::pair<int, std::string>, FamilyScores> families;
  std::map<std::pair<int, std::string>, std::map<std::int64_t, std::pair<std::string, std::vector<double>>>> scores;
  std::map<std::string, int> first_seen;   // family name → order of first appearance
  std::map<std::string, int> series_seen;  // "workload\x1fcase" of concurrency families → the same
  auto put = [&](const Row& any, FamilyScores meta, std::vector<double> values) {
    meta.layout = any.layout;
    meta.workload = any.workload;
    meta.kind = any.kind;
    meta.greedy = any.greedy;
    first_seen.try_emplace(meta.family, static_cast<int>(first_seen.size()));
    series_seen.try_emplace(meta.workload + '\x1f' + meta.case_id, static_cast<int>(series_seen.size()));
    const auto key = std::make_pair(any.layout_position, meta.family);
    families.try_emplace(key, std::move(meta));
    scores[key][any.session] = {any.arm, std::move(values)};
  };

  // Group samples by session and workload.
  std::map<std::tuple<std::int64_t, std::string>, std::vector<const Row*>> runs;
  std::vector<std::tuple<std::int64_t, std::string>> run_order;
  for (const Row& r : rows) {
    const auto key = std::make_tuple(r.session, r.workload);
    if (!runs.contains(key)) run_order.push_back(key);
    runs[key].push_back(&r);
  }
  for (const auto& key : run_order) {
    const std::vector<const Row*>& samples = runs[key];
    const Row& first = *samples.front();
    const std::string& w = first.workload;
    if (first.kind == WorkloadKind::kBattery) {
      std::map<int, std::vector<stats::WeightedRequest>> repeats;
      std::map<int, bool> complete;
      std::map<std::string, std::vector<double>> case_rates;
      std::vector<std::string> case_order;
      for (const Row* r : samples) {
        if (const auto rate = Rate(*r)) {
          if (!case_rates.contains(r->case_id)) case_order.push_back(r->case_id);
          case_rates[r->case_id].push_back(*rate);
        }
        if (r->weight <= 0) continue;
        complete.try_emplace(r->repeat, true);
        if (!r->valid) complete[r->repeat] = false;
        repeats[r->repeat].push_back({r->case_id, r->weight, {r->completion_tokens, r->t_first_output, r->t_finish}});
      }
      std::vector<double> weighted;
      for (const auto& [repeat, requests] : repeats) {
        if (!complete[repeat]) continue;
        try {
          weighted.push_back(stats::WeightedDecode(requests));
        } catch (const stats::StatsError&) {
        }
      }
      if (!weighted.empty()) {
        put(first, {.family = w + ": weighted decode", .metric = FamilyMetric::kWeighted}, weighted);
      }
      for (const std::string& c : case_order) {
        put(first, {.family = fmt::format("{}: {}", w, c), .metric = FamilyMetric::kCase, .case_id = c}, case_rates[c]);
      }
      // W: per content case — every weighted case counts once, whatever its token count.
      std::vector<double> case_medians;
      for (const std::string& c : case_order) {
        const auto weighted_case =
            std::find_if(samples.begin(), samples.end(), [&](const Row* r) { return r->case_id == c && r->weight > 0; });
        if (weighted_case != samples.end()) case_medians.push_back(stats::Median(case_rates[c]));
      }
      if (case_medians.size() >= 2) {
        put(first, {.family = w + ": W per content case", .metric = FamilyMetric::kPooledCases}, {stats::GeometricMean(case_medians)});
      }
    } else if (first.kind == WorkloadKind::kConcurrency || first.kind == WorkloadKind::kMixed) {
      std::map<int, std::vector<const Row*>> batches;
      for (const Row* r : samples) batches[r->batch].push_back(r);
      std::map<std::pair<std::string, int>, std::vector<double>> per_family;  // (case, level) → aggregates
      std::vector<std::pair<std::string, int>> order;
      for (const auto& [batch, members] : batches) {
        std::vector<stats::RequestTiming> timings;
        bool ok = true;
        for (const Row* r : members) {
          ok = ok && r->valid;
          timings.push_back({r->completion_tokens, r->t_first_output, r->t_finish});
        }
        if (!ok) continue;
        double aggregate = 0;
        try {
          aggregate = stats::AggregateThroughput(timings);
        } catch (const stats::StatsError&) {
          continue;
        }
        const auto id =
            std::make_pair(first.kind == WorkloadKind::kMixed ? std::string("mixed") : members.front()->case_id, members.front()->level);
        if (!per_family.contains(id)) order.push_back(id);
        per_family[id].push_back(aggregate);
      }
      std::map<std::string, std::vector<std::pair<int, double>>> above_one;  // case → (level, median aggregate)
      std::vector<std::string> pooled_order;
      for (const auto& id : order) {
        put(first,
            {.family = fmt::format("{}: {} C{}", w, id.first, id.second),
             .metric = FamilyMetric::kAggregate,
             .case_id = id.first,
             .level = id.second},
            per_family[id]);
        if (id.second <= 1) continue;
        if (!above_one.contains(id.first)) pooled_order.push_back(id.first);
        above_one[id.first].emplace_back(id.second, stats::Median(per_family[id]));
      }
      // W: CASE C2–C16 — the concurrent levels together, each counting once.
      for (const std::string& c : pooled_order) {
        const auto& levels = above_one[c];
        if (levels.size() < 2) continue;
        std::vector<double> medians;
        int lo = levels.front().first, hi = lo;
        for (const auto& [level, median] : levels) {
          medians.push_back(median);
          lo = std::min(lo, level);
          hi = std::max(hi, level);
        }
        put(first, {.family = fmt::format("{}: W {} C{}–C{}", w, c, lo, hi), .metric = FamilyMetric::kPooledLevels, .case_id = c},
            {stats::GeometricMean(medians)});
      }
    } else if (first.kind == WorkloadKind::kRetainedContext) {
      std::map<int, std::vector<double>> per_context;
      for (const Row* r : samples) {
        if (r->role != "child") continue;
        if (const auto rate = Rate(*r)) per_context[r->context].push_back(*rate);
      }
      for (const auto& [context, rates] : per_context) {
        put(first, {.family = fmt::format("{}: retained {}", w, context), .metric = FamilyMetric::kRetained, .context = context}, rates);
      }
    }
  }

  std::vector<FamilyScores> out;
  for (auto& [key, f] : families) {
    for (const auto& [session, arm_values] : scores[key]) {  // session ids ascend with run order
      const auto& [arm, values] = arm_values;
      f.by_arm[arm].push_back(stats::Median(values));
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
