// Latency families through the gate and the report: a candidate whose tail TTFT is 1.3×
// the baseline's fails on "battery: TTFT p99" while its decode passes; an A/A campaign passes
// or is inconclusive on every latency family; a p99 with too few requests is not estimable;
// with no families named, latency is reported and not gated.
#include <cmath>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "reports/gate.hpp"
#include "reports/markdown_report.hpp"
#include "store/campaign_record.hpp"
#include "store/store.hpp"
#include "tests/support/fixture_store.hpp"
#include "tests/support/run_command.hpp"

namespace tandem::reports {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A deterministic spread in [0, 1): the same for both arms, so only `factor` tells them apart.
double Spread(int i) { return std::fmod(0.618033988749895 * (i + 1), 1.0); }

// `requests` battery requests, each 41 tokens at 50 tokens/s after a first output of
// 100 ms × (1 + 5% spread) × ttft_factor.
json Battery(int session, int requests, double ttft_factor) {
  json samples = json::array();
  for (int k = 0; k < requests; ++k) {
    const double t0 = 10.0 * k, ttft = 0.1 * (1 + 0.05 * Spread(session * 97 + k)) * ttft_factor;
    json gaps = json::array();
    for (int g = 0; g < 40; ++g) gaps.push_back(0.02 * (1 + 0.05 * Spread(k * 41 + g)));
    samples.push_back({{"case_id", k % 2 == 0 ? "code" : "hello"},
                       {"weight", 1.0},
                       {"repeat", k / 2},
                       {"completion_tokens", 41},
                       {"t_start", t0},
                       {"t_first_output", t0 + ttft},
                       {"t_finish", t0 + ttft + 40 / (50 * (1 + 0.01 * Spread(session + k)))},
                       {"gaps", gaps},
                       {"content_sha256", "same"},
                       {"nonce", "Word: "},
                       {"checks", {{"stream_complete", true}, {"usage_consistent", true}, {"cache_bound", true}}}});
  }
  return samples;
}

json Campaign(double ttft_factor, int requests, const json& families) {
  json sessions = json::array();
  const std::string order = "ABBAABBA";
  for (int i = 0; i < 8; ++i) {
    const bool candidate = order[i] == 'B';
    sessions.push_back({{"order_index", i},
                        {"layout", "tp1"},
                        {"arm", candidate ? "cand" : "base"},
                        {"workloads",
                         {{{"name", "battery"},
                           {"kind", "battery"},
                           {"spec", {{"latency", {"ttft", "itl", "tpot", "e2e"}}}},
                           {"samples", Battery(i, requests, candidate ? ttft_factor : 1.0)}}}}});
  }
  json fixture = {{"arms", {{{"label", "base"}}, {{"label", "cand"}}}}, {"sessions", sessions}};
  fixture["campaign"]["gate"] = {{"baseline", "base"}, {"candidate", "cand"}, {"max_regression", 0.03}, {"families", families}};
  return fixture;
}

class LatencyGate : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("tandem-latency-gate-" + std::string(info->name()) + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const json& fixture) {
    testing::WriteFixtureStore(fixture, dir_ / "store.db");
    return (dir_ / "store.db").string();
  }
  static store::CampaignRecord Load(const std::string& db) { return LoadCampaignRecord(store::Store::Open(db), std::nullopt); }
  fs::path dir_;
};

const json kGated = {"battery: weighted decode", "battery: TTFT p99", "battery: TTFT p50"};

