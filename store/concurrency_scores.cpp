// Concurrency and mixed traffic: each batch's aggregate throughput per (case, level), and
// W CASE C2–C16 (the levels above 1 together, each counting once).
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "stats/decode_metrics.hpp"
#include "stats/descriptive.hpp"
#include "stats/stats_error.hpp"
#include "store/workload_scorers.hpp"

namespace tandem::store {

namespace {

// (case, level) → the aggregates of its complete batches, in first-seen order.
struct Aggregates {
  std::map<std::pair<std::string, int>, std::vector<double>> of;
  std::vector<std::pair<std::string, int>> order;
};

Aggregates BatchAggregates(const std::vector<const ScoredSample*>& samples) {
  std::map<int, std::vector<const ScoredSample*>> batches;
  for (const ScoredSample* r : samples) batches[r->batch].push_back(r);
  Aggregates out;
  for (const auto& [batch, members] : batches) {
    std::vector<stats::RequestTiming> timings;
    bool ok = true;
    for (const ScoredSample* r : members) {
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
    const ScoredSample& first = *members.front();
    const auto id = std::make_pair(first.kind == WorkloadKind::kMixed ? std::string("mixed") : first.case_id, first.level);
    if (!out.of.contains(id)) out.order.push_back(id);
    out.of[id].push_back(aggregate);
  }
  return out;
}

}  // namespace

void ScoreConcurrency(const std::vector<const ScoredSample*>& samples, const FamilySink& put) {
  const std::string& w = samples.front()->workload;
  Aggregates a = BatchAggregates(samples);
  std::map<std::string, std::vector<std::pair<int, double>>> above_one;  // case → (level, median aggregate)
  std::vector<std::string> pooled_order;
  for (const auto& id : a.order) {
    put({.family = fmt::format("{}: {} C{}", w, id.first, id.second),
         .metric = FamilyMetric::kAggregate,
         .case_id = id.first,
         .level = id.second},
        a.of[id]);
    if (id.second <= 1) continue;
    if (!above_one.contains(id.first)) pooled_order.push_back(id.first);
    above_one[id.first].emplace_back(id.second, stats::Median(a.of[id]));
  }
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
    put({.family = fmt::format("{}: W {} C{}–C{}", w, c, lo, hi), .metric = FamilyMetric::kPooledLevels, .case_id = c},
        {stats::GeometricMean(medians)});
  }
}

}  // namespace tandem::store
