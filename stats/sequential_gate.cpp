#include "stats/sequential_gate.hpp"

#include <cmath>
#include <optional>

#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>
#include <fmt/format.h>

#include "stats/group_sequential.hpp"
#include "stats/stats_error.hpp"

namespace tandem::stats {

namespace {

// A z boundary as the one-sided nominal level it stands for; the t reference then turns
// that level into a critical value at the interval's own df (small campaigns).
double NominalLevel(double z) { return boost::math::cdf(boost::math::complement(boost::math::normal_distribution<double>(), z)); }

std::vector<double> ComputeLevels(std::span<const double> fractions, double alpha) {
  std::vector<double> levels;
  for (double c : ObrienFlemingBoundaries(fractions, alpha)) levels.push_back(NominalLevel(c));
  return levels;
}

std::vector<double> Levels(const FamilyLooks& f, double alpha, BoundaryCache* cache) {
  return cache != nullptr ? cache->Levels(f.fractions, alpha) : ComputeLevels(f.fractions, alpha);
}

std::optional<std::size_t> FirstCrossing(const FamilyLooks& f, const std::vector<double>& levels, double threshold, bool fail_side) {
  for (std::size_t k = 0; k < f.intervals.size(); ++k) {
    const ThresholdTest t = TestThreshold(f.intervals[k], threshold);
    if ((fail_side ? t.p_fail : t.p_pass) < levels[k]) return k;
  }
  return std::nullopt;
}

}  // namespace

const std::vector<double>& BoundaryCache::Levels(std::span<const double> fractions, double alpha) {
  auto key = std::make_pair(std::vector<double>(fractions.begin(), fractions.end()), alpha);
  auto it = levels_.find(key);
  if (it == levels_.end()) it = levels_.emplace(key, ComputeLevels(fractions, alpha)).first;
  return it->second;
}

ThresholdTest TestThreshold(const RatioInterval& r, double threshold) {
  if (!(threshold > 0)) throw StatsError(fmt::format("gate threshold {} must be > 0", threshold));
  if (!(r.standard_error > 0 && r.df > 0)) throw StatsError("gate: an interval without spread cannot be tested");
  ThresholdTest t;
  t.t = (r.log_ratio - std::log(threshold)) / r.standard_error;
  const boost::math::students_t_distribution<double> dist(r.df);
  t.p_pass = boost::math::cdf(boost::math::complement(dist, t.t));
  t.p_fail = boost::math::cdf(dist, t.t);
  return t;
}

std::pair<double, double> IntervalAtLevel(const RatioInterval& r, double one_sided_level) {
  if (!(one_sided_level > 0 && one_sided_level < 0.5))
    throw StatsError(fmt::format("one-sided level {} must be in (0, 0.5)", one_sided_level));
  const double q = boost::math::quantile(boost::math::complement(boost::math::students_t_distribution<double>(r.df), one_sided_level));
  return {std::exp(r.log_ratio - q * r.standard_error), std::exp(r.log_ratio + q * r.standard_error)};
}

std::vector<FamilyDecision> DecideFamilies(std::span<const FamilyLooks> families, const DecisionRule& rule) {
  for (const FamilyLooks& f : families) {
    if (f.fractions.empty() || f.fractions.size() != f.intervals.size()) {
      throw StatsError(fmt::format("gate: a family with {} looks and {} intervals", f.fractions.size(), f.intervals.size()));
    }
  }
  const std::size_t n = families.size();
  std::vector<FamilyDecision> out(n);
  std::vector<std::optional<std::size_t>> pass_at(n), fail_at(n);
  std::vector<std::vector<double>> pass_levels(n);  // the pass side spends its own alpha, unadjusted
  for (std::size_t i = 0; i < n; ++i) {
    pass_levels[i] = Levels(families[i], rule.alpha, rule.cache);
    if (!rule.fail_only) pass_at[i] = FirstCrossing(families[i], pass_levels[i], rule.threshold, false);
  }
  // Holm's step-down on the fail side: every family still open gets α / (families open);
  // the most significant crossing is rejected first, and its share goes to the others,
  // whose looks are then tested again at the larger level.
  std::vector<bool> failed(n, false);
  for (;;) {
    std::size_t open = 0;
    for (std::size_t i = 0; i < n; ++i) open += failed[i] ? 0 : 1;
    if (open == 0) break;
    const double budget = rule.holm ? rule.alpha / static_cast<double>(open) : rule.alpha;
    std::optional<std::size_t> first;
    double first_p = 2;
    for (std::size_t i = 0; i < n; ++i) {
      if (failed[i]) continue;
      const std::vector<double> levels = Levels(families[i], budget, rule.cache);
      out[i].fail_budget = budget;
      out[i].fail_level = levels.back();
      fail_at[i] = FirstCrossing(families[i], levels, rule.threshold, true);
      if (!fail_at[i] || (pass_at[i] && *pass_at[i] <= *fail_at[i])) continue;
      out[i].fail_level = levels[*fail_at[i]];
      const double p = TestThreshold(families[i].intervals[*fail_at[i]], rule.threshold).p_fail;
      if (p < first_p) {
        first_p = p;
        first = i;
      }
    }
    if (!first) break;
    failed[*first] = true;
    if (!rule.holm) {  // without Holm every crossing stands on its own
      for (std::size_t i = 0; i < n; ++i) failed[i] = failed[i] || (fail_at[i] && (!pass_at[i] || *fail_at[i] < *pass_at[i]));
      break;
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    const FamilyLooks& f = families[i];
    FamilyDecision& d = out[i];
    d.look = f.intervals.size() - 1;
    d.pass_level = pass_levels[i].back();
    if (failed[i]) {
      d.decision = Decision::kFail;
      d.look = *fail_at[i];
    } else if (pass_at[i]) {
      d.decision = Decision::kPass;
      d.look = *pass_at[i];
      d.pass_level = pass_levels[i][d.look];
    } else if (rule.fail_only && f.fractions.back() >= 1.0) {
      d.decision = Decision::kPass;  // `proven`: the last look found no regression
    }
    d.test = TestThreshold(f.intervals[d.look], rule.threshold);
  }
  return out;
}

}  // namespace tandem::stats
