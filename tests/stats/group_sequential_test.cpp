// Group-sequential boundaries against published values and an independent scipy
// computation (tests/stats/golden/make_sequential_golden.py), and the gate's decision
// rule over looks and families.
#include "stats/group_sequential.hpp"

#include <cmath>
#include <fstream>
#include <numeric>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "stats/sequential_gate.hpp"
#include "stats/stats_error.hpp"

namespace tandem::stats {
namespace {

std::vector<double> Equal(int k) {
  std::vector<double> f;
  for (int i = 1; i <= k; ++i) f.push_back(static_cast<double>(i) / k);
  return f;
}

// Lan–DeMets O'Brien–Fleming-type spending, one-sided α = 0.025 (two-sided symmetric
// 0.05), equally spaced looks: the values gsDesign (sfLDOF, test.type 2) and rpact
// print, also tabulated by Jennison & Turnbull (2000), ch. 7.
TEST(ObrienFlemingBoundaries, MatchPublishedValues) {
  const std::vector<std::vector<double>> published = {
      {2.9626, 1.9686},
      {3.7103, 2.5114, 1.9930},
      {4.3326, 2.9631, 2.3590, 2.0141},
      {4.8769, 3.3569, 2.6803, 2.2898, 2.0310},
  };
  for (const std::vector<double>& want : published) {
    const std::vector<double> c = ObrienFlemingBoundaries(Equal(static_cast<int>(want.size())), 0.025);
    ASSERT_EQ(c.size(), want.size());
    for (std::size_t k = 0; k < c.size(); ++k) EXPECT_NEAR(c[k], want[k], 1e-3) << "K=" << want.size() << " look " << k + 1;
  }
}

TEST(ObrienFlemingBoundaries, MatchAnIndependentComputation) {
  std::ifstream in(TANDEM_SEQUENTIAL_GOLDEN);
  ASSERT_TRUE(in) << TANDEM_SEQUENTIAL_GOLDEN;
  const nlohmann::json golden = nlohmann::json::parse(in);
  ASSERT_GE(golden["designs"].size(), 6u);
  for (const nlohmann::json& d : golden["designs"]) {
    const std::vector<double> fractions = d["fractions"].get<std::vector<double>>();
    const std::vector<double> want = d["boundaries"].get<std::vector<double>>();
    const std::vector<double> c = ObrienFlemingBoundaries(fractions, golden["alpha_one_sided"].get<double>());
    for (std::size_t k = 0; k < c.size(); ++k) EXPECT_NEAR(c[k], want[k], 2e-4) << d.dump() << " look " << k + 1;
  }
}

TEST(ObrienFlemingBoundaries, OneLookIsTheFixedDesign) {
  const std::vector<double> one = {1.0};
  EXPECT_NEAR(ObrienFlemingBoundaries(one, 0.025)[0], 1.959964, 1e-5);
}

TEST(ObrienFlemingBoundaries, SpendExactlyAlphaUnderTheNullAndGainPowerWithDrift) {
  const std::vector<double> f = {0.2, 0.45, 0.7, 1.0};
  const std::vector<double> c = ObrienFlemingBoundaries(f, 0.025);
  const std::vector<double> p0 = ExitProbabilities(f, c, 0.0);
  EXPECT_NEAR(std::accumulate(p0.begin(), p0.end(), 0.0), 0.05, 1e-6);
  for (std::size_t k = 0; k < f.size(); ++k) {
    const double spent = 2 * (ObrienFlemingSpent(0.025, f[k]) - (k ? ObrienFlemingSpent(0.025, f[k - 1]) : 0.0));
    EXPECT_NEAR(p0[k], spent, 1e-8) << "look " << k + 1;
  }
  // Drift 2.8 (the fixed design's 80% power point, z 1.96 + 0.84) : the sequential design
  // loses only a little power.
  const std::vector<double> p1 = ExitProbabilities(f, c, 2.8);
  const double power = std::accumulate(p1.begin(), p1.end(), 0.0);
  EXPECT_GT(power, 0.77);
  EXPECT_LT(power, 0.80);
}

TEST(ObrienFlemingBoundaries, BadLooksAreRefused) {
  EXPECT_THROW(ObrienFlemingBoundaries(std::vector<double>{}, 0.025), StatsError);
  EXPECT_THROW(ObrienFlemingBoundaries(std::vector<double>{0.5, 0.5}, 0.025), StatsError);
  EXPECT_THROW(ObrienFlemingBoundaries(std::vector<double>{0.5, 1.2}, 0.025), StatsError);
  EXPECT_THROW(ObrienFlemingBoundaries(std::vector<double>{1.0}, 0.7), StatsError);
}

RatioInterval Interval(std::vector<double> a, std::vector<double> b) { return WelchLogRatio(a, b); }

TEST(DecideFamilies, OneLookIsTheNinetyFivePercentIntervalAgainstTheThreshold) {
  const RatioInterval above = Interval({100, 101, 99, 100}, {100, 101.5, 99.5, 100.2});  // ~1.00, tight
  const RatioInterval below = Interval({100, 101, 99, 100}, {90, 91, 89.5, 90.4});       // ~0.90
  const RatioInterval across = Interval({100, 110, 90, 105}, {98, 108, 88, 100});        // straddles 0.97
  const std::vector<FamilyLooks> f = {{{1.0}, {above}}, {{1.0}, {below}}, {{1.0}, {across}}};
  const std::vector<FamilyDecision> d = DecideFamilies(f, {.threshold = 0.97, .holm = false});
  EXPECT_EQ(d[0].decision, Decision::kPass);
  EXPECT_GT(above.lo, 0.97);
  EXPECT_EQ(d[1].decision, Decision::kFail);
  EXPECT_EQ(d[2].decision, Decision::kUndecided);
  EXPECT_NEAR(d[0].pass_level, 0.025, 1e-9);
  // `proven` passes what is not shown to regress, at its last look.
  EXPECT_EQ(DecideFamilies(f, {.threshold = 0.97, .fail_only = true, .holm = false})[2].decision, Decision::kPass);
}

TEST(DecideFamilies, HolmSharesTheFailSideAlphaAndFreesItAsFamiliesFail) {
  // Two clear regressions and one borderline one: alone, the borderline one fails at
  // 0.025; under Holm it is tested at 0.025 / 1 only after the other two failed.
  const RatioInterval clear = Interval({100, 101, 99, 100}, {80, 81, 79.5, 80.4});
  std::vector<double> base = {100, 102, 98, 101, 99, 100}, cand;
  for (double v : base) cand.push_back(v * 0.94);
  const RatioInterval borderline = Interval(base, cand);
  const std::vector<FamilyLooks> f = {{{1.0}, {clear}}, {{1.0}, {clear}}, {{1.0}, {borderline}}};
  const std::vector<FamilyDecision> d = DecideFamilies(f, {.threshold = 0.97});
  for (const FamilyDecision& x : d) EXPECT_EQ(x.decision, Decision::kFail);
  EXPECT_NEAR(d[2].fail_budget, 0.025, 1e-12);  // the last one standing got the whole alpha
  // A family on its own that only clears 0.025 / 3 fails alone but not beside two
  // undecided families.
  const RatioInterval open = Interval({100, 110, 90, 105}, {98, 108, 88, 100});
  const double p = TestThreshold(borderline, 0.97).p_fail;
  ASSERT_LT(p, 0.025);
  if (p > 0.025 / 3) {
    const std::vector<FamilyLooks> g = {{{1.0}, {open}}, {{1.0}, {open}}, {{1.0}, {borderline}}};
    const std::vector<FamilyDecision> e = DecideFamilies(g, {.threshold = 0.97});
    EXPECT_EQ(e[2].decision, Decision::kUndecided);
    EXPECT_NEAR(e[2].fail_budget, 0.025 / 3, 1e-12);
  }
}

TEST(DecideFamilies, AnEarlyLookNeedsAFarStrongerResult) {
  // Equal arms, tight: at information 0.25 the pass level is ~1e-5, not 0.025.
  const RatioInterval tight = Interval({100, 100.5}, {100.2, 100.6});
  const std::vector<FamilyLooks> f = {{{0.25}, {tight}}};
  const std::vector<FamilyDecision> d = DecideFamilies(f, {.threshold = 0.97});
  EXPECT_LT(d[0].pass_level, 1e-4);
}

}  // namespace
}  // namespace tandem::stats
