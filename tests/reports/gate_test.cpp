// `tandem gate` on recorded campaigns: pass, fail, inconclusive, quality failure and
// bad input, through the real executable (exit codes, text, JSON) and the library.
#include "reports/gate.hpp"

#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/input_error.hpp"
#include "store/campaign_record.hpp"
#include "store/store.hpp"
#include "tests/support/fixture_store.hpp"
#include "tests/support/run_command.hpp"

namespace tandem::reports {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// One sample per session whose decode rate is exactly `rate`.
json Sample(double rate, int repeat = 0) {
  return {{"case_id", "code"},
          {"weight", 1.0},
          {"repeat", repeat},
          {"completion_tokens", 101},
          {"t_first_output", 10.0},
          {"t_finish", 10.0 + 100.0 / rate},
          {"content_sha256", "same"},
          {"nonce", "Word: "},
          {"checks", {{"stream_complete", true}, {"usage_consistent", true}, {"cache_bound", true}}}};
}

// Sessions ABBA... with these baseline and candidate rates.
json Campaign(const std::vector<double>& a, const std::vector<double>& b) {
  json sessions = json::array();
  std::size_t ia = 0, ib = 0;
  const std::string order = "ABBA";
  for (std::size_t i = 0; ia < a.size() || ib < b.size(); ++i) {
    const bool baseline = (order[i % 4] == 'A' && ia < a.size()) || ib >= b.size();
    const double rate = baseline ? a[ia++] : b[ib++];
    sessions.push_back({{"order_index", i},
                        {"layout", "tp4"},
                        {"arm", baseline ? "base" : "cand"},
                        {"workloads", {{{"name", "battery"}, {"kind", "battery"}, {"samples", {Sample(rate)}}}}}});
  }
  return {{"arms", {{{"label", "base"}}, {{"label", "cand"}}}}, {"sessions", sessions}};
}

class Gate : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("tandem-gate-" + std::string(info->name()) + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const json& fixture, const std::string& name = "store.db") {
    testing::WriteFixtureStore(fixture, dir_ / name);
    return (dir_ / name).string();
  }
  static GateResult Evaluate(const std::string& db, GateOptions options = {}) {
    const store::Store store = store::Store::Open(db);
    return EvaluateGate(LoadCampaignRecord(store, std::nullopt), options);
  }
  static testing::CommandResult Cli(std::vector<std::string> args) {
    args.insert(args.begin(), "gate");
    return testing::RunCommand(TANDEM_BIN, args);
  }
  fs::path dir_;
};

const std::vector<double> kBase = {100, 102, 99, 101};

