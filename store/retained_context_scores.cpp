// Retained context: the decode rates of the children, per context size.
#include <map>

#include <fmt/format.h>

#include "store/workload_scorers.hpp"

namespace tandem::store {

void ScoreRetainedContext(const std::vector<const ScoredSample*>& samples, const FamilySink& put) {
  const std::string& w = samples.front()->workload;
  std::map<int, std::vector<double>> per_context;
  for (const ScoredSample* r : samples) {
    if (r->role != "child") continue;
    if (const auto rate = DecodeRateOf(*r)) per_context[r->context].push_back(*rate);
  }
  for (const auto& [context, rates] : per_context) {
    put({.family = fmt::format("{}: retained {}", w, context), .metric = FamilyMetric::kRetained, .context = context}, rates);
  }
}

}  // namespace tandem::store
