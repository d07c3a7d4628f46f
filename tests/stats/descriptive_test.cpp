#include "stats/descriptive.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "stats/stats_error.hpp"

namespace tandem::stats {
namespace {

TEST(Descriptive, SmallHandCheckedSample) {
  const std::vector<double> v = {4.0, 1.0, 3.0, 2.0};
  EXPECT_DOUBLE_EQ(Mean(v), 2.5);
  EXPECT_DOUBLE_EQ(SampleVariance(v), 5.0 / 3.0);  // Σ(x − 2.5)² = 5, over n − 1 = 3
  EXPECT_DOUBLE_EQ(Median(v), 2.5);
  EXPECT_DOUBLE_EQ(Min(v), 1.0);
  EXPECT_DOUBLE_EQ(Max(v), 4.0);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(Percentile(v, 100.0), 4.0);
  EXPECT_DOUBLE_EQ(Percentile(v, 25.0), 1.75);  // h = 3 · 0.25 = 0.75 → 1 + 0.75 · (2 − 1)
  EXPECT_NEAR(GeometricMean(v), std::pow(24.0, 0.25), 1e-15);
}

TEST(Descriptive, MedianOfOddCountIsTheMiddleValue) {
  // The weighted C1 median of three battery repeats (DESIGN.md).
  const std::vector<double> repeats = {107.81, 104.52, 104.69};
  EXPECT_DOUBLE_EQ(Median(repeats), 104.69);
}

TEST(Descriptive, VarianceIsExactForLargeOffsets) {
  // The textbook case that breaks the one-pass Σx² − (Σx)²/n formula.
  for (double offset : {0.0, 1e8, 1e9, 1e12}) {
    const std::vector<double> v = {offset + 4, offset + 7, offset + 13, offset + 16};
    EXPECT_DOUBLE_EQ(SampleVariance(v), 30.0) << "offset " << offset;
    EXPECT_DOUBLE_EQ(Mean(v), offset + 10.0);
  }
}

TEST(Descriptive, ConstantSampleHasZeroVariance) {
  const std::vector<double> v(7, std::log(50.0));
  EXPECT_EQ(SampleVariance(v), 0.0);
}

TEST(Descriptive, GeometricMeanNeitherOverflowsNorUnderflows) {
  const std::vector<double> huge = {1e300, 1e300, 4e300};
  EXPECT_NEAR(GeometricMean(huge) / (std::cbrt(4.0) * 1e300), 1.0, 1e-13);
  const std::vector<double> tiny = {1e-300, 1e-300, 4e-300};
  EXPECT_NEAR(GeometricMean(tiny) / (std::cbrt(4.0) * 1e-300), 1.0, 1e-13);
}

TEST(Descriptive, RejectsBadInput) {
  const std::vector<double> empty;
  const std::vector<double> one = {1.0};
  const std::vector<double> with_nan = {1.0, std::numeric_limits<double>::quiet_NaN()};
  const std::vector<double> with_inf = {1.0, std::numeric_limits<double>::infinity()};
  const std::vector<double> with_zero = {1.0, 0.0};
  EXPECT_THROW(Mean(empty), StatsError);
  EXPECT_THROW(Median(empty), StatsError);
  EXPECT_THROW(SampleVariance(one), StatsError);
  EXPECT_THROW(Mean(with_nan), StatsError);
  EXPECT_THROW(Max(with_inf), StatsError);
  EXPECT_THROW(GeometricMean(with_zero), StatsError);
  EXPECT_THROW(Percentile(one, -1.0), StatsError);
  EXPECT_THROW(Percentile(one, 100.5), StatsError);
  EXPECT_THROW(Percentile(one, std::numeric_limits<double>::quiet_NaN()), StatsError);
}

TEST(Descriptive, ErrorMessagesNameTheInputAndTheValue) {
  const std::vector<double> v = {3.0, -2.0};
  try {
    GeometricMean(v);
    FAIL() << "expected StatsError";
  } catch (const StatsError& e) {
    EXPECT_STREQ(e.what(), "geometric mean: value -2 (index 1) is not positive; scores must be > 0");
  }
}

}  // namespace
}  // namespace tandem::stats