TEST_F(Gate, EqualArmsPass) {
  const std::string db = Write(Campaign(kBase, {101, 100, 102, 99}));
  const auto r = Cli({db});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("pass         tp4  battery: weighted decode"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verdict: pass"), std::string::npos) << r.out;
}

TEST_F(Gate, ProvenRegressionFails) {
  const std::string db = Write(Campaign(kBase, {85, 86.5, 84, 86}));
  const auto r = Cli({db, "--max-regression", "0.03"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("fail         tp4  battery: weighted decode"), std::string::npos) << r.out;
  // A regression smaller than the tolerance does not fail the proven rule.
  EXPECT_EQ(Cli({db, "--max-regression", "0.2"}).exit_code, 0);
}

TEST_F(Gate, NoninferiorNeedsTheWholeIntervalAboveTheThreshold) {
  // Noisy and slightly slower: the interval straddles 0.97.
  const std::string db = Write(Campaign({100, 110, 90, 105}, {98, 108, 88, 100}));
  EXPECT_EQ(Cli({db, "--rule", "proven"}).exit_code, 0);
  const auto r = Cli({db, "--rule", "noninferior"});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("noninferiority not shown"), std::string::npos) << r.out;
  // Tight and equal: noninferior passes.
  EXPECT_EQ(Cli({Write(Campaign(kBase, {101, 100, 102, 99}), "tight.db"), "--rule", "noninferior"}).exit_code, 0);
}

TEST_F(Gate, TooFewSessionsIsInconclusive) {
  const std::string db = Write(Campaign({100}, {90}));
  const GateResult g = Evaluate(db);
  EXPECT_EQ(g.verdict, Verdict::kInconclusive);
  EXPECT_EQ(g.ExitCode(), 2);
  ASSERT_FALSE(g.families.empty());
  EXPECT_EQ(g.families[0].reason, "baseline: 1 session (needs 2)");
}

TEST_F(Gate, UnfinishedCampaignIsInconclusive) {
  json c = Campaign(kBase, {101, 100, 102, 99});
  c["sessions"].push_back({{"order_index", 8}, {"layout", "tp4"}, {"arm", "cand"}, {"status", "planned"}});
  const GateResult g = Evaluate(Write(c));
  EXPECT_EQ(g.verdict, Verdict::kInconclusive);
  ASSERT_EQ(g.quality_doubts.size(), 1u);
  EXPECT_NE(g.quality_doubts[0].find("session 9 (tp4, cand) never completed"), std::string::npos) << g.quality_doubts[0];
}

TEST_F(Gate, QualityFailuresFailEvenWhenFast) {
  json c = Campaign(kBase, {101, 100, 102, 99});
  // An invalid candidate sample (its prompt hit the cache) in another workload.
  json bad = Sample(100);
  bad["checks"]["cache_bound"] = false;
  bad["valid"] = false;
  c["sessions"][1]["workloads"].push_back({{"name", "extra"}, {"kind", "battery"}, {"samples", {bad}}});
  const auto r = Cli({Write(c), "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["verdict"], "fail");
  ASSERT_EQ(j["quality_failures"].size(), 1u);
  EXPECT_NE(j["quality_failures"][0].get<std::string>().find("1 candidate sample failed cache_bound: #"), std::string::npos) << j.dump();

  // A changed greedy output fails too.
  json changed = Campaign(kBase, {101, 100, 102, 99});
  changed["sessions"][2]["workloads"][0]["samples"][0]["content_sha256"] = "other";
  const GateResult g = Evaluate(Write(changed, "changed.db"));
  EXPECT_EQ(g.verdict, Verdict::kFail);
  ASSERT_EQ(g.quality_failures.size(), 1u);
  EXPECT_NE(g.quality_failures[0].find("greedy output changed"), std::string::npos) << g.quality_failures[0];

  // A failed candidate session fails; a failed baseline session only makes it inconclusive.
  json failed = Campaign(kBase, {101, 100, 102, 99, 100});
  failed["sessions"][8]["status"] = "failed";
  failed["sessions"][8]["reason"] = "the coordinator exited with code 3";
  EXPECT_EQ(Evaluate(Write(failed, "failed.db")).verdict, Verdict::kFail);
  json base_failed = Campaign({100, 102, 99, 101, 100}, {101, 100, 102, 99});
  for (json& s : base_failed["sessions"]) {
    if (s["order_index"] == 8) s["status"] = "failed";
  }
  EXPECT_EQ(Evaluate(Write(base_failed, "base_failed.db")).verdict, Verdict::kInconclusive);
}

TEST_F(Gate, SettingsComeFromTheCampaignAndFlagsOverrideThem) {
  json c = Campaign(kBase, {85, 86.5, 84, 86});
  c["campaign"] = {{"gate", {{"baseline", "cand"}, {"candidate", "base"}, {"max_regression", 0.05}, {"families", {"battery: code"}}}}};
  const std::string db = Write(c);
  const GateResult g = Evaluate(db);
  EXPECT_EQ(g.baseline, "cand");
  EXPECT_EQ(g.candidate, "base");
  EXPECT_DOUBLE_EQ(g.max_regression, 0.05);
  ASSERT_EQ(g.families.size(), 1u);
  EXPECT_EQ(g.families[0].family, "battery: code");
  EXPECT_EQ(g.verdict, Verdict::kPass);  // base is faster than cand
  const auto r = Cli({db, "--baseline", "base", "--candidate", "cand"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
}

TEST_F(Gate, BadInputIsExitTwoWithAMessage) {
  const std::string db = Write(Campaign(kBase, {101, 100, 102, 99}));
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{db, "--family", "battery: poetry"}, "measured no family 'battery: poetry'"},
      {{db, "--candidate", "v99"}, "has no arm 'v99' (arms: base, cand)"},
      {{db, "--baseline", "cand"}, "baseline and candidate are both 'cand'"},
      {{db, "--rule", "maybe"}, "--rule"},
      {{db, "--max-regression", "1.5"}, "--max-regression"},
      {{(dir_ / "missing.db").string()}, "missing.db: no such store"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = Cli(args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << r.out;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(dir_ / "missing.db"));
}

}  // namespace
}  // namespace tandem::reports
