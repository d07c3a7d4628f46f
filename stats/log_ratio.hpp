#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

// A/B verdicts on session scores: the ratio of geometric means candidate/baseline
// with a two-sided confidence interval computed on the log scale. Sessions (not
// requests) are the independent units; see docs/statistics.md.
namespace tandem::stats {

enum class RatioMethod { kWelch, kPaired };
std::string_view ToString(RatioMethod method);  // "welch" | "paired"

struct RatioInterval {
  RatioMethod method = RatioMethod::kWelch;
  double level = 0.95;          // two-sided confidence level
  double ratio = 1.0;           // exp(d): candidate / baseline
  double lo = 1.0;              // exp(d − t·SE)
  double hi = 1.0;              // exp(d + t·SE)
  double log_ratio = 0.0;       // d
  double standard_error = 0.0;  // SE of d
  double df = 0.0;              // degrees of freedom of the t reference
  double t = 0.0;               // d / SE
  double p = 1.0;               // two-sided p-value for d = 0
  std::size_t n_baseline = 0;
  std::size_t n_candidate = 0;

  // True when the whole interval lies on one side of 1 (a significant change).
  bool excludes_one() const { return lo > 1.0 || hi < 1.0; }
};

// Welch's unequal-variance interval on d = mean(ln candidate) − mean(ln baseline),
// SE² = s²_B/n_B + s²_A/n_A, Welch–Satterthwaite ν. Needs ≥ 2 positive finite
// scores per arm, 0 < level < 1, and some spread in at least one arm.
RatioInterval WelchLogRatio(std::span<const double> baseline, std::span<const double> candidate, double level = 0.95);

// One baseline session and the candidate session it ran next to.
struct SessionPair {
  double baseline = 0.0;
  double candidate = 0.0;
};

// Pairs the i-th baseline session with the i-th candidate session, both lists in
// run order. For an ABBA order this pairs the adjacent sessions of each block.
// The lists must have the same length.
std::vector<SessionPair> PairInRunOrder(std::span<const double> baseline, std::span<const double> candidate);

// Paired interval: one-sample t on the per-pair log-ratios ln(B/A), df = pairs − 1.
// Removes drift shared by adjacent sessions (thermal state, host load) from the
// error term. Needs ≥ 2 pairs and some spread in the log-ratios.
RatioInterval PairedLogRatio(std::span<const SessionPair> pairs, double level = 0.95);

}  // namespace tandem::stats
