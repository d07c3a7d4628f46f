// The gate's error rates, measured: thousands of simulated campaigns drawn from a noise
// model (log-normal session scores, drift shared by neighbouring sessions, ABBA order)
// through the very decision code `tandem gate` uses (stats::DecideFamilies), for the
// fixed-size design, the sequential one and a fixed campaign extended once. The figures
// printed here are the ones docs/statistics.md quotes.
#include <cmath>
#include <cstdio>
#include <random>

#include <gtest/gtest.h>

#include "stats/log_ratio.hpp"
#include "stats/sequential_gate.hpp"
#include "stats/sessions_needed.hpp"

namespace tandem::stats {
namespace {

constexpr double kThreshold = 0.97;  // max_regression 3%
constexpr int kCampaigns = 4000;
constexpr double kTau = 0.02;     // sd of the drift shared by neighbouring sessions
constexpr double kRho = 0.7;      // its correlation from one session to the next
constexpr double kSigma = 0.049;  // each session's own noise; total sd ≈ 0.053

// Session scores of one campaign of `sessions` sessions ABBA..., the candidate's true
// ratio `ratio`; A's scores then B's, each in run order with their positions.
struct Drawn {
  std::vector<double> a, b;
  std::vector<int> a_at, b_at;
};

Drawn Draw(std::mt19937_64& rng, int sessions, double ratio) {
  std::normal_distribution<double> z;
  Drawn d;
  double drift = kTau * z(rng);
  for (int i = 0; i < sessions; ++i) {
    if (i > 0) drift = kRho * drift + std::sqrt(1 - kRho * kRho) * kTau * z(rng);
    const bool candidate = (i % 4 == 1 || i % 4 == 2);
    const double score = std::exp(std::log(100.0) + (candidate ? std::log(ratio) : 0.0) + drift + kSigma * z(rng));
    (candidate ? d.b : d.a).push_back(score);
    (candidate ? d.b_at : d.a_at).push_back(i);
  }
  return d;
}

// The looks at `looks` sessions (of `planned`), as store::DecideGate builds them.
FamilyLooks Looks(const Drawn& d, const std::vector<int>& looks, int planned) {
  FamilyLooks f;
  for (int n : looks) {
    std::vector<double> a, b;
    for (std::size_t i = 0; i < d.a.size(); ++i)
      if (d.a_at[i] < n) a.push_back(d.a[i]);
    for (std::size_t i = 0; i < d.b.size(); ++i)
      if (d.b_at[i] < n) b.push_back(d.b[i]);
    const double info = static_cast<double>(a.size() * b.size()) / static_cast<double>(a.size() + b.size());
    const double full = planned / 4.0;  // (planned/2)² / planned
    f.fractions.push_back(n == planned ? 1.0 : info / full);
    f.intervals.push_back(WelchLogRatio(a, b));
  }
  return f;
}

struct Rates {
  double pass = 0, fail = 0, sessions = 0;  // fractions of campaigns; mean sessions run
  int changed = 0;                          // campaigns whose verdict differs from the plain sequential design's
};

constexpr double kPrecision = 0.08;  // `sessions: precision` of the precise sequential design

enum class Design { kFixed, kSequential, kSequentialPrecise, kFixedThenExtended };

Rates Simulate(Design design, double ratio, std::uint64_t seed, BoundaryCache& cache) {
  std::mt19937_64 rng(seed);
  Rates r;
  for (int c = 0; c < kCampaigns; ++c) {
    const Drawn d = Draw(rng, 16, ratio);
    Decision decision = Decision::kUndecided;
    int ran = 16;
    const DecisionRule rule{.threshold = kThreshold, .cache = &cache};
    switch (design) {
      case Design::kFixed:
        decision = DecideFamilies(std::vector<FamilyLooks>{Looks(d, {16}, 16)}, rule)[0].decision;
        break;
      case Design::kSequential: {
        const FamilyDecision x = DecideFamilies(std::vector<FamilyLooks>{Looks(d, {4, 8, 12, 16}, 16)}, rule)[0];
        decision = x.decision;
        ran = 4 * static_cast<int>(x.look + 1);
        break;
      }
      case Design::kSequentialPrecise: {
        // Stops at the first look that is decided and whose interval lies within ±8% of
        // its ratio (else at 16); the gate then decides on the looks taken.
        const FamilyLooks all = Looks(d, {4, 8, 12, 16}, 16);
        const FamilyDecision plain = DecideFamilies(std::vector<FamilyLooks>{all}, rule)[0];
        std::size_t stop = all.intervals.size() - 1;
        if (plain.decision != Decision::kUndecided) {
          for (std::size_t k = plain.look; k < all.intervals.size(); ++k) {
            if (all.intervals[k].hi / all.intervals[k].ratio - 1 <= kPrecision) {
              stop = k;
              break;
            }
          }
        }
        std::vector<int> taken;
        for (std::size_t k = 0; k <= stop; ++k) taken.push_back(4 * static_cast<int>(k + 1));
        const FamilyDecision x = DecideFamilies(std::vector<FamilyLooks>{Looks(d, taken, 16)}, rule)[0];
        decision = x.decision;
        // Waiting for precision never changes a verdict: it is the first crossing's.
        r.changed += decision != plain.decision ? 1 : 0;
        ran = static_cast<int>(taken.back());
        break;
      }
      case Design::kFixedThenExtended:
        // 8 sessions; when inconclusive, `--extend 8`: looks at 8 and 16 of a 16-session design.
        decision = DecideFamilies(std::vector<FamilyLooks>{Looks(d, {8}, 8)}, rule)[0].decision;
        ran = 8;
        if (decision == Decision::kUndecided) {
          decision = DecideFamilies(std::vector<FamilyLooks>{Looks(d, {8, 16}, 16)}, rule)[0].decision;
          ran = 16;
        }
        break;
    }
    r.pass += decision == Decision::kPass ? 1 : 0;
    r.fail += decision == Decision::kFail ? 1 : 0;
    r.sessions += ran;
  }
  r.pass /= kCampaigns;
  r.fail /= kCampaigns;
  r.sessions /= kCampaigns;
  return r;
}

// Monte Carlo error of a rate p over kCampaigns draws, three standard errors.
double Slack(double p) { return 3 * std::sqrt(p * (1 - p) / kCampaigns); }

TEST(GateCalibration, FalseAlarmsStayWithinAlphaAndPowerMatchesTheClaim) {
  // The claim: 8 sessions per arm detect ratio 0.90 against T = 0.97 with 80% power at
  // this spread (stats::SessionsNeeded, the formula the report and the gate quote).
  const double sd = std::sqrt(kSigma * kSigma + kTau * kTau);
  ASSERT_EQ(SessionsNeeded(sd, 0.90 / kThreshold - 1.0), 8u);
  BoundaryCache cache;
  std::printf("%-22s %-6s %8s %8s %10s\n", "design", "ratio", "pass", "fail", "sessions");
  for (Design design : {Design::kFixed, Design::kSequential, Design::kSequentialPrecise, Design::kFixedThenExtended}) {
    const char* name = design == Design::kFixed               ? "fixed 16"
                       : design == Design::kSequential        ? "sequential <=16 (4x4)"
                       : design == Design::kSequentialPrecise ? "sequential, +-8%"
                                                              : "fixed 8, extended to 16";
    const Rates aa = Simulate(design, 1.0, 1, cache);
    const Rates at = Simulate(design, kThreshold, 2, cache);
    const Rates ab = Simulate(design, 0.90, 3, cache);
    for (const auto& [ratio, r] : {std::pair{"1.00", aa}, std::pair{"0.97", at}, std::pair{"0.90", ab}}) {
      std::printf("%-22s %-6s %8.4f %8.4f %10.2f\n", name, ratio, r.pass, r.fail, r.sessions);
    }
    EXPECT_EQ(aa.changed + at.changed + ab.changed, 0) << name;
    // A/A: a false "fail" is the false alarm a CI gate must not raise.
    EXPECT_LE(aa.fail, 0.05) << name;
    // At the threshold itself both one-sided tests are at their limit: each ≤ 2.5%
    // (the extended design may exceed it: that is what the figure documents).
    const double limit = design == Design::kFixedThenExtended ? 0.05 : 0.025;
    EXPECT_LE(at.pass, limit + Slack(limit)) << name;
    EXPECT_LE(at.fail, limit + Slack(limit)) << name;
    // A 10% regression is caught with about the claimed 80% power.
    EXPECT_GE(ab.fail, design == Design::kFixed ? 0.75 : 0.70) << name;
    EXPECT_LE(ab.pass, 0.01) << name;
  }
}

}  // namespace
}  // namespace tandem::stats
