#include "runtime/sampling/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::rt {
namespace {

std::vector<float> LogProbs(const std::vector<double>& p) {
  std::vector<float> l;
  for (double x : p) l.push_back(static_cast<float>(std::log(x)));
  return l;
}

std::map<TokenId, double> Frequencies(const std::vector<float>& logits, const SamplingParams& params, int draws) {
  std::map<TokenId, double> f;
  for (int pos = 0; pos < draws; ++pos) f[Sample(logits, params, pos)] += 1.0 / draws;
  return f;
}

TEST(Sampler, GreedyTakesTheLargestLogitAndTheLowestIdOnTies) {
  EXPECT_EQ(ArgMax(std::vector<float>{0.1f, 3.0f, 2.0f, 3.0f}), 1);
  const SamplingParams greedy;
  EXPECT_EQ(Sample(std::vector<float>{0.1f, 3.0f, 2.0f, 3.0f}, greedy, 17), 1);
}

// ArgMax takes the largest value in lanes, then its first index: the index
// std::max_element gives, for every length around the lanes' 16, with ties, signed
// zeros, infinities, and NaNs (first or anywhere else).
TEST(Sampler, ArgMaxIsStdMaxElementForEveryLengthAndValue) {
  std::mt19937 rng(4);
  std::uniform_int_distribution<int> level(-3, 3);  // few values: many ties
  const float special[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN()};
  for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{15}, std::size_t{16}, std::size_t{17}, std::size_t{33}, std::size_t{70},
                        std::size_t{16276}}) {
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<float> v(n);
      for (float& x : v) x = static_cast<float>(level(rng));
      if (trial % 2 == 1) v[static_cast<std::size_t>(rng()) % n] = special[trial / 2 % 5];
      if (trial % 10 == 9) std::fill(v.begin(), v.end(), special[trial / 10 % 5]);
      const auto expected = static_cast<TokenId>(std::max_element(v.begin(), v.end()) - v.begin());
      ASSERT_EQ(ArgMax(v), expected) << "n " << n << ", trial " << trial;
    }
  }
  EXPECT_EQ(ArgMax(std::vector<float>{}), 0);
}

// Sample as it was before it stopped sorting the whole vocabulary without top-k: every
// candidate sorted by logit, then top-p, min-p and the race in that order.
TokenId SampleSorted(const std::vector<float>& logits, const SamplingParams& params, std::int64_t position) {
  std::vector<TokenId> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](TokenId a, TokenId b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
  std::vector<double> prob(order.size());
  const double inv_t = 1.0 / params.temperature, max = logits[static_cast<std::size_t>(order[0])];
  double total = 0.0;
  for (std::size_t i = 0; i < order.size(); ++i) total += prob[i] = std::exp((logits[static_cast<std::size_t>(order[i])] - max) * inv_t);
  for (double& p : prob) p /= total;
  std::size_t keep = order.size();
  if (params.top_p < 1.0f) {
    double mass = 0.0;
    std::size_t n = 0;
    while (n < keep && mass < params.top_p) mass += prob[n++];
    keep = std::max<std::size_t>(n, 1);
  }
  if (params.min_p > 0.0f) {
    const double floor = params.min_p * prob[0];
    std::size_t n = 1;
    while (n < keep && prob[n] >= floor) ++n;
    keep = n;
  }
  std::size_t best = 0;
  double best_key = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < keep; ++i) {
    const double key = -std::log(TokenDraw(params.seed, position, order[i])) / prob[i];
    if (key < best_key) {
      best_key = key;
      best = i;
    }
  }
  return order[best];
}

// Without top-k nothing (or, with top-p, only the prefix the mass needs) is sorted; the
// token is the sorted race's, with top-p reached early or late (0.999 on a flat
// distribution widens the partial sort to the whole vocabulary), min-p, masked (−inf)
// logits, ties, flat and peaked distributions, and top-k at or past the vocabulary.
TEST(Sampler, UnsortedRaceGivesTheSortedRacesToken) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const float scale : {0.1f, 1.0f, 4.0f}) {
    std::vector<float> logits(4096);
    for (float& v : logits) v = std::round(normal(rng) * scale * 8.0f) / 8.0f;  // coarse: many equal logits
    for (std::size_t i = 0; i < logits.size(); i += 7) logits[i] = -std::numeric_limits<float>::infinity();
    for (const float min_p : {0.0f, 0.05f}) {
      for (const int top_k : {0, 4096, 5000}) {
        for (const float top_p : {1.0f, 0.5f, 0.95f, 0.999f}) {
          SamplingParams params;
          params.temperature = 0.8f;
          params.min_p = min_p;
          params.top_k = top_k;
          params.top_p = top_p;
          params.seed = 42;
          for (std::int64_t position = 0; position < 100; ++position) {
            ASSERT_EQ(Sample(logits, params, position), SampleSorted(logits, params, position))
                << "scale " << scale << ", min_p " << min_p << ", top_k " << top_k << ", top_p " << top_p << ", position " << position;
          }
        }
      }
    }
  }
}

