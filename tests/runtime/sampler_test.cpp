#include "runtime/sampling/sampler.hpp"

#include <cmath>
#include <map>
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

TEST(Sampler, DrawsAreAStatelessFunctionOfSeedAndPosition) {
  EXPECT_EQ(UniformDraw(7, 100), UniformDraw(7, 100));
  EXPECT_NE(UniformDraw(7, 100), UniformDraw(7, 101));
  EXPECT_NE(UniformDraw(7, 100), UniformDraw(8, 100));
  for (int pos = 0; pos < 1000; ++pos) {
    const double u = UniformDraw(3, pos);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
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
