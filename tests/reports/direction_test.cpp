// A family whose values are better lower (a time, not a rate): the gate passes a candidate
// that takes less time and fails one that takes more, and the report's A/B table says which
// way is better and whether a bold ratio is a gain. The same scores read as a rate give the
// opposite verdicts, so the direction, not the numbers, decides.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "reports/gate.hpp"
#include "reports/markdown_report.hpp"
#include "store/campaign_record.hpp"

namespace tandem::reports {
namespace {

using store::Direction;

// Eight ABBA sessions in one layout; the family's scores: A's around 100, B's `factor`
// times them (a little spread in each arm, as sessions have).
store::CampaignRecord Campaign(double factor, Direction direction) {
  store::CampaignRecord r;
  r.name = "direction";
  r.arms = {{1, 0, "A"}, {2, 1, "B"}};
  r.layouts = {{1, 0, "L"}};
  r.gate.baseline = "A";
  r.gate.candidate = "B";
  r.gate.max_regression = 0.03;
  store::FamilyScores f;
  f.layout = "L";
  f.family = "battery: time to first token";
  f.workload = "battery";
  f.direction = direction;
  const char* order = "ABBAABBA";
  const std::vector<double> noise = {1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99};
  for (int i = 0; i < 8; ++i) {
    const std::string arm(1, order[i]);
    r.sessions.push_back({i + 1, i, "L", arm, store::SessionStatus::kComplete});
    f.by_arm[arm].push_back(100 * noise[i] * (arm == "B" ? factor : 1.0));
    f.sessions_by_arm[arm].push_back(i + 1);
  }
  r.families = {f};
  return r;
}

TEST(LowerIsBetter, TheGatePassesLessTimeAndFailsMore) {
  const GateResult faster = EvaluateGate(Campaign(0.8, Direction::kLowerIsBetter), {});
  ASSERT_EQ(faster.families.size(), 1u);
  EXPECT_EQ(faster.families[0].verdict, Verdict::kPass) << faster.Text();
  EXPECT_NEAR(*faster.families[0].ratio, 0.8, 0.01);
  EXPECT_NE(faster.Text().find("(lower is better)"), std::string::npos) << faster.Text();
  EXPECT_NE(faster.Text().find("the interval lies below 1.031"), std::string::npos) << faster.Text();
  EXPECT_EQ(faster.Json()["families"][0]["better"], "lower");

  const GateResult slower = EvaluateGate(Campaign(1.25, Direction::kLowerIsBetter), {});
  EXPECT_EQ(slower.families[0].verdict, Verdict::kFail) << slower.Text();
  EXPECT_EQ(slower.verdict, Verdict::kFail);
  EXPECT_EQ(slower.ExitCode(), 1);
}

TEST(LowerIsBetter, TheSameScoresAsARateGiveTheOppositeVerdicts) {
  EXPECT_EQ(EvaluateGate(Campaign(0.8, Direction::kHigherIsBetter), {}).families[0].verdict, Verdict::kFail);
  EXPECT_EQ(EvaluateGate(Campaign(1.25, Direction::kHigherIsBetter), {}).families[0].verdict, Verdict::kPass);
}

TEST(LowerIsBetter, TheReportMarksWhichWayIsBetter) {
  const std::string faster = RenderReport(Campaign(0.8, Direction::kLowerIsBetter), {});
  EXPECT_NE(faster.find("| battery: time to first token (lower is better) | **0.80"), std::string::npos) << faster;
  EXPECT_NE(faster.find("** better |"), std::string::npos) << faster;
  const std::string slower = RenderReport(Campaign(1.25, Direction::kLowerIsBetter), {});
  EXPECT_NE(slower.find("** worse |"), std::string::npos) << slower;
  // A rate keeps the table as it was: bold, no word.
  const std::string rate = RenderReport(Campaign(1.25, Direction::kHigherIsBetter), {});
  EXPECT_EQ(rate.find("lower is better"), std::string::npos) << rate;
  EXPECT_EQ(rate.find("** worse"), std::string::npos) << rate;
  EXPECT_NE(rate.find("| battery: time to first token | **1.2"), std::string::npos) << rate;
}

// `gate.families` may name the family by its id instead of its label.
TEST(GatedFamilies, AnIdSelectsItsFamilyAndAnIdNoFamilyHasIsNamed) {
  store::CampaignRecord r = Campaign(0.8, Direction::kLowerIsBetter);
  r.gate.families = {{"", store::FamilyId{.workload = "battery", .metric = store::FamilyMetric::kWeighted}}};
  EXPECT_EQ(EvaluateGate(r, {}).families.size(), 1u);
  r.gate.families = {{"", store::FamilyId{.workload = "battery", .metric = store::FamilyMetric::kCase, .case_id = "code"}}};
  try {
    EvaluateGate(r, {});
    ADD_FAILURE() << "a family nobody measured was gated";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("measured no family '{workload: battery, metric: case, case: code}'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem::reports
