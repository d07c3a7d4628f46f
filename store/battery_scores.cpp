// A battery's families: the weighted decode of each repeat, each case's request rates,
// and W per content case (every weighted case once, whatever its token count).
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "stats/decode_metrics.hpp"
#include "stats/descriptive.hpp"
#include "stats/stats_error.hpp"
#include "store/workload_scorers.hpp"

namespace tandem::store {

void ScoreBattery(const std::vector<const ScoredSample*>& samples, const FamilySink& put) {
  const std::string& w = samples.front()->workload;
  std::map<int, std::vector<stats::WeightedRequest>> repeats;
  std::map<int, bool> complete;
  std::map<std::string, std::vector<double>> case_rates;
  std::vector<std::string> case_order;
  for (const ScoredSample* r : samples) {
    if (const auto rate = DecodeRateOf(*r)) {
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
  if (!weighted.empty()) put({.family = w + ": weighted decode", .metric = FamilyMetric::kWeighted}, weighted);
  for (const std::string& c : case_order) {
    put({.family = fmt::format("{}: {}", w, c), .metric = FamilyMetric::kCase, .case_id = c}, case_rates[c]);
  }
  std::vector<double> case_medians;
  for (const std::string& c : case_order) {
    const auto weighted_case =
        std::find_if(samples.begin(), samples.end(), [&](const ScoredSample* r) { return r->case_id == c && r->weight > 0; });
    if (weighted_case != samples.end()) case_medians.push_back(stats::Median(case_rates[c]));
  }
  if (case_medians.size() >= 2) {
    put({.family = w + ": W per content case", .metric = FamilyMetric::kPooledCases}, {stats::GeometricMean(case_medians)});
  }
}

}  // namespace tandem::store
