#include "stats/log_ratio.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "stats/stats_error.hpp"

namespace tandem::stats {
namespace {

TEST(WelchLogRatio, RatioIsTheRatioOfGeometricMeans) {
  const std::vector<double> a = {100.0, 121.0};  // geometric mean 110
  const std::vector<double> b = {99.0, 176.0};   // geometric mean 132
  const RatioInterval r = WelchLogRatio(a, b);
  EXPECT_NEAR(r.ratio, 1.2, 1e-14);
  EXPECT_LT(r.lo, r.ratio);
  EXPECT_GT(r.hi, r.ratio);
  EXPECT_NEAR(std::log(r.ratio) - std::log(r.lo), std::log(r.hi) - std::log(r.ratio), 1e-12)
      << "the interval is symmetric on the log scale";
}

TEST(WelchLogRatio, SwappingArmsInvertsTheResult) {
  const std::vector<double> a = {101.0, 99.5, 102.3, 100.1, 98.7};
  const std::vector<double> b = {104.2, 105.9, 103.1, 106.0};
  const RatioInterval ab = WelchLogRatio(a, b);
  const RatioInterval ba = WelchLogRatio(b, a);
  EXPECT_NEAR(ab.ratio * ba.ratio, 1.0, 1e-14);
  EXPECT_NEAR(ab.lo * ba.hi, 1.0, 1e-14);
  EXPECT_NEAR(ab.t, -ba.t, 1e-12);
  EXPECT_NEAR(ab.p, ba.p, 1e-14);
  EXPECT_NEAR(ab.df, ba.df, 1e-12);
}

TEST(WelchLogRatio, ScaleInvariant) {
  // Multiplying every score by the same factor (another unit) changes nothing.
  const std::vector<double> a = {3.1, 2.9, 3.3};
  const std::vector<double> b = {3.5, 3.4, 3.8};
  const RatioInterval base = WelchLogRatio(a, b);
  for (double k : {1e-200, 1e-3, 1e6, 1e200}) {
    std::vector<double> ka, kb;
    for (double x : a) ka.push_back(k * x);
    for (double x : b) kb.push_back(k * x);
    const RatioInterval scaled = WelchLogRatio(ka, kb);
    EXPECT_NEAR(scaled.ratio, base.ratio, 1e-12 * base.ratio) << k;
    EXPECT_NEAR(scaled.lo, base.lo, 1e-9 * base.lo) << k;
    EXPECT_NEAR(scaled.hi, base.hi, 1e-9 * base.hi) << k;
  }
}

TEST(WelchLogRatio, OneConstantArmTakesItsDegreesOfFreedomFromTheOther) {
  const std::vector<double> a(5, 50.0);
  const std::vector<double> b = {52.0, 53.1, 51.7, 52.6};
  const RatioInterval r = WelchLogRatio(a, b);
  EXPECT_NEAR(r.df, 3.0, 1e-12);
  EXPECT_TRUE(r.excludes_one());
}

TEST(WelchLogRatio, WiderLevelGivesWiderInterval) {
  const std::vector<double> a = {100, 103, 98, 101};
  const std::vector<double> b = {102, 105, 101, 104};
  const RatioInterval r90 = WelchLogRatio(a, b, 0.90);
  const RatioInterval r99 = WelchLogRatio(a, b, 0.99);
  EXPECT_LT(r99.lo, r90.lo);
  EXPECT_GT(r99.hi, r90.hi);
  EXPECT_DOUBLE_EQ(r90.p, r99.p);
}

TEST(WelchLogRatio, ExcludesOneOnlyWhenTheIntervalDoes) {
  RatioInterval r;
  r.lo = 0.98, r.hi = 1.03;
  EXPECT_FALSE(r.excludes_one());
  r.lo = 1.001, r.hi = 1.03;
  EXPECT_TRUE(r.excludes_one());
  r.lo = 0.9, r.hi = 0.999;
  EXPECT_TRUE(r.excludes_one());
  r.lo = 1.0, r.hi = 1.1;  // touching 1 does not exclude it
  EXPECT_FALSE(r.excludes_one());
}

TEST(WelchLogRatio, RejectsBadInputWithAMessage) {
  const std::vector<double> ok = {1.0, 2.0};
  const std::vector<double> one = {1.0};
  const std::vector<double> zero = {1.0, 0.0};
  const std::vector<double> negative = {-1.0, 2.0};
  const std::vector<double> nan = {1.0, std::numeric_limits<double>::quiet_NaN()};
  const std::vector<double> inf = {1.0, std::numeric_limits<double>::infinity()};
  EXPECT_THROW(WelchLogRatio(one, ok), StatsError);
  EXPECT_THROW(WelchLogRatio(ok, one), StatsError);
  EXPECT_THROW(WelchLogRatio(ok, zero), StatsError);
  EXPECT_THROW(WelchLogRatio(negative, ok), StatsError);
  EXPECT_THROW(WelchLogRatio(nan, ok), StatsError);
  EXPECT_THROW(WelchLogRatio(ok, inf), StatsError);
  EXPECT_THROW(WelchLogRatio(ok, ok, 0.0), StatsError);
  EXPECT_THROW(WelchLogRatio(ok, ok, 1.0), StatsError);
  EXPECT_THROW(WelchLogRatio(ok, ok, std::numeric_limits<double>::quiet_NaN()), StatsError);
  try {
    WelchLogRatio(ok, one);
    FAIL();
  } catch (const StatsError& e) {
    EXPECT_STREQ(e.what(), "candidate: needs at least 2 values, got 1");
  }
}

TEST(WelchLogRatio, BothArmsConstantIsAnError) {
  const std::vector<double> a(4, 10.0);
  const std::vector<double> b(4, 11.0);
  EXPECT_THROW(WelchLogRatio(a, b), StatsError);
  // Spread in the last bit only is still no measured noise.
  const std::vector<double> c = {11.0, std::nextafter(11.0, 12.0), 11.0};
  EXPECT_THROW(WelchLogRatio(a, c), StatsError);
}

TEST(PairedLogRatio, RemovesDriftSharedByAPair) {
  // Each pair drifts together (host warming up); the candidate is 5 % faster in every pair,
  // with a little independent noise. Pairing sees a tight interval; Welch does not.
  const std::vector<double> drift = {100, 110, 95, 120, 105, 90};
  const std::vector<double> noise = {1.001, 0.998, 1.002, 0.999, 1.0, 1.001};
  std::vector<double> a, b;
  for (std::size_t i = 0; i < drift.size(); ++i) {
    a.push_back(drift[i]);
    b.push_back(drift[i] * 1.05 * noise[i]);
  }
  const RatioInterval paired = PairedLogRatio(PairInRunOrder(a, b));
  const RatioInterval welch = WelchLogRatio(a, b);
  EXPECT_EQ(paired.df, 5.0);
  EXPECT_TRUE(paired.excludes_one());
  EXPECT_FALSE(welch.excludes_one());
  EXPECT_NEAR(paired.ratio, welch.ratio, 1e-12);  // same point estimate with balanced arms
}

TEST(PairedLogRatio, RejectsBadInput) {
  const std::vector<double> three = {1.0, 2.0, 3.0};
  const std::vector<double> two = {1.0, 2.0};
  EXPECT_THROW(PairInRunOrder(three, two), StatsError);
  const std::vector<SessionPair> one = {{1.0, 2.0}};
  EXPECT_THROW(PairedLogRatio(one), StatsError);
  const std::vector<SessionPair> same_ratio = {{1.0, 2.0}, {3.0, 6.0}};
  EXPECT_THROW(PairedLogRatio(same_ratio), StatsError);
  const std::vector<SessionPair> negative = {{1.0, 2.0}, {-3.0, 6.0}};
  EXPECT_THROW(PairedLogRatio(negative), StatsError);
}

}  // namespace
}  // namespace tandem::stats
