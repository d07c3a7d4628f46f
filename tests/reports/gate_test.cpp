// `tandem gate` on recorded campaigns: pass, fail, inconclusive, quality failure and
// bad input, through the real executable (exit codes, text, JSON) and the library.
#include "reports/gate.hpp"

#include <algorithm>
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
  EXPECT_NE(r.out.find("the interval reaches across 0.970"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("to decide: "), std::string::npos) << r.out;
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

  // A candidate whose greedy output varies between its own sessions is not deterministic:
  // inconclusive. Differing from the baseline fails only when the campaign requires
  // identical output.
  json changed = Campaign(kBase, {101, 100, 102, 99});
  changed["sessions"][2]["workloads"][0]["samples"][0]["content_sha256"] = "other";
  const GateResult g = Evaluate(Write(changed, "changed.db"));
  EXPECT_EQ(g.verdict, Verdict::kInconclusive);
  EXPECT_TRUE(g.quality_failures.empty());
  ASSERT_EQ(g.quality_doubts.size(), 1u);
  EXPECT_NE(g.quality_doubts[0].find("the candidate's greedy output varies between its own sessions for 1 prompt"), std::string::npos)
      << g.quality_doubts[0];
  json other = Campaign(kBase, {101, 100, 102, 99});  // deterministic, but not the baseline's text
  for (json& s : other["sessions"]) {
    if (s["arm"] == "cand") s["workloads"][0]["samples"][0]["content_sha256"] = "other";
  }
  EXPECT_EQ(Evaluate(Write(other, "other.db")).verdict, Verdict::kPass);
  other["campaign"] = {{"gate", {{"require_identical_greedy", true}}}};
  const GateResult identical = Evaluate(Write(other, "identical.db"));
  EXPECT_EQ(identical.verdict, Verdict::kFail);
  ASSERT_EQ(identical.quality_failures.size(), 1u);
  EXPECT_NE(identical.quality_failures[0].find("greedy output differs from the baseline's (gate.require_identical_greedy) on 1 prompt "
                                               "(4 candidate samples); first: tp4 battery code repeat 0 (candidate #"),
            std::string::npos)
      << identical.quality_failures[0];

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

TEST_F(Gate, SeveralFamiliesShareTheFailSideAlphaByHolm) {
  // One battery gives two families (weighted decode and the case): both gated, Holm.
  const std::string db = Write(Campaign(kBase, {85, 86.5, 84, 86}));
  const auto r = Cli({db, "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["multiplicity"], "holm");
  EXPECT_EQ(j["gated_families"], 2);
  ASSERT_EQ(j["families"].size(), 2u);
  // The first rejection is tested at 0.025 / 2, the second at 0.025 / 1.
  std::vector<double> budgets;
  for (const json& f : j["families"]) budgets.push_back(f["fail_budget"].get<double>());
  std::sort(budgets.begin(), budgets.end());
  EXPECT_NEAR(budgets[0], 0.0125, 1e-12) << r.out;
  EXPECT_NEAR(budgets[1], 0.025, 1e-12) << r.out;
  EXPECT_NE(Cli({db}).out.find("2 gated families: the fail tests share alpha 0.025 by Holm"), std::string::npos);
}

// 16 sessions ABBA, looks after every block of 4 (what `until: decided` stores).
json Sequential(const std::vector<double>& a, const std::vector<double>& b) {
  json c = Campaign(a, b);
  c["campaign"] = {{"gate", {{"families", {"battery: weighted decode"}}, {"looks", {4, 8, 12, 16}}, {"block", 4}, {"sequential", true}}}};
  return c;
}

TEST_F(Gate, ASequentialCampaignDecidesEarlyOnlyOnAStrongResult) {
  // Decode 20% slower and steady: decided at the first look that can show it.
  const std::vector<double> base = {100, 101, 99, 100.5, 100, 99.5, 100.2, 100.8};
  std::vector<double> slow, same;
  for (double v : base) slow.push_back(0.8 * v);
  const GateResult fail = Evaluate(Write(Sequential(base, slow), "slow.db"));
  ASSERT_EQ(fail.families.size(), 1u);
  EXPECT_EQ(fail.families[0].verdict, Verdict::kFail) << fail.Text();
  EXPECT_EQ(fail.families[0].planned_looks, 4);
  EXPECT_LT(fail.families[0].look, 4) << fail.Text();
  EXPECT_LT(fail.families[0].fail_level, 0.025);  // an early look spends little alpha
  EXPECT_NE(fail.Text().find("decided on the interval"), std::string::npos) << fail.Text();

  // Equal but noisy: the early looks' levels (O'Brien–Fleming) are far below 0.025, so
  // what a fixed 95% interval would call a pass at look 2 is not one here.
  for (double v : {100.0, 104.0, 96.0, 102.0, 98.0, 101.0, 99.0, 100.0}) same.push_back(v * 1.03);
  const GateResult open = Evaluate(Write(Sequential(base, same), "same.db"));
  ASSERT_EQ(open.families.size(), 1u);
  const GateFamily& f = open.families[0];
  EXPECT_EQ(f.planned_looks, 4);
  EXPECT_LE(f.pass_level, 0.025);
}

TEST_F(Gate, AnInconclusiveFamilySaysHowManySessionsWouldDecideIt) {
  // About 2% faster with 5% noise: 4 sessions cannot clear 0.97; a few more blocks can.
  const std::string db = Write(Campaign({100, 106, 94, 101}, {104, 98, 108, 102}));
  const auto r = Cli({db, "--family", "battery: weighted decode", "--json"});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  const json f = json::parse(r.out)["families"][0];
  EXPECT_EQ(f["verdict"], "inconclusive");
  ASSERT_TRUE(f.contains("sessions_needed_per_arm")) << f.dump();
  EXPECT_GT(f["sessions_needed_per_arm"].get<int>(), 4);
  const std::string command = f["extend_command"];
  EXPECT_EQ(command.rfind("tandem run --resume " + db + " --extend ", 0), 0u) << command;
  EXPECT_EQ(std::stoi(command.substr(command.rfind(' ') + 1)) % 4, 0) << command;  // whole ABBA blocks
}

// Host facts as the harness stores them, for a Zen 4 and a Zen 5 host of one model name.
json Zen(int family) {
  return {{"cpu_model", "AMD EPYC"},
          {"cpu_vendor", "AuthenticAMD"},
          {"cpu_family", std::to_string(family)},
          {"cpu_model_number", family == 26 ? "2" : "17"},
          {"cpu_stepping", "1"},
          {"logical_cpus", 2},
          {"cpu_isa", family == 26 ? json{"avx2", "avx512f", "avx512_bf16"} : json{"avx2", "avx512f"}}};
}

TEST_F(Gate, ArmsSpreadUnlikeOverChangedHardwareAreInDoubt) {
  // Equal rates: the comparison itself would pass.
  json c = Campaign({100, 102, 99, 101, 100, 101}, {101, 100, 102, 99, 100, 101});
  // Sessions 1-2 (A B) on Zen 4, the rest on Zen 5: baseline 1 of 6 on Zen 4, candidate 1 of 6.
  for (std::size_t i = 0; i < c["sessions"].size(); ++i) c["sessions"][i]["host"] = Zen(i < 2 ? 25 : 26);
  GateResult g = Evaluate(Write(c, "alike.db"));
  EXPECT_TRUE(g.quality_doubts.empty()) << g.quality_doubts[0];
  EXPECT_EQ(g.verdict, Verdict::kPass);
  // The first three sessions (A B B) on Zen 4: baseline 1 of 6 there, candidate 2 of 6, a
  // difference of 1/6 in their shares.
  for (std::size_t i = 0; i < c["sessions"].size(); ++i) c["sessions"][i]["host"] = Zen(i < 3 ? 25 : 26);
  g = Evaluate(Write(c, "lopsided.db"));
  EXPECT_EQ(g.verdict, Verdict::kInconclusive);
  ASSERT_EQ(g.quality_doubts.size(), 1u);
  const std::string& doubt = g.quality_doubts[0];
  EXPECT_NE(doubt.find("layout tp4 ran on 2 different machines"), std::string::npos) << doubt;
  EXPECT_NE(doubt.find("AuthenticAMD family 25 model 17 stepping 1, 2 logical CPUs, avx2 avx512f): baseline 1 of 6, candidate 2 of 6"),
            std::string::npos)
      << doubt;
  EXPECT_NE(doubt.find("family 26 model 2 stepping 1, 2 logical CPUs, avx2 avx512f avx512_bf16): baseline 5 of 6, candidate 4 of 6"),
            std::string::npos)
      << doubt;
  // The report names the machines and the sessions each ran, per arm.
  const auto report = testing::RunCommand(TANDEM_BIN, {"report", (dir_ / "lopsided.db").string()});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("**The hardware changed during the campaign**: its completed sessions ran on 2 different machines"),
            std::string::npos)
      << report.out;
  EXPECT_NE(report.out.find("| tp4 | AMD EPYC, AuthenticAMD family 25 model 17 stepping 1, 2 logical CPUs, avx2 avx512f | 1 | 2 |"),
            std::string::npos)
      << report.out;
  EXPECT_NE(report.out.find("- cand against base: layout tp4 ran on 2 different machines"), std::string::npos) << report.out;
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
