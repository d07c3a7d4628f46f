// The latency families of a battery, concurrency or mixed run: per session, the 50th, 90th
// and 99th percentiles of each request's time to first output, inter-token gaps, time per
// output token and end-to-end time (docs/statistics.md, "Latency families").
#include <map>
#include <optional>

#include <fmt/format.h>

#include "store/workload_scorers.hpp"

namespace tandem::store {

namespace {

constexpr int kPercentiles[] = {50, 90, 99};

// One request's value of a per-request metric; none where the request has no such time (no
// text: no first output; fewer than two tokens: no time per token after the first).
std::optional<double> RequestValue(FamilyMetric metric, const ScoredSample& s) {
  switch (metric) {
    case FamilyMetric::kTtft:
      if (s.t_first_output <= 0) return std::nullopt;
      return s.t_first_output - s.t_start;
    case FamilyMetric::kTpot:
      if (s.completion_tokens < 2 || s.t_first_output <= 0 || !(s.t_finish > s.t_first_output)) return std::nullopt;
      return (s.t_finish - s.t_first_output) / (s.completion_tokens - 1);
    case FamilyMetric::kE2e:
      return s.t_finish - s.t_start;
    default:
      return std::nullopt;
  }
}

// The values of one metric over some requests, and how many requests gave them (ITL: every
// gap of every request that streamed at least two deltas).
struct MetricValues {
  std::vector<double> values;
  int requests = 0;
};

MetricValues Collect(FamilyMetric metric, const std::vector<const ScoredSample*>& requests) {
  MetricValues out;
  for (const ScoredSample* s : requests) {
    if (metric == FamilyMetric::kItl) {
      if (s->gaps.empty()) continue;
      out.values.insert(out.values.end(), s->gaps.begin(), s->gaps.end());
      ++out.requests;
    } else if (const std::optional<double> v = RequestValue(metric, *s)) {
      out.values.push_back(*v);
      ++out.requests;
    }
  }
  return out;
}

}  // namespace

int LatencyMinimumRequests(int percentile) { return percentile >= 99 ? 20 : percentile >= 90 ? 10 : 1; }

void ScoreLatency(const std::vector<const ScoredSample*>& run, const FamilySink& put) {
  const ScoredSample& first = *run.front();
  const bool battery = first.kind == WorkloadKind::kBattery;
  // A battery is one series; a concurrency or mixed workload one per level (its cases pooled).
  std::map<int, std::vector<const ScoredSample*>> by_level;
  for (const ScoredSample* s : run) {
    if (s->valid) by_level[battery ? 1 : s->level].push_back(s);
  }
  for (const auto& [level, requests] : by_level) {
    for (const FamilyMetric metric : first.latency) {
      const MetricValues m = Collect(metric, requests);
      for (const int p : kPercentiles) {
        FamilyScores f;
        f.family = battery ? fmt::format("{}: {} p{}", first.workload, LatencyName(metric), p)
                           : fmt::format("{}: {} p{} C{}", first.workload, LatencyName(metric), p, level);
        f.metric = metric;
        f.level = level;
        f.percentile = p;
        f.direction = Direction::kLowerIsBetter;
        put(std::move(f), m.requests >= LatencyMinimumRequests(p) ? m.values : std::vector<double>{});
      }
    }
  }
}

}  // namespace tandem::store
