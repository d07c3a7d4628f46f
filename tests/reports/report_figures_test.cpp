// The figures the report's sections print, computed apart from the markdown: draft
// counters summed per case and column (SumDraftCounters) and the spread and power of
// session scores (AssessNoise), on records built by hand so every sum is known.
#include <cmath>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "reports/draft_acceptance.hpp"
#include "reports/markdown_report.hpp"
#include "reports/noise_power.hpp"
#include "stats/sessions_needed.hpp"

namespace tandem::reports {
namespace {

using nlohmann::json;

store::SampleRecord Sample(std::int64_t id, std::int64_t run, std::int64_t session, const std::string& workload, const std::string& case_id,
                           int batch, store::DraftCounts draft) {
  store::SampleRecord x;
  x.id = id;
  x.run = run;
  x.session = session;
  x.workload = workload;
  x.case_id = case_id;
  x.batch = batch;
  x.draft = std::move(draft);
  x.valid = x.passed = true;
  return x;
}

store::DraftCounts Draft(std::int64_t accepted, std::int64_t verified, std::int64_t rounds) {
  return {.counted = true, .accepted_drafts = accepted, .verified_drafts = verified, .request_rounds = rounds};
}

// Layout L, arms A (session 1) and B (session 2); A ran a battery "b" (and a warmup),
// B mixed traffic "m".
store::CampaignRecord TwoArms() {
  store::CampaignRecord r;
  r.name = "figures";
  r.arms = {{1, 0, "A"}, {2, 1, "B"}};
  r.layouts = {{1, 0, "L"}};
  r.sessions = {{1, 0, "L", "A", store::SessionStatus::kComplete}, {2, 1, "L", "B", store::SessionStatus::kComplete}};
  r.workloads = {{1, 1, "b", store::WorkloadKind::kBattery, false},
                 {2, 1, "warm", store::WorkloadKind::kBattery, true},
                 {3, 2, "m", store::WorkloadKind::kMixed, false}};
  // Every sample of a batch carries the batch's delta: batch 0 of run 1 counts once.
  r.samples = {Sample(1, 1, 1, "b", "hello", 0, Draft(3, 5, 4)),
               Sample(2, 1, 1, "b", "hello", 0, Draft(3, 5, 4)),
               Sample(3, 1, 1, "b", "hello", 1, Draft(1, 2, 3)),
               Sample(4, 2, 1, "warm", "hello", 0, Draft(100, 100, 100)),
               Sample(5, 3, 2, "m", "code", 0, Draft(2, 4, 2)),
               Sample(6, 3, 2, "m", "fable", 0, Draft(2, 4, 2)),
               Sample(7, 3, 2, "m", "topic", 1, {})};
  return r;
}

TEST(DraftCounterSums, CountEachMeasuredBatchOnceAndAMixedBatchAsOneCase) {
  const std::vector<DraftCounterSums> sums = SumDraftCounters(TwoArms());
  ASSERT_EQ(sums.size(), 2u);
  EXPECT_EQ(sums[0].workload, "b");
  EXPECT_EQ(sums[0].case_id, "hello");
  ASSERT_EQ(sums[0].by_layout_arm.size(), 1u);
  const stats::DraftCounters& a = sums[0].by_layout_arm.at({"L", "A"});
  EXPECT_EQ(a.accepted_drafts, 4u);
  EXPECT_EQ(a.verified_drafts, 7u);
  EXPECT_EQ(a.request_rounds, 7u);
  EXPECT_EQ(sums[1].workload, "m");
  EXPECT_EQ(sums[1].case_id, "mixed");
  const stats::DraftCounters& b = sums[1].by_layout_arm.at({"L", "B"});
  EXPECT_EQ(b.accepted_drafts, 2u);
  EXPECT_EQ(b.verified_drafts, 4u);
  EXPECT_EQ(b.request_rounds, 2u);
}

TEST(DraftCounterSums, NothingWithoutVerifiedDraftsAndNoColumnWhoseSumWentNegative) {
  store::CampaignRecord r = TwoArms();
  for (store::SampleRecord& x : r.samples) {
    if (x.draft.counted) x.draft = Draft(0, 0, 5);
  }
  EXPECT_TRUE(SumDraftCounters(r).empty());
  r = TwoArms();
  r.samples[2].draft = Draft(-9, 2, 3);  // an old store's delta of counters that went backwards
  const std::vector<DraftCounterSums> sums = SumDraftCounters(r);
  ASSERT_EQ(sums.size(), 2u);
  EXPECT_TRUE(sums[0].by_layout_arm.empty());
  EXPECT_EQ(sums[1].by_layout_arm.size(), 1u);
}

TEST(DraftCounterSums, TheReportShowsTheirRates) {
  const std::string text = RenderReport(TwoArms(), {});
  // A: 4 of 7 drafts accepted, (4 + 7) / 7 tokens per round; B never ran the battery.
  EXPECT_NE(text.find("| b | hello | 0.571 · 1.57/round | — |"), std::string::npos) << text;
  EXPECT_NE(text.find("| m | mixed | — | 0.500 · 2.00/round |"), std::string::npos) << text;
}

store::FamilyScores Family(const std::string& name, std::map<std::string, std::vector<double>> by_arm) {
  store::FamilyScores f;
  f.layout = "L";
  f.family = name;
  f.by_arm = std::move(by_arm);
  return f;
}

TEST(FamilyNoise, IsTheSpreadOfLogScoresAndTheSessionsItCalls) {
  // ln of the scores: 0, 0.1, 0.2, whose sample standard deviation is exactly 0.1.
  const std::vector<store::FamilyScores> families = {Family("spread", {{"A", {1.0, std::exp(0.1), std::exp(0.2)}}, {"B", {2.0}}}),
                                                     Family("flat", {{"A", {5.0, 5.0}}, {"B", {7.0, 7.0}}}),
                                                     Family("single", {{"A", {3.0}}})};
  const std::vector<FamilyNoise> noise = AssessNoise(families, 0.02);
  ASSERT_EQ(noise.size(), 3u);
  EXPECT_EQ(noise[0].family, &families[0]);
  ASSERT_EQ(noise[0].log_sd.size(), 1u);  // B has one session: no spread
  EXPECT_NEAR(noise[0].log_sd.at("A"), 0.1, 1e-12);
  ASSERT_TRUE(noise[0].sessions_needed);
  EXPECT_EQ(*noise[0].sessions_needed, stats::SessionsNeeded(noise[0].log_sd.at("A"), 0.02));
  EXPECT_EQ(noise[1].log_sd.at("A"), 0.0);
  EXPECT_EQ(noise[1].log_sd.at("B"), 0.0);
  EXPECT_EQ(noise[1].sessions_needed, std::optional<std::size_t>(2));
  EXPECT_TRUE(noise[2].log_sd.empty());
  EXPECT_FALSE(noise[2].sessions_needed);
}

}  // namespace
}  // namespace tandem::reports
