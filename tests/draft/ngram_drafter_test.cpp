#include "runtime/draft/ngram_drafter.hpp"

#include <gtest/gtest.h>

namespace tandem::rt {
namespace {

Draft ProposeOne(
    NgramDrafter& d, const std::vector<TokenId>& context, int max_drafts,
    const DraftMore& more = [](std::size_t, const Draft&) { return true; }) {
  const SamplingParams greedy;
  const DraftRequest request{1, context, max_drafts, 100, &greedy};
  std::vector<Draft> drafts;
  d.Propose(std::span(&request, 1), more, drafts);
  return drafts.at(0);
}

TEST(NgramDrafter, ProposesWhatFollowedTheLatestMatchOfTheLongestSuffix) {
  NgramDrafter d(1, 3);
  // Suffix [7 8] occurred twice; the latest is followed by 9 1 2.
  const Draft draft = ProposeOne(d, {7, 8, 5, 5, 7, 8, 9, 1, 2, 3, 7, 8}, 3);
  EXPECT_EQ(draft.tokens, (std::vector<TokenId>{9, 1, 2}));
  EXPECT_EQ(draft.confidence.size(), 3u);
}

TEST(NgramDrafter, FallsBackToShorterNgramsAndRespectsLimits) {
  NgramDrafter d(1, 3);
  EXPECT_EQ(ProposeOne(d, {4, 6, 1, 2, 6}, 8).tokens, (std::vector<TokenId>{1, 2, 6})) << "only [6] matches; the copy runs to the end";
  EXPECT_EQ(ProposeOne(d, {4, 6, 1, 2, 6}, 2).tokens, (std::vector<TokenId>{1, 2})) << "max_drafts";
  EXPECT_TRUE(ProposeOne(d, {1, 2, 3, 4}, 4).tokens.empty()) << "nothing repeats";
  EXPECT_TRUE(ProposeOne(d, {4, 6, 1, 2, 6}, 0).tokens.empty()) << "max_drafts 0";
  EXPECT_EQ(ProposeOne(d, {4, 6, 1, 2, 6}, 8, [](std::size_t, const Draft& so_far) { return so_far.tokens.size() < 1; }).tokens,
            std::vector<TokenId>{1})
      << "`more` stops it";
  NgramDrafter strict(2, 3);
  EXPECT_TRUE(ProposeOne(strict, {4, 6, 1, 2, 6}, 8).tokens.empty()) << "min_n 2: a single-token match is not enough";
}

TEST(NgramDrafter, RefusesBadBounds) {
  EXPECT_THROW(NgramDrafter(0, 3), std::invalid_argument);
  EXPECT_THROW(NgramDrafter(3, 2), std::invalid_argument);
}

}  // namespace
}  // namespace tandem::rt
