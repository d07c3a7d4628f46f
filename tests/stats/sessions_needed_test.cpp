#include "stats/sessions_needed.hpp"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "stats/stats_error.hpp"

namespace tandem::stats {
namespace {

TEST(SessionsNeeded, MatchesTheNormalApproximationFormula) {
  // z_0.975 = 1.959963984540054, z_0.8 = 0.8416212335729143.
  const double z = 1.959963984540054 + 0.8416212335729143;
  const double sd = 0.02, effect = 0.03;
  const double n = 2 * z * z * sd * sd / (std::log1p(effect) * std::log1p(effect));
  EXPECT_EQ(SessionsNeeded(sd, effect), static_cast<std::size_t>(std::ceil(n)));
  EXPECT_EQ(SessionsNeeded(sd, effect), 8u);  // n = 7.19, rounded up
}

TEST(SessionsNeeded, GrowsWithNoiseAndShrinksWithEffect) {
  EXPECT_LT(SessionsNeeded(0.01, 0.05), SessionsNeeded(0.05, 0.05));
  EXPECT_GT(SessionsNeeded(0.02, 0.01), SessionsNeeded(0.02, 0.05));
  EXPECT_LT(SessionsNeeded(0.02, 0.03, 0.90), SessionsNeeded(0.02, 0.03, 0.99));
  EXPECT_LT(SessionsNeeded(0.02, 0.03, 0.95, 0.5), SessionsNeeded(0.02, 0.03, 0.95, 0.9));
  // A slowdown of the same log size needs the same count.
  EXPECT_EQ(SessionsNeeded(0.02, 0.05), SessionsNeeded(0.02, 1.0 / 1.05 - 1.0));
}

TEST(SessionsNeeded, NeverFewerThanTwo) { EXPECT_EQ(SessionsNeeded(0.0, 0.1), 2u); }

TEST(SessionsNeeded, RejectsBadInput) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(SessionsNeeded(-0.1, 0.03), StatsError);
  EXPECT_THROW(SessionsNeeded(nan, 0.03), StatsError);
  EXPECT_THROW(SessionsNeeded(0.02, 0.0), StatsError);
  EXPECT_THROW(SessionsNeeded(0.02, -1.0), StatsError);
  EXPECT_THROW(SessionsNeeded(0.02, 0.03, 1.0), StatsError);
  EXPECT_THROW(SessionsNeeded(0.02, 0.03, 0.95, 0.0), StatsError);
  EXPECT_THROW(SessionsNeeded(1e6, 1e-12), StatsError);  // would overflow a count
}

}  // namespace
}  // namespace tandem::stats
