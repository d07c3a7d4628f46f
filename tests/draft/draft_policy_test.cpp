#include "runtime/draft/draft_policy.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tandem::rt {
namespace {

Draft Confident(int n, float confidence) {
  Draft d;
  d.tokens.assign(static_cast<std::size_t>(n), 5);
  d.confidence.assign(static_cast<std::size_t>(n), confidence);
  return d;
}

TEST(DraftPolicy, ParsesFixedAndAdaptiveAndRefusesTheRest) {
  EXPECT_EQ(MakeDraftPolicy("fixed:4")->MaxDrafts(), 4);
  EXPECT_EQ(MakeDraftPolicy("fixed:4")->name(), "fixed:4");
  EXPECT_EQ(MakeDraftPolicy("adaptive", 6)->MaxDrafts(), 6);
  for (const char* bad : {"fixed:0", "fixed:33", "fixed:", "fixed:4x", "adaptive:3", "greedy", ""}) {
    EXPECT_THROW(MakeDraftPolicy(bad), std::invalid_argument) << bad;
  }
}

TEST(DraftPolicy, FixedDraftsExactlyK) {
  const auto p = MakeDraftPolicy("fixed:3");
  EXPECT_TRUE(p->More(Confident(2, 0.01f), StepShape{}));
  EXPECT_FALSE(p->More(Confident(3, 0.99f), StepShape{}));
  EXPECT_EQ(p->Choose(Confident(3, 0.01f), StepShape{}), 3u);
}

// Steps whose time grows with rows (1 ms + 0.1 ms per row) and a drafter costing 0.2 ms
// per forward; `rate` of drafts accepted.
void Train(DraftPolicy& p, double rate, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    const Draft d = Confident(4, 0.5f);
    const auto accepted = static_cast<std::size_t>(rate >= 0.99 ? 4 : ((r % 100) < rate * 100 ? 1 : 0));
    p.ObserveAcceptance(d, 4, accepted);
    const int rows = 1 + 4 + (r % 3);
    p.ObserveRound({.rows = rows,
                    .verify_s = 0.001 + 0.0001 * rows,
                    .draft_s = 4 * 0.0002,
                    .work = {.catchup_rows = 2, .first_s = 0.0002, .chained = 3, .chained_s = 3 * 0.0002},
                    .drafted = 4});
  }
}

TEST(DraftPolicy, AdaptiveDraftsLongWhenDraftsAreAcceptedAndStopsWhenNot) {
  const auto good = MakeDraftPolicy("adaptive", 8);
  Train(*good, 1.0, 200);
  EXPECT_TRUE(good->More(Confident(5, 0.5f), StepShape{})) << "accepted drafts are nearly free tokens: draft on";
  EXPECT_EQ(good->Choose(Confident(8, 0.5f), StepShape{}), 8u);

  // With eight requests in the step, one request's drafts delay seven others: the same
  // drafts no longer pay.
  EXPECT_TRUE(good->More(Draft{}, StepShape{1, 1}));
  EXPECT_FALSE(good->More(Draft{}, StepShape{8, 8}));

  const auto bad = MakeDraftPolicy("adaptive", 8);
  Train(*bad, 0.0, 200);
  EXPECT_FALSE(bad->More(Confident(1, 0.5f), StepShape{})) << "rejected drafts only cost time";
  EXPECT_EQ(bad->Choose(Confident(4, 0.5f), StepShape{}), 0u);
  EXPECT_FALSE(bad->More(Draft{}, StepShape{})) << "not even one";
  // After a long stretch without drafting it tries one draft again.
  for (int r = 0; r < 300; ++r) bad->ObserveRound({.rows = 1, .verify_s = 0.0011});
  EXPECT_TRUE(bad->More(Draft{}, StepShape{}));

  nlohmann::json stats;
  good->Describe(stats);
  // A first forward that caught up on a long pause does not count as the draft cost.
  good->ObserveRound({.rows = 5, .verify_s = 0.0015, .draft_s = 0.05, .work = {.catchup_rows = 400, .first_s = 0.05}, .drafted = 1});
  // The time model was fitted to exactly linear data: it predicts it well.
  ASSERT_TRUE(stats["round_time_prediction_mare"].is_number());
  EXPECT_LT(stats["round_time_prediction_mare"].get<double>(), 0.05) << stats.dump();
  // The lifetime sums a client differences around a workload give the same mean.
  const nlohmann::json& sums = stats["round_time_prediction"];
  ASSERT_GT(sums["rounds"].get<double>(), 0) << stats.dump();
  EXPECT_NEAR(sums["abs_rel_error_sum"].get<double>() / sums["rounds"].get<double>(), stats["round_time_prediction_mare"].get<double>(),
              1e-12);
  EXPECT_TRUE(sums["error_us_sum"].is_number());
  EXPECT_NEAR(stats["round_time_model"]["verify_per_row_ms"].get<double>(), 0.1, 0.02) << stats.dump();
  EXPECT_NEAR(stats["round_time_model"]["draft_chained_forward_ms"].get<double>(), 0.2, 0.01) << stats.dump();
}

// A drafter whose first rounds were slow (cold weights: 20 ms a forward) and then cost
// 0.3 ms (plus 0.05 ms per row a first forward catches up on), every draft accepted, in
// steps of 1 ms + 0.1 ms per row. Drafting stops after the cold rounds; the policy must
// find out on its own that it pays again. It did not: an exploratory round's first
// forward catches up on the whole pause and is not counted as the draft cost, so the
// cold estimate stayed, and exploring grew ever rarer.
TEST(DraftPolicy, AdaptiveDraftsAgainOnceItHasMeasuredTheSteadyDraftCost) {
  const auto p = MakeDraftPolicy("adaptive", 4);
  for (int r = 0; r < 8; ++r) {
    p->ObserveAcceptance(Confident(2, 0.5f), 2, 2);
    p->ObserveRound({.rows = 3,
                     .verify_s = 0.0013,
                     .draft_s = 0.04,
                     .work = {.catchup_rows = 3, .first_s = 0.02, .chained = 1, .chained_s = 0.02},
                     .drafted = 2});
  }
  ASSERT_FALSE(p->More(Draft{}, StepShape{})) << "20 ms drafts do not pay for 1 ms steps";

  int drafting_rounds = 0, behind = 3;  // rows the drafter has not seen yet
  for (int r = 0; r < 4000; ++r) {
    Draft d;
    while (p->More(d, StepShape{})) {
      d.tokens.push_back(5);
      d.confidence.push_back(0.5f);
    }
    const auto drafted = static_cast<int>(d.tokens.size());
    const auto verified = static_cast<int>(p->Choose(d, StepShape{}));
    DraftWork work;
    if (drafted > 0) {
      p->ObserveAcceptance(d, static_cast<std::size_t>(verified), static_cast<std::size_t>(verified));
      ++drafting_rounds;
      work = {.catchup_rows = behind, .first_s = 0.0003 + 0.00005 * behind, .chained = drafted - 1, .chained_s = 0.0003 * (drafted - 1)};
    }
    const int rows = 1 + verified;
    p->ObserveRound(
        {.rows = rows, .verify_s = 0.001 + 0.0001 * rows, .draft_s = work.first_s + work.chained_s, .work = work, .drafted = drafted});
    behind = drafted > 0 ? verified + 1 : behind + 1;
  }
  EXPECT_GT(drafting_rounds, 3000) << "drafting nearly doubles the rate here; the policy drafted in " << drafting_rounds
                                   << " of 4000 rounds";
}

}  // namespace
}  // namespace tandem::rt
