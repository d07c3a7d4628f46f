// The scheduler's prompt tokens per step (runtime/serve/prefill_budget.hpp).

#include "runtime/serve/prefill_budget.hpp"

#include <gtest/gtest.h>

namespace tandem::rt {
namespace {

TEST(PrefillBudget, NoPromptsWaitingTakeNothing) {
  EXPECT_EQ(PrefillBudget(256, 0, 0), 0);
  EXPECT_EQ(PrefillBudget(256, 0, 16), 0);
}

TEST(PrefillBudget, ManyStreamsDecodingLeaveOneChunkPerStep) {
  EXPECT_EQ(PrefillBudget(256, 1, 15), 256);
  EXPECT_EQ(PrefillBudget(256, 4, 12), 256);
  EXPECT_EQ(PrefillBudget(256, 8, 8), 256);
}

TEST(PrefillBudget, ABurstBesideFewStreamsIsTakenInLargerSteps) {
  // A campaign's C16 batch: the first request decodes while the other fifteen wait.
  EXPECT_EQ(PrefillBudget(256, 15, 1), 8 * 256);
  EXPECT_EQ(PrefillBudget(256, 3, 1), 3 * 256);
  EXPECT_EQ(PrefillBudget(256, 9, 4), 3 * 256);  // rounded up: 2.25 prompts per stream
  EXPECT_EQ(PrefillBudget(100, 5, 2), 3 * 100);
}

TEST(PrefillBudget, NothingDecodingTakesEveryWaitingPromptUpToTheCeiling) {
  EXPECT_EQ(PrefillBudget(256, 1, 0), 256);
  EXPECT_EQ(PrefillBudget(256, 6, 0), 6 * 256);
  EXPECT_EQ(PrefillBudget(256, 16, 0), kMaxPrefillChunks * 256);
}

}  // namespace
}  // namespace tandem::rt
