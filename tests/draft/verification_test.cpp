#include "runtime/draft/verification.hpp"

#include <vector>

#include <gtest/gtest.h>

namespace tandem::rt {
namespace {

// Logits rows whose argmax is the given token.
std::vector<std::vector<float>> Peaks(const std::vector<TokenId>& tokens, int vocab = 8) {
  std::vector<std::vector<float>> rows;
  for (TokenId t : tokens) {
    std::vector<float> r(static_cast<std::size_t>(vocab), 0.0f);
    r[static_cast<std::size_t>(t)] = 5.0f;
    rows.push_back(r);
  }
  return rows;
}

VerifiedTokens Verify(const std::vector<std::vector<float>>& rows, const std::vector<TokenId>& drafts, SamplingParams p = {}) {
  return VerifyDrafts([&](std::size_t j) { return std::span<const float>(rows.at(j)); }, drafts, p, 10);
}

TEST(VerifyDrafts, AllMatchingEmitsEveryDraftAndABonus) {
  const VerifiedTokens v = Verify(Peaks({3, 4, 5, 6}), {3, 4, 5});
  EXPECT_EQ(v.accepted, 3);
  EXPECT_EQ(v.emitted, (std::vector<TokenId>{3, 4, 5, 6}));
}

TEST(VerifyDrafts, FirstMismatchEmitsTheTargetsTokenAndStops) {
  const VerifiedTokens v = Verify(Peaks({3, 4, 5, 6}), {3, 7, 5});
  EXPECT_EQ(v.accepted, 1);
  EXPECT_EQ(v.emitted, (std::vector<TokenId>{3, 4}));
}

TEST(VerifyDrafts, NoDraftsIsPlainDecoding) {
  const VerifiedTokens v = Verify(Peaks({2}), {});
  EXPECT_EQ(v.accepted, 0);
  EXPECT_EQ(v.emitted, (std::vector<TokenId>{2}));
}

TEST(VerifyDrafts, SampledTokensAreTheStatelessDrawAtTheirIndex) {
  std::vector<std::vector<float>> rows(4, std::vector<float>{0.1f, 0.5f, 0.2f, 0.9f, 0.0f, 0.3f, 0.4f, 0.6f});
  const SamplingParams p{.temperature = 1.0f, .seed = 99};
  std::vector<TokenId> plain;
  for (int j = 0; j < 4; ++j) plain.push_back(Sample(rows[static_cast<std::size_t>(j)], p, 10 + j));
  // Drafts equal to what plain sampling draws are all kept, so sampling is unchanged.
  const VerifiedTokens v = Verify(rows, {plain[0], plain[1], plain[2]}, p);
  EXPECT_EQ(v.accepted, 3);
  EXPECT_EQ(v.emitted, plain);
  // A wrong first draft: the draw at index 10 is emitted, nothing else.
  const VerifiedTokens w = Verify(rows, {static_cast<TokenId>((plain[0] + 1) % 8)}, p);
  EXPECT_EQ(w.accepted, 0);
  EXPECT_EQ(w.emitted, std::vector<TokenId>{plain[0]});
}

}  // namespace
}  // namespace tandem::rt
