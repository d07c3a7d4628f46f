#pragma once

#include <cstddef>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "stats/log_ratio.hpp"

// The gate's decision rule, for one look or many: each gated family is tested against
// the threshold T = 1 − max_regression by two one-sided tests on the log ratio —
// "pass" (H0: ratio ≤ T) and "fail" (H0: ratio ≥ T) — each at one-sided level α
// (0.025: the 95% interval lies above, or below, T). Sequential designs spend α over
// their looks (stats/group_sequential.hpp); several families control the family-wise
// error of the fail side by Holm's step-down, recomputed as families are rejected
// (Maurer & Bretz 2013). The pass side needs no adjustment: a campaign passes only when
// every gated family passes (an intersection–union test). See docs/statistics.md.
namespace tandem::stats {

enum class Decision { kUndecided, kPass, kFail };

// The z statistic of ln(ratio / T) and the one-sided p-values of the two tests, from the
// Student-t reference of the interval (its df).
struct ThresholdTest {
  double t = 0;       // (d − ln T) / SE
  double p_pass = 1;  // P(as far above T | ratio = T)
  double p_fail = 1;  // P(as far below T | ratio = T)
};
ThresholdTest TestThreshold(const RatioInterval& r, double threshold);

// The interval exp(d ± t_{1−level, df}·SE) at one-sided `level` on each side.
std::pair<double, double> IntervalAtLevel(const RatioInterval& r, double one_sided_level);

// One family's looks, in order: the information fraction of each (≤ 1) and the
// interval computed then. The last look of a design that will take no more uses
// fraction 1 (all remaining α).
struct FamilyLooks {
  std::vector<double> fractions;
  std::vector<RatioInterval> intervals;
};

struct FamilyDecision {
  Decision decision = Decision::kUndecided;
  std::size_t look = 0;    // the deciding look, else the last one (0-based)
  double pass_level = 0;   // one-sided nominal level of the pass test at that look
  double fail_level = 0;   // … of the fail test, after Holm
  double fail_budget = 0;  // the fail side's α for this family (α / families still open)
  ThresholdTest test;      // at that look
};

// Boundaries already computed, by (fractions, alpha): a caller deciding many campaigns of
// one design (a simulation) passes one to DecideFamilies so each is computed once.
class BoundaryCache {
 public:
  const std::vector<double>& Levels(std::span<const double> fractions, double alpha);

 private:
  std::map<std::pair<std::vector<double>, double>, std::vector<double>> levels_;
};

struct DecisionRule {
  double threshold = 0.97;
  double alpha = 0.025;    // one-sided, each side
  bool fail_only = false;  // rule `proven`: never decide "pass" before the last look; pass there unless failed
  bool holm = true;        // control the family-wise error of the fail side across families
  BoundaryCache* cache = nullptr;
};

// Decides every family at its looks; a family's decision is its first crossing.
std::vector<FamilyDecision> DecideFamilies(std::span<const FamilyLooks> families, const DecisionRule& rule);

}  // namespace tandem::stats
