#pragma once

#include <span>

// Descriptive statistics over a sample. Every function throws StatsError on an
// empty sample or a non-finite value; `SampleVariance` needs two values and
// `GeometricMean` positive ones.
namespace tandem::stats {

double Mean(std::span<const double> values);

// Unbiased (n − 1) sample variance, by the corrected two-pass algorithm so
// that large values with small spread (e.g. 1e9 + {4, 7, 13, 16}) stay exact.
double SampleVariance(std::span<const double> values);
double SampleStdDev(std::span<const double> values);

double Median(std::span<const double> values);

// `percent` in [0, 100]; linear interpolation between order statistics
// (numpy's default, Hyndman & Fan type 7).
double Percentile(std::span<const double> values, double percent);

// exp(mean(ln x)), computed in log space so it neither overflows nor underflows.
double GeometricMean(std::span<const double> values);

double Min(std::span<const double> values);
double Max(std::span<const double> values);

}  // namespace tandem::stats
