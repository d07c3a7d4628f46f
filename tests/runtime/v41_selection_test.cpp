// DeepSeek V4.1's compressed KV pooling and the indexer's choices: candidate blocks and
// top-k positions.
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/engine/compressed_kv.hpp"
#include "runtime/engine/index_selection.hpp"

namespace tandem::rt {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(CompressedKv, PairsArePooledChannelByChannelByTheSoftmaxOfTheirGates) {
  const int width = 16;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  GatedPooling pool(2, width);
  std::vector<float> kv0(width), s0(width), kv1(width), s1(width);
  for (int c = 0; c < width; ++c) {
    kv0[c] = normal(rng), s0[c] = normal(rng), kv1[c] = normal(rng), s1[c] = normal(rng);
  }
  EXPECT_FALSE(pool.Add(6, kv0, s0).has_value()) << "the first of a pair waits";
  const auto latent = pool.Add(7, kv1, s1);
  ASSERT_TRUE(latent.has_value());
  for (int c = 0; c < width; ++c) {
    const double a = std::exp(static_cast<double>(s0[c])), b = std::exp(static_cast<double>(s1[c]));
    const double want = (kv0[c] * a + kv1[c] * b) / (a + b);
    EXPECT_NEAR((*latent)[c], want, 1e-5 * (std::fabs(kv0[c]) + std::fabs(kv1[c]))) << "channel " << c;
  }
  // Ratio 1: each token's row is its latent.
  GatedPooling one(1, width);
  const auto row = one.Add(3, kv0, s0);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(*row, kv0);
}

TEST(IndexSelection, CandidateBlocksKeepTheNewestAndTheBestAndNeverAnEmptyOne) {
  // Ten visible positions in blocks of 4: {0–3}, {4–7}, {8, 9}.
  const std::vector<float> score = {0.1f, 0.9f, 0.2f, 0.3f, 0.5f, 0.4f, -kInf, 0.0f, 0.0f, 0.0f};
  std::vector<bool> mask = CandidateBlocks(score, 10, 2, 4);
  EXPECT_EQ(mask, (std::vector<bool>{true, true, true, true, false, false, false, false, true, true}));
  mask = CandidateBlocks(score, 8, 1, 4);  // the newest visible block is {4–7}
  EXPECT_EQ(mask, (std::vector<bool>{false, false, false, false, true, true, true, true}));
  const std::vector<float> empty = {-kInf, -kInf, -kInf, -kInf, 1.0f, 2.0f};
  mask = CandidateBlocks(empty, 6, 5, 2);  // {0,1} and {2,3} hold nothing finite
  EXPECT_EQ(mask, (std::vector<bool>{false, false, false, false, true, true}));
  EXPECT_TRUE(CandidateBlocks(score, 0, 3, 4).empty());
}

TEST(IndexSelection, TopPositionsAreTheBestInAscendingOrderTiesToTheLowerOne) {
  const std::vector<float> score = {0.5f, 2.0f, 0.5f, -kInf, 3.0f, 0.5f};
  std::vector<std::int32_t> out(4);
  TopPositions(score, 6, 4, 100, out.data());
  EXPECT_EQ(out, (std::vector<std::int32_t>{100, 101, 102, 104}));
  TopPositions(score, 3, 4, 0, out.data());  // three visible: all of them, then −1
  EXPECT_EQ(out, (std::vector<std::int32_t>{0, 1, 2, -1}));
}

}  // namespace
}  // namespace tandem::rt
