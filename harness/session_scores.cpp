#include "harness/session_scores.hpp"

#include <map>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness/store.hpp"
#include "stats/decode_metrics.hpp"
#include "stats/descriptive.hpp"
#include "stats/stats_error.hpp"

namespace tandem::harness {

namespace {

struct Row {
  std::int64_t session;
  std::string layout, arm, workload, kind, case_id, role;
  int repeat, level, batch, slot, context;
  double weight;
  int completion_tokens;
  double t_first_output, t_finish;
  bool valid;
};

std::vector<Row> LoadRows(const Store& store, std::int64_t campaign) {
  Statement s(store.handle(),
              "SELECT se.id, l.name, a.label, w.name, w.kind, x.case_id, x.role, x.repeat, x.level, x.batch, x.slot, x.context, "
              "x.weight, x.completion_tokens, x.t_first_output, x.t_finish, x.valid "
              "FROM sample x JOIN workload_run w ON w.id = x.workload_run_id JOIN session se ON se.id = x.session_id "
              "JOIN layout l ON l.id = se.layout_id JOIN arm a ON a.id = se.arm_id "
              "WHERE se.campaign_id = ? AND se.status = 'complete' AND w.warmup = 0 ORDER BY se.order_index, x.id");
  s.Bind(1, campaign);
  std::vector<Row> rows;
  while (s.Step()) {
    rows.push_back({s.Int(0), s.Text(1), s.Text(2), s.Text(3), s.Text(4), s.Text(5), s.Text(6), static_cast<int>(s.Int(7)),
                    static_cast<int>(s.Int(8)), static_cast<int>(s.Int(9)), static_cast<int>(s.Int(10)), static_cast<int>(s.Int(11)),
                    s.Double(12), static_cast<int>(s.Int(13)), s.Double(14), s.Double(15), s.Int(16) != 0});
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

}  // namespace

std::vector<FamilyScores> ComputeSessionScores(const Store& store, std::int64_t campaign) {
  const std::vector<Row> rows = LoadRows(store, campaign);
  // (layout, family) → session → score, plus each session's arm and order.
  std::map<std::pair<std::string, std::string>, std::map<std::int64_t, double>> scores;
  std::map<std::int64_t, std::string> arm_of;
  std::vector<std::pair<std::string, std::string>> family_order;
  auto put = [&](const Row& any, const std::string& family, double value) {
    const auto key = std::make_pair(any.layout, family);
    if (!scores.contains(key)) family_order.push_back(key);
    scores[key][any.session] = value;
    arm_of[any.session] = any.arm;
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
    if (first.kind == "battery") {
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
      if (!weighted.empty()) put(first, w + ": weighted decode", stats::Median(weighted));
      for (const std::string& c : case_order) put(first, fmt::format("{}: {}", w, c), stats::Median(case_rates[c]));
    } else if (first.kind == "concurrency" || first.kind == "mixed") {
      std::map<int, std::vector<const Row*>> batches;
      for (const Row* r : samples) batches[r->batch].push_back(r);
      std::map<std::string, std::vector<double>> per_family;
      std::vector<std::string> order;
      for (const auto& [batch, members] : batches) {
        std::vector<stats::RequestTiming> timings;
        bool ok = true;
        for (const Row* r : members) {
          ok = ok && r->valid;
          timings.push_back({r->completion_tokens, r->t_first_output, r->t_finish});
        }
        if (!ok) continue;
        const std::string family =
            fmt::format("{}: {} C{}", w, first.kind == "mixed" ? std::string("mixed") : members.front()->case_id, members.front()->level);
        try {
          if (!per_family.contains(family)) order.push_back(family);
          per_family[family].push_back(stats::AggregateThroughput(timings));
        } catch (const stats::StatsError&) {
        }
      }
      for (const std::string& f : order) put(first, f, stats::Median(per_family[f]));
    } else if (first.kind == "retained_context") {
      std::map<int, std::vector<double>> per_context;
      for (const Row* r : samples) {
        if (r->role != "child") continue;
        if (const auto rate = Rate(*r)) per_context[r->context].push_back(*rate);
      }
      for (const auto& [context, rates] : per_context) put(first, fmt::format("{}: retained {}", w, context), stats::Median(rates));
    }
  }

  std::vector<FamilyScores> out;
  for (const auto& key : family_order) {
    FamilyScores f{key.first, key.second, {}};
    for (const auto& [session, value] : scores[key]) f.by_arm[arm_of[session]].push_back(value);
    out.push_back(std::move(f));
  }
  return out;
}

std::pair<int, int> MarkGreedyMatches(Store& store, std::int64_t campaign) {
  Statement s(store.handle(),
              "SELECT x.id, l.name, w.name, x.case_id, x.repeat, x.batch, x.slot, x.content_sha256, w.spec_json, x.nonce "
              "FROM sample x JOIN workload_run w ON w.id = x.workload_run_id JOIN session se ON se.id = x.session_id "
              "JOIN layout l ON l.id = se.layout_id WHERE se.campaign_id = ? AND se.status = 'complete' AND x.valid = 1");
  s.Bind(1, campaign);
  // The same prompt: layout, workload, case, repeat, batch, slot and nonce marker.
  using Key = std::tuple<std::string, std::string, std::string, int, int, int, std::string>;
  std::map<Key, std::vector<std::pair<std::int64_t, std::string>>> groups;
  while (s.Step()) {
    const auto spec = nlohmann::json::parse(s.Text(8), nullptr, false);
    if (spec.is_discarded() || !spec.value("greedy", false)) continue;
    groups[{s.Text(1), s.Text(2), s.Text(3), static_cast<int>(s.Int(4)), static_cast<int>(s.Int(5)), static_cast<int>(s.Int(6)), s.Text(9)}]
        .emplace_back(s.Int(0), s.Text(7));
  }
  int matching = 0, compared = 0;
  store.Transaction([&] {
    for (const auto& [key, members] : groups) {
      if (members.size() < 2) continue;  // nothing to compare with (e.g. a salted external session)
      ++compared;
      std::map<std::string, int> votes;
      for (const auto& [id, sha] : members) ++votes[sha];
      const auto majority = std::max_element(votes.begin(), votes.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
      if (votes.size() == 1) ++matching;
      for (const auto& [id, sha] : members) store.SetSampleCheck(id, "greedy_match", sha == majority->first);
    }
  });
  return {matching, compared};
}

}  // namespace tandem::harness
