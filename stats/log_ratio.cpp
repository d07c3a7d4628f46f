#include "stats/log_ratio.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <boost/math/distributions/students_t.hpp>
#include <fmt/format.h>

#include "stats/descriptive.hpp"
#include "stats/stats_error.hpp"

namespace tandem::stats {

namespace {

void RequireLevel(double level) {
  if (!(level > 0.0 && level < 1.0)) {
    throw StatsError(fmt::format("level: {} is not a confidence level; use a value in (0, 1), e.g. 0.95", level));
  }
}

std::vector<double> Logs(std::span<const double> scores, std::string_view arm) {
  RequirePositive(scores, 2, arm);
  std::vector<double> logs;
  logs.reserve(scores.size());
  for (double s : scores) logs.push_back(std::log(s));
  return logs;
}

// True when the spread of `logs` (standard deviation `sd`) is no larger than the
// rounding error of the logarithms themselves: e.g. ln 2 − ln 1 and ln 6 − ln 3
// differ in the last bit, yet the ratios are identical.
bool WithinRoundingNoise(std::span<const double> logs, double sd) {
  double largest = 0.0;
  for (double v : logs) largest = std::max(largest, std::fabs(v));
  return sd <= 8.0 * std::numeric_limits<double>::epsilon() * std::max(1.0, largest);
}

// Fills ratio, interval, t and p from d, SE and df.
void FinishInterval(RatioInterval& r) {
  const boost::math::students_t_distribution<double> dist(r.df);
  const double t_crit = boost::math::quantile(dist, 0.5 + r.level / 2.0);
  r.ratio = std::exp(r.log_ratio);
  r.lo = std::exp(r.log_ratio - t_crit * r.standard_error);
  r.hi = std::exp(r.log_ratio + t_crit * r.standard_error);
  r.t = r.log_ratio / r.standard_error;
  r.p = 2.0 * boost::math::cdf(boost::math::complement(dist, std::fabs(r.t)));
}

}  // namespace

std::string_view ToString(RatioMethod method) { return method == RatioMethod::kWelch ? "welch" : "paired"; }

RatioInterval WelchLogRatio(std::span<const double> baseline, std::span<const double> candidate, double level) {
  RequireLevel(level);
  const std::vector<double> ln_a = Logs(baseline, "baseline");
  const std::vector<double> ln_b = Logs(candidate, "candidate");
  const double n_a = static_cast<double>(ln_a.size());
  const double n_b = static_cast<double>(ln_b.size());
  const double va = SampleVariance(ln_a) / n_a;  // squared standard error of each mean
  const double vb = SampleVariance(ln_b) / n_b;
  if (WithinRoundingNoise(ln_a, std::sqrt(va * n_a)) && WithinRoundingNoise(ln_b, std::sqrt(vb * n_b))) {
    throw StatsError(
        "baseline and candidate: every session score within each arm is identical, so the "
        "session-to-session noise is unknown and no interval can be formed; check that the "
        "scores are real measurements");
  }

  RatioInterval r;
  r.method = RatioMethod::kWelch;
  r.level = level;
  r.n_baseline = ln_a.size();
  r.n_candidate = ln_b.size();
  r.log_ratio = Mean(ln_b) - Mean(ln_a);
  r.standard_error = std::sqrt(va + vb);
  // Welch–Satterthwaite: ν = (va + vb)² / (va²/(n_a − 1) + vb²/(n_b − 1)).
  r.df = (va + vb) * (va + vb) / (va * va / (n_a - 1.0) + vb * vb / (n_b - 1.0));
  FinishInterval(r);
  return r;
}

std::vector<SessionPair> PairInRunOrder(std::span<const double> baseline, std::span<const double> candidate) {
  if (baseline.size() != candidate.size()) {
    throw StatsError(
        fmt::format("paired: baseline has {} sessions and candidate {}; pairing needs the same number "
                    "(use the Welch method for unbalanced arms)",
                    baseline.size(), candidate.size()));
  }
  std::vector<SessionPair> pairs(baseline.size());
  for (std::size_t i = 0; i < pairs.size(); ++i) pairs[i] = {baseline[i], candidate[i]};
  return pairs;
}

RatioInterval PairedLogRatio(std::span<const SessionPair> pairs, double level) {
  RequireLevel(level);
  std::vector<double> a(pairs.size());
  std::vector<double> b(pairs.size());
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    a[i] = pairs[i].baseline;
    b[i] = pairs[i].candidate;
  }
  const std::vector<double> ln_a = Logs(a, "baseline");
  const std::vector<double> ln_b = Logs(b, "candidate");
  std::vector<double> diffs(pairs.size());
  for (std::size_t i = 0; i < diffs.size(); ++i) diffs[i] = ln_b[i] - ln_a[i];
  const double n = static_cast<double>(diffs.size());
  const double var = SampleVariance(diffs);
  std::vector<double> all_logs = ln_a;
  all_logs.insert(all_logs.end(), ln_b.begin(), ln_b.end());
  if (WithinRoundingNoise(all_logs, std::sqrt(var))) {
    throw StatsError(
        "paired: every pair has the same log-ratio, so the pair-to-pair noise is unknown and "
        "no interval can be formed; check that the scores are real measurements");
  }

  RatioInterval r;
  r.method = RatioMethod::kPaired;
  r.level = level;
  r.n_baseline = pairs.size();
  r.n_candidate = pairs.size();
  r.log_ratio = Mean(diffs);
  r.standard_error = std::sqrt(var / n);
  r.df = n - 1.0;
  FinishInterval(r);
  return r;
}

}  // namespace tandem::stats