TEST_F(LatencyGate, ATailTtftThirtyPercentWorseFailsWhileDecodePasses) {
  const std::string db = Write(Campaign(1.3, 24, kGated));
  const auto r = testing::RunCommand(TANDEM_BIN, {"gate", db, "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const json g = json::parse(r.out);
  ASSERT_EQ(g["families"].size(), 3u) << r.out;
  std::map<std::string, json> by_family;
  for (const json& f : g["families"]) by_family[f["family"]] = f;
  EXPECT_EQ(by_family["battery: weighted decode"]["verdict"], "pass") << r.out;
  EXPECT_EQ(by_family["battery: TTFT p99"]["verdict"], "fail") << r.out;
  EXPECT_EQ(by_family["battery: TTFT p99"]["better"], "lower") << r.out;
  EXPECT_NEAR(by_family["battery: TTFT p99"]["ratio"].get<double>(), 1.3, 0.01) << r.out;
  EXPECT_EQ(by_family["battery: TTFT p50"]["verdict"], "fail") << r.out;
  // The same store read the other way round: the candidate is faster, and passes.
  const auto swapped = testing::RunCommand(TANDEM_BIN, {"gate", db, "--baseline", "cand", "--candidate", "base"});
  EXPECT_EQ(swapped.exit_code, 0) << swapped.out << swapped.err;
}

TEST_F(LatencyGate, AnAaCampaignPassesOrIsInconclusiveOnEveryLatencyFamily) {
  const json every = {"battery: TTFT p50", "battery: TTFT p90", "battery: TTFT p99", "battery: ITL p50",
                      "battery: ITL p90",  "battery: ITL p99",  "battery: TPOT p50", "battery: TPOT p90",
                      "battery: TPOT p99", "battery: E2E p50",  "battery: E2E p90",  "battery: E2E p99"};
  const GateResult g = EvaluateGate(Load(Write(Campaign(1.0, 24, every))), {});
  ASSERT_EQ(g.families.size(), 12u) << g.Text();
  for (const GateFamily& f : g.families) EXPECT_NE(f.verdict, Verdict::kFail) << f.family << "\n" << g.Text();
}

TEST_F(LatencyGate, AP99FromTooFewRequestsIsNotEstimable) {
  const GateResult g = EvaluateGate(Load(Write(Campaign(1.3, 12, {"battery: TTFT p99", "battery: TTFT p90"}))), {});
  ASSERT_EQ(g.families.size(), 2u) << g.Text();
  EXPECT_EQ(g.families[0].family, "battery: TTFT p90");  // report order: p50, p90, p99
  EXPECT_EQ(g.families[0].verdict, Verdict::kFail) << g.Text();
  EXPECT_EQ(g.families[1].verdict, Verdict::kInconclusive) << g.Text();
  EXPECT_NE(g.families[1].reason.find("not estimable: 4 of the baseline's sessions had fewer than 20 requests behind a p99"),
            std::string::npos)
      << g.Text();
  const std::string report = RenderReport(Load((dir_ / "store.db").string()), {});
  EXPECT_NE(report.find("| battery: TTFT p99 | not estimable (p99 needs ≥ 20 requests a session) n=0/0 |"), std::string::npos) << report;
}

TEST_F(LatencyGate, WithNoFamiliesNamedLatencyIsReportedNotGated) {
  const std::string db = Write(Campaign(1.3, 24, json::array()));
  const GateResult g = EvaluateGate(Load(db), {});
  for (const GateFamily& f : g.families) EXPECT_FALSE(f.family.find("TTFT") != std::string::npos) << f.family;
  EXPECT_EQ(g.verdict, Verdict::kPass) << g.Text();
  const std::string report = RenderReport(Load(db), {});
  EXPECT_NE(report.find("### A/B: cand vs base, latency families (lower is better; a ratio below 1 is a gain)"), std::string::npos)
      << report;
  EXPECT_NE(report.find("| battery: TTFT p99 | **1.3"), std::string::npos) << report;
  EXPECT_NE(report.find("** worse n=4/4 |"), std::string::npos) << report;
  // The decode A/B table keeps to rates.
  const std::size_t decode_table = report.find("## A/B: cand vs base");
  ASSERT_NE(decode_table, std::string::npos) << report;
  EXPECT_EQ(report.substr(decode_table, report.find("\n## ", decode_table + 1) - decode_table).find("TTFT"), std::string::npos) << report;
}

}  // namespace
}  // namespace tandem::reports