TEST(Sampler, DrawsAreAStatelessFunctionOfSeedPositionAndToken) {
  EXPECT_EQ(TokenDraw(7, 100, 3), TokenDraw(7, 100, 3));
  EXPECT_NE(TokenDraw(7, 100, 3), TokenDraw(7, 101, 3));
  EXPECT_NE(TokenDraw(7, 100, 3), TokenDraw(8, 100, 3));
  EXPECT_NE(TokenDraw(7, 100, 3), TokenDraw(7, 100, 4));
  double sum = 0;
  for (int pos = 0; pos < 1000; ++pos) {
    const double u = TokenDraw(3, pos, pos % 7);
    ASSERT_GT(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 1000, 0.5, 0.03);
  const auto logits = LogProbs({0.25, 0.25, 0.25, 0.25});
  const SamplingParams p{.temperature = 1.0f, .seed = 99};
  // Interleaving other calls (other requests in the batch) changes nothing.
  const TokenId a = Sample(logits, p, 5);
  (void)Sample(logits, SamplingParams{.temperature = 1.0f, .seed = 1}, 5);
  EXPECT_EQ(Sample(logits, p, 5), a);
}

TEST(Sampler, FrequenciesFollowTheDistribution) {
  const auto f = Frequencies(LogProbs({0.5, 0.3, 0.2}), SamplingParams{.temperature = 1.0f, .seed = 4}, 20000);
  EXPECT_NEAR(f.at(0), 0.5, 0.015);
  EXPECT_NEAR(f.at(1), 0.3, 0.015);
  EXPECT_NEAR(f.at(2), 0.2, 0.015);
}

// What sample-and-match verification needs: a drafter's distribution close to the
// target's, sampled with the same draws, gives the same token about as often as the
// two overlap, even when both are nearly flat (a random-weight model's, 4096 tokens).
TEST(Sampler, NearbyDistributionsMostlyPickTheSameToken) {
  std::mt19937 rng(5);
  std::normal_distribution<float> logit(0.0f, 0.5f), nudge(0.0f, 0.01f);
  std::vector<float> target(4096), draft(4096);
  for (std::size_t i = 0; i < target.size(); ++i) {
    target[i] = logit(rng);
    draft[i] = target[i] + nudge(rng);
  }
  for (const SamplingParams& p :
       {SamplingParams{.temperature = 1.0f, .seed = 8}, SamplingParams{.temperature = 0.7f, .top_p = 0.95f, .seed = 9}}) {
    int same = 0;
    constexpr int kDraws = 2000;
    for (int pos = 0; pos < kDraws; ++pos) same += Sample(target, p, pos) == Sample(draft, p, pos);
    // The overlap Σ min(p, q) is 0.99 here; one draw walked down the sorted lists
    // (the sampler before) matched 3% of the time.
    EXPECT_GT(same, kDraws * 9 / 10) << "temperature " << p.temperature << " top_p " << p.top_p;
  }
}

TEST(Sampler, MaskedTokensAreNeverDrawn) {
  // A grammar's mask: −∞ everywhere but three tokens, which keep their proportions.
  std::vector<float> logits(1000, -std::numeric_limits<float>::infinity());
  logits[10] = std::log(0.5f);
  logits[500] = std::log(0.3f);
  logits[999] = std::log(0.2f);
  const auto f = Frequencies(logits, SamplingParams{.temperature = 1.0f, .seed = 6}, 20000);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_NEAR(f.at(10), 0.5, 0.015);
  EXPECT_NEAR(f.at(500), 0.3, 0.015);
  EXPECT_NEAR(f.at(999), 0.2, 0.015);
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
  const auto logits = LogProbs({0.5, 0.3, 0.2});
  const auto cold = Frequencies(logits, SamplingParams{.temperature = 0.25f, .seed = 4}, 20000);
  // p^4 normalised: 0.0625 / (0.0625 + 0.0081 + 0.0016) = 0.8628
  EXPECT_NEAR(cold.at(0), 0.8628, 0.015);
  const auto hot = Frequencies(logits, SamplingParams{.temperature = 1000.0f, .seed = 4}, 20000);
  EXPECT_NEAR(hot.at(2), 1.0 / 3.0, 0.015);
}

TEST(Sampler, TopKTopPAndMinPCutTheTail) {
  const auto logits = LogProbs({0.5, 0.3, 0.15, 0.05});
  EXPECT_EQ(Frequencies(logits, SamplingParams{.temperature = 1.0f, .top_k = 1, .seed = 2}, 500).size(), 1u);
  const auto k2 = Frequencies(logits, SamplingParams{.temperature = 1.0f, .top_k = 2, .seed = 2}, 20000);
  ASSERT_EQ(k2.size(), 2u);
  EXPECT_NEAR(k2.at(0), 0.5 / 0.8, 0.015);
  // top_p 0.6: 0.5 < 0.6, 0.5 + 0.3 ≥ 0.6 → tokens 0 and 1.
  const auto p = Frequencies(logits, SamplingParams{.temperature = 1.0f, .top_p = 0.6f, .seed = 2}, 5000);
  EXPECT_EQ(p.size(), 2u);
  // min_p 0.5: keep p ≥ 0.25 → tokens 0 and 1.
  const auto m = Frequencies(logits, SamplingParams{.temperature = 1.0f, .min_p = 0.5f, .seed = 2}, 5000);
  EXPECT_EQ(m.size(), 2u);
  EXPECT_FALSE(m.contains(2));
}

}  // namespace
}  // namespace tandem::rt
