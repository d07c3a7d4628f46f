#pragma once

#include <optional>
#include <string>
#include <vector>

#include "stats/log_ratio.hpp"
#include "store/session_scores.hpp"

namespace tandem::store {

// One family in one layout, candidate against baseline: the Welch interval on the
// session log-scores, or why there is none.
struct FamilyComparison {
  const FamilyScores* scores = nullptr;
  std::optional<stats::RatioInterval> interval;
  std::string missing;  // e.g. "candidate: 1 session (needs 2)"; empty when `interval` is set
  std::size_t n_baseline = 0, n_candidate = 0;
};

// Every family (in the order given) that either arm measured.
std::vector<FamilyComparison> CompareArms(const std::vector<FamilyScores>& families, const std::string& baseline,
                                          const std::string& candidate, double level = 0.95);

}  // namespace tandem::store
