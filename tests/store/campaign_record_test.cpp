// The campaign record read from a store: its enumerations and JSON columns become typed
// values, and what this Tandem cannot read is refused naming the store, table, row and
// value (a newer Tandem's word, a hand-edited store).
#include "store/campaign_record.hpp"

#include <filesystem>
#include <string>

#include <sqlite3.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "common/input_error.hpp"
#include "store/store.hpp"

namespace tandem::store {
namespace {

namespace fs = std::filesystem;

class CampaignRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = fs::temp_directory_path() / ("tandem-record-" + std::to_string(::getpid()) + ".db");
    fs::remove(file_);
    Store store = Store::Open(file_);
    const std::int64_t campaign = store.CreateCampaign("c", "c.yaml", "", "", "", "", R"({"hostname":"vm","busy_fraction":0.5})");
    const std::int64_t arm = store.AddArm(campaign, 0, "A", ArmKind::kExternal, "r", "", "", R"({"base_url":"http://h:8000"})");
    const std::int64_t layout = store.AddLayout(campaign, 0, "L", R"({"workers":2,"worker_hosts":["w1","w2"]})");
    const std::int64_t session = store.AddSession(campaign, 0, layout, arm);
    store.StartSession(session, "{}");
    const std::int64_t run = store.StartWorkloadRun(session, "b", WorkloadKind::kConcurrency, false, R"({"levels":[1,4]})", "{}");
    SampleRow x;
    x.case_id = "code";
    x.checks_json = R"({"non_empty":true})";
    store.AddSample(run, session, x);
    store.FinishWorkloadRun(run, "{}", "{}");
    store.FinishSession(session, SessionStatus::kComplete, "", "{}", "[]");
  }
  void TearDown() override { fs::remove(file_); }

  void Sql(const std::string& statement) {
    Store store = Store::Open(file_, OpenMode::kExisting);
    ASSERT_EQ(sqlite3_exec(store.handle(), statement.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << statement;
  }
  std::string Refusal() {
    try {
      LoadCampaignRecord(Store::Open(file_, OpenMode::kReadOnly), std::nullopt);
    } catch (const InputError& e) {
      return e.what();
    }
    return "read";
  }

  fs::path file_;
};

TEST_F(CampaignRecordTest, ReadsTypedValues) {
  const CampaignRecord r = LoadCampaignRecord(Store::Open(file_, OpenMode::kReadOnly), std::nullopt);
  ASSERT_EQ(r.arms.size(), 1u);
  EXPECT_EQ(r.arms[0].kind, ArmKind::kExternal);
  EXPECT_EQ(r.arms[0].launch.base_url, "http://h:8000");
  ASSERT_EQ(r.layouts.size(), 1u);
  EXPECT_EQ(r.layouts[0].workers, 2);
  EXPECT_EQ(r.layouts[0].worker_hosts, (std::vector<std::string>{"w1", "w2"}));
  EXPECT_EQ(r.layouts[0].coordinator_host, "local");  // a key the spec lacks: its default
  ASSERT_EQ(r.sessions.size(), 1u);
  EXPECT_EQ(r.sessions[0].status, SessionStatus::kComplete);
  EXPECT_TRUE(r.host.known);
  EXPECT_EQ(r.host.busy_fraction, 0.5);
  ASSERT_EQ(r.workloads.size(), 1u);
  EXPECT_EQ(r.workloads[0].kind, WorkloadKind::kConcurrency);
  EXPECT_EQ(r.workloads[0].settings.levels, (std::vector<int>{1, 4}));
  EXPECT_FALSE(r.workloads[0].prediction_before.has_value());
  ASSERT_EQ(r.samples.size(), 1u);
  EXPECT_EQ(r.samples[0].checks, (std::map<std::string, bool>{{"non_empty", true}}));
}

TEST_F(CampaignRecordTest, AnUnknownWordNamesTheStoreTableRowAndWord) {
  Sql("UPDATE session SET status = 'paused'");
  std::string why = Refusal();
  EXPECT_NE(why.find(file_.string() + ": session 1: status"), std::string::npos) << why;
  EXPECT_NE(why.find("session status 'paused' is not one this Tandem knows (planned, running, complete, failed, skipped)"),
            std::string::npos)
      << why;
  Sql("UPDATE session SET status = 'complete'; UPDATE arm SET source_kind = 'svn'");
  why = Refusal();
  EXPECT_NE(why.find(file_.string() + ": arm 1: source_kind: arm kind 'svn'"), std::string::npos) << why;
  Sql("UPDATE arm SET source_kind = 'external'; UPDATE workload_run SET kind = 'open_loop'");
  why = Refusal();
  EXPECT_NE(why.find("workload_run 1: kind: workload kind 'open_loop'"), std::string::npos) << why;
}

TEST_F(CampaignRecordTest, AValueOfTheWrongTypeNamesTheColumnAndKey) {
  Sql(R"(UPDATE layout SET spec_json = '{"workers":"two"}')");
  std::string why = Refusal();
  EXPECT_NE(why.find(file_.string() + R"(: layout 1: spec_json: 'workers' is "two", not a number)"), std::string::npos) << why;
  Sql(R"(UPDATE layout SET spec_json = '{}'; UPDATE sample SET checks_json = '{"non_empty":"yes"}')");
  why = Refusal();
  EXPECT_NE(why.find(file_.string() + R"(: sample 1: checks_json: check 'non_empty' is "yes", not true or false)"), std::string::npos)
      << why;
}

}  // namespace
}  // namespace tandem::store
