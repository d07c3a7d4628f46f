// Session scores from recorded samples, against values numpy computed from the same
// samples (tests/harness/golden/make_session_scores_golden.py), and the cross-session
// greedy_match marking.
#include "store/session_scores.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "store/store.hpp"
#include "tests/support/fixture_store.hpp"

namespace tandem::store {
namespace {

using nlohmann::json;

class TempStore {
 public:
  TempStore() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() / (std::string("tandem-") + info->test_suite_name() + "-" + info->name() + ".db");
    Remove();
  }
  ~TempStore() { Remove(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  void Remove() {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path_.string() + suffix);
  }
  std::filesystem::path path_;
};

TEST(SessionScores, MatchTheIndependentComputation) {
  std::ifstream in(TANDEM_SESSION_SCORES_GOLDEN);
  ASSERT_TRUE(in) << TANDEM_SESSION_SCORES_GOLDEN;
  const json golden = json::parse(in);

  TempStore file;
  const std::int64_t campaign = testing::WriteFixtureStore(golden, file.path());
  const Store store = Store::Open(file.path());
  const std::vector<FamilyScores> got = ComputeSessionScores(store, campaign);
  std::map<std::string, const FamilyScores*> by_family;
  for (const FamilyScores& f : got) {
    EXPECT_EQ(f.layout, "tp4");
    by_family[f.family] = &f;
  }
  ASSERT_EQ(got.size(), golden["expected"].size());
  for (const json& e : golden["expected"]) {
    const std::string family = e["family"];
    ASSERT_TRUE(by_family.contains(family)) << family;
    const FamilyScores& f = *by_family[family];
    ASSERT_EQ(f.by_arm.size(), e["by_arm"].size()) << family;
    for (const auto& [arm, values] : e["by_arm"].items()) {
      ASSERT_TRUE(f.by_arm.contains(arm)) << family << " " << arm;
      const std::vector<double>& mine = f.by_arm.at(arm);
      ASSERT_EQ(mine.size(), values.size()) << family << " " << arm;
      for (std::size_t i = 0; i < mine.size(); ++i) {
        const double want = values[i];
        EXPECT_NEAR(mine[i], want, 1e-12 * want) << family << " " << arm << " session " << i;
      }
    }
  }
}

TEST(SessionScores, GreedyMatchIsWithinEachArmFollowsItsMajorityAndCanRecover) {
  TempStore file;
  Store store = Store::Open(file.path());
  const std::int64_t campaign = store.CreateCampaign("greedy", "greedy.yaml", "", "", "", "", "{}");
  const std::int64_t a = store.AddArm(campaign, 0, "A", ArmKind::kBinary, "ra", "", "", "{}");
  const std::int64_t b = store.AddArm(campaign, 1, "B", ArmKind::kBinary, "rb", "", "", "{}");
  const std::int64_t layout = store.AddLayout(campaign, 0, "tp4", "{}");
  std::vector<std::int64_t> ids;
  auto add_session = [&](int order, std::int64_t arm, const std::string& sha, bool greedy) {
    const std::int64_t session = store.AddSession(campaign, order, layout, arm);
    store.StartSession(session, "{}");
    const std::int64_t run =
        store.StartWorkloadRun(session, "battery", WorkloadKind::kBattery, false, json{{"greedy", greedy}}.dump(), "{}");
    SampleRow s;
    s.case_id = "code";
    s.content_sha256 = sha;
    s.valid = s.passed = true;
    s.checks_json = R"({"non_empty":true})";
    store.AddSample(run, session, s);
    store.FinishWorkloadRun(run, "{}", "{}");
    store.FinishSession(session, SessionStatus::kComplete, "", "{}", "[]");
    return session;
  };
  add_session(0, a, "x", true);
  add_session(1, b, "y", true);
  add_session(2, b, "x", true);
  add_session(3, a, "z", false);  // sampled: never compared
  add_session(4, a, "x", true);
  add_session(5, b, "x", true);

  auto check_of = [&](int order) {
    Statement s(store.handle(),
                "SELECT x.checks_json, x.passed FROM sample x JOIN session se ON se.id = x.session_id WHERE se.order_index = ?");
    s.Bind(1, static_cast<std::int64_t>(order));
    EXPECT_TRUE(s.Step());
    return std::make_pair(json::parse(s.Text(0)), s.Int(1) != 0);
  };
  GreedyAgreementCounts c = MarkGreedyMatches(store, campaign);
  EXPECT_EQ(c.within_compared, 2);  // the prompt in arm A, and in arm B
  EXPECT_EQ(c.within_agree, 1);     // B disagreed with itself once
  EXPECT_EQ(c.across_compared, 1);
  EXPECT_EQ(c.across_agree, 1);  // both arms' majority output is x
  EXPECT_EQ(check_of(0).first["greedy_match"], true);
  EXPECT_EQ(check_of(1).first["greedy_match"], false);
  EXPECT_FALSE(check_of(1).second);
  EXPECT_EQ(check_of(2).first["greedy_match"], true);
  EXPECT_FALSE(check_of(3).first.contains("greedy_match"));

  // The odd one out is redone (as a resume would) and now agrees: passed again.
  Statement(store.handle(), "UPDATE sample SET content_sha256 = 'x' WHERE session_id = (SELECT id FROM session WHERE order_index = 1)")
      .Run();
  c = MarkGreedyMatches(store, campaign);
  EXPECT_EQ(c.within_agree, 2);
  EXPECT_EQ(check_of(1).first["greedy_match"], true);
  EXPECT_TRUE(check_of(1).second);

  // Another runtime that is deterministic but writes different text fails no sample:
  // that is cross-arm disagreement, reported (and gated only on request), not an error.
  Statement(store.handle(), "UPDATE sample SET content_sha256 = 'w' WHERE session_id IN (SELECT id FROM session WHERE arm_id = ?)")
      .Bind(1, b)
      .Run();
  c = MarkGreedyMatches(store, campaign);
  EXPECT_EQ(c.within_agree, 2);
  EXPECT_EQ(c.across_agree, 0);
  EXPECT_EQ(c.across_compared, 1);
  for (int order : {0, 1, 2, 4, 5}) EXPECT_TRUE(check_of(order).second) << "session " << order;
}

}  // namespace
}  // namespace tandem::store
