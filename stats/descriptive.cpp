#include "stats/descriptive.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "stats/stats_error.hpp"

namespace tandem::stats {

double Mean(std::span<const double> values) {
  RequireFinite(values, 1, "mean");
  // Mean of deviations from the first value: keeps precision when all values are
  // large and close together, and cannot overflow for finite inputs of one sign.
  const double pivot = values[0];
  double sum = 0.0;
  for (double v : values) sum += v - pivot;
  return pivot + sum / static_cast<double>(values.size());
}

double SampleVariance(std::span<const double> values) {
  RequireFinite(values, 2, "sample variance");
  const double mean = Mean(values);
  // Corrected two-pass (Chan, Golub & LeVeque): the second term cancels the
  // rounding error left in `mean`.
  double sum_sq = 0.0;
  double sum = 0.0;
  for (double v : values) {
    const double d = v - mean;
    sum_sq += d * d;
    sum += d;
  }
  const double n = static_cast<double>(values.size());
  return std::max(0.0, (sum_sq - sum * sum / n) / (n - 1.0));
}

double SampleStdDev(std::span<const double> values) { return std::sqrt(SampleVariance(values)); }

double Median(std::span<const double> values) {
  RequireFinite(values, 1, "median");
  return Percentile(values, 50.0);
}

double Percentile(std::span<const double> values, double percent) {
  RequireFinite(values, 1, "percentile");
  if (!(percent >= 0.0 && percent <= 100.0)) {
    throw StatsError(fmt::format("percentile: {} is outside [0, 100]", percent));
  }
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  const double h = (static_cast<double>(sorted.size()) - 1.0) * percent / 100.0;
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = h - static_cast<double>(lo);
  // Written as a + f·(b − a) like numpy; exact at both ends of the interval.
  return sorted[lo] + frac * (sorted[hi] - sorted[lo]);
}

double GeometricMean(std::span<const double> values) {
  RequirePositive(values, 1, "geometric mean");
  std::vector<double> logs(values.size());
  std::transform(values.begin(), values.end(), logs.begin(), [](double v) { return std::log(v); });
  return std::exp(Mean(logs));
}

double Min(std::span<const double> values) {
  RequireFinite(values, 1, "min");
  return *std::min_element(values.begin(), values.end());
}

double Max(std::span<const double> values) {
  RequireFinite(values, 1, "max");
  return *std::max_element(values.begin(), values.end());
}

}  // namespace tandem::stats
