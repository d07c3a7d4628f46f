// Startup and memory families from stored launch records: each phase and each process's
// memory is a family (lower is better); a discarded launch is not scored; a candidate that
// starts 1.5× slower fails the gate on startup; an A/A campaign does not fail; the report's
// Startup and Memory sections; and a malformed record is a clear error naming the row.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/input_error.hpp"
#include "reports/gate.hpp"
#include "reports/markdown_report.hpp"
#include "store/campaign_record.hpp"
#include "store/session_startup.hpp"
#include "store/store.hpp"
#include "tests/support/fixture_store.hpp"

namespace tandem::reports {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

double Spread(int i) { return std::fmod(0.618033988749895 * (i + 1), 1.0); }

// Ten ABBA sessions; the candidate's launch phases take `factor` times the baseline's; the
// first session of each arm is a discarded launch (10× slower, as a cold cache can be).
json Campaign(double factor, const json& families) {
  json sessions = json::array();
  const std::string order = "ABBAABBAAB";
  int seen[2] = {0, 0};
  for (int i = 0; i < 10; ++i) {
    const bool candidate = order[i] == 'B';
    const bool discarded = seen[candidate ? 1 : 0]++ == 0;
    const double f = (candidate ? factor : 1.0) * (1 + 0.02 * Spread(i)) * (discarded ? 10 : 1);
    json startup = {{"listening", json::array({json::array({"worker-0", 0.5 * f}), json::array({"worker-1", 0.6 * f}),
                                               json::array({"coordinator", 1.2 * f})})},
                    {"ready_s", 1.3 * f},
                    {"first_output_s", 1.5 * f},
                    {"resident_bytes", json::array({json::array({"coordinator", 400u << 20}), json::array({"worker-0", 100u << 20}),
                                                    json::array({"worker-1", 110u << 20})})},
                    {"gpus", {{{"host", "local"}, {"index", 0}, {"uuid", "GPU-1"}, {"used_mib", 2048 + i}, {"total_mib", 81559}}}}};
    if (discarded) startup["discarded"] = true;
    sessions.push_back({{"order_index", i},
                        {"layout", "tp2"},
                        {"arm", candidate ? "cand" : "base"},
                        {"startup", startup},
                        {"workloads",
                         {{{"name", "battery"},
                           {"kind", "battery"},
                           {"samples",
                            {{{"case_id", "code"},
                              {"weight", 1.0},
                              {"completion_tokens", 101},
                              {"t_first_output", 10.0},
                              {"t_finish", 12.0 + 0.01 * Spread(i + 7)},
                              {"checks", {{"stream_complete", true}, {"usage_consistent", true}, {"cache_bound", true}}}}}}}}}});
  }
  json fixture = {{"arms", {{{"label", "base"}}, {{"label", "cand"}}}}, {"sessions", sessions}};
  fixture["campaign"]["gate"] = {{"baseline", "base"}, {"candidate", "cand"}, {"max_regression", 0.03}, {"families", families}};
  return fixture;
}

class StartupGate : public ::testing::Test {
 protected:
  store::CampaignRecord Load(const json& fixture) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const fs::path db =
        fs::temp_directory_path() / ("tandem-startup-" + std::string(info->name()) + "-" + std::to_string(::getpid()) + ".db");
    fs::remove(db);
    testing::WriteFixtureStore(fixture, db);
    store::CampaignRecord r = LoadCampaignRecord(store::Store::Open(db), std::nullopt);
    fs::remove(db);
    return r;
  }
};

const json kGated = {"battery: weighted decode", "startup: ready (/health, /v1/models)"};

TEST_F(StartupGate, EveryPhaseAndProcessIsAFamilyAndTheDiscardedLaunchIsNot) {
  const store::CampaignRecord r = Load(Campaign(1.0, kGated));
  std::map<std::string, const store::FamilyScores*> by_family;
  for (const store::FamilyScores& f : r.families) by_family[f.family] = &f;
  for (const char* family :
       {"startup: workers listening (the last)", "startup: coordinator listening", "startup: ready (/health, /v1/models)",
        "startup: first output", "memory: coordinator RSS", "memory: workers RSS (sum)", "memory: GPU 0 used (local)"}) {
    ASSERT_TRUE(by_family.contains(family)) << family;
    const store::FamilyScores& f = *by_family[family];
    EXPECT_EQ(f.direction, store::Direction::kLowerIsBetter) << family;
    EXPECT_EQ(f.by_arm.at("base").size(), 4u) << family << ": five sessions, the first discarded";
  }
  // The last worker, not the first; the workers' memory summed; the baseline's third
  // session (order 4) is its second scored one.
  EXPECT_NEAR(by_family["startup: workers listening (the last)"]->by_arm.at("base")[1], 0.6 * (1 + 0.02 * Spread(4)), 1e-12);
  EXPECT_EQ(by_family["memory: workers RSS (sum)"]->by_arm.at("base")[0], static_cast<double>(210u << 20));
  EXPECT_EQ(by_family["memory: GPU 0 used (local)"]->by_arm.at("base")[0], 2048 + 3);
}

TEST_F(StartupGate, ACandidateStartingOneAndAHalfTimesSlowerFailsOnStartupWhileDecodePasses) {
  const GateResult g = EvaluateGate(Load(Campaign(1.5, kGated)), {});
  ASSERT_EQ(g.families.size(), 2u) << g.Text();
  EXPECT_EQ(g.families[0].family, "battery: weighted decode");
  EXPECT_EQ(g.families[0].verdict, Verdict::kPass) << g.Text();
  EXPECT_EQ(g.families[1].verdict, Verdict::kFail) << g.Text();
  EXPECT_NEAR(*g.families[1].ratio, 1.5, 0.02) << g.Text();
  EXPECT_EQ(g.verdict, Verdict::kFail);
  // Named by its id, the same.
  const json id = {{"workload", "startup"}, {"metric", "startup"}, {"case", "ready"}};
  EXPECT_EQ(EvaluateGate(Load(Campaign(1.5, json::array({id}))), {}).verdict, Verdict::kFail);
}

TEST_F(StartupGate, AnAaCampaignDoesNotFailAnyStartupOrMemoryFamily) {
  json every = json::array();
  for (const store::FamilyScores& f : Load(Campaign(1.0, kGated)).families) every.push_back(f.family);
  const GateResult g = EvaluateGate(Load(Campaign(1.0, every)), {});
  EXPECT_EQ(g.families.size(), every.size()) << g.Text();
  for (const GateFamily& f : g.families) EXPECT_NE(f.verdict, Verdict::kFail) << f.family << "\n" << g.Text();
}

TEST_F(StartupGate, TheReportHasStartupAndMemorySectionsAndNoneWithoutLaunchRecords) {
  const std::string report = RenderReport(Load(Campaign(1.5, kGated)), {});
  EXPECT_NE(report.find("## Startup"), std::string::npos) << report;
  // The cell is the median (min–max) of each arm's scored sessions, from the fixture's own formula.
  const auto cell = [](double factor, const std::string& arm) {
    const std::string order = "ABBAABBAAB";
    const char letter = arm == "base" ? 'A' : 'B';
    std::vector<double> ready;
    bool first = true;
    for (int i = 0; i < 10; ++i) {
      if (order[i] != letter) continue;
      if (!first) ready.push_back(1.3 * factor * (1 + 0.02 * Spread(i)));
      first = false;
    }
    std::sort(ready.begin(), ready.end());
    return fmt::format("{:.2f} ({:.2f}–{:.2f}) n=4", (ready[1] + ready[2]) / 2, ready.front(), ready.back());
  };
  EXPECT_NE(report.find(fmt::format("| startup: ready (/health, /v1/models) | {} | {} |", cell(1.0, "base"), cell(1.5, "cand"))),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("### A/B: cand vs base, startup (lower is better; a ratio below 1 is a gain)"), std::string::npos) << report;
  EXPECT_NE(report.find("## Memory"), std::string::npos) << report;
  EXPECT_NE(report.find("| memory: coordinator RSS | 400 (400–400) n=4 | 400 (400–400) n=4 |"), std::string::npos) << report;
  json bare = Campaign(1.5, kGated);
  for (json& s : bare["sessions"]) s.erase("startup");
  const std::string without = RenderReport(Load(bare), {});
  EXPECT_EQ(without.find("## Startup"), std::string::npos) << without;
  EXPECT_EQ(without.find("## Memory"), std::string::npos) << without;
}

TEST(SessionStartup, RoundTripsAndRefusesWhatIsNotALaunchRecord) {
  store::SessionStartup s;
  s.discarded = true;
  s.listening = {{"worker-0", 0.5}, {"coordinator", 1.0}};
  s.ready_s = 1.25;
  s.first_output_s = 1.5;
  s.resident_bytes = {{"coordinator", 123456789}};
  s.gpus = {{"local", 1, "GPU-x", 1000, 80000}};
  s.server_phases = {{"checkpoint_opened", 0.2}, {"ready", 0.9}};
  s.weight_bytes = 6304288;
  s.worker_loads = {{"worker-0", 0.3}, {"worker-1", 0.4}};
  EXPECT_EQ(store::SessionStartup::FromJson(s.ToJson(), "here"), s);
  EXPECT_EQ(store::SessionStartup::FromJson("{}", "here"), store::SessionStartup{});
  const auto refusal = [](const std::string& text) {
    try {
      store::SessionStartup::FromJson(text, "x.db: session 3: startup_json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(refusal("[1]"), "x.db: session 3: startup_json: not a JSON object: [1]");
  EXPECT_EQ(refusal(R"({"ready_s": -1})"), "x.db: session 3: startup_json: 'ready_s' is -1, not a number of seconds ≥ 0");
  EXPECT_EQ(refusal(R"({"listening": {"coordinator": 1}})"),
            R"(x.db: session 3: startup_json: 'listening' is {"coordinator":1}, not a list of [role, value])");
  EXPECT_EQ(refusal(R"({"resident_bytes": [["coordinator", "big"]]})"),
            R"(x.db: session 3: startup_json: 'resident_bytes.coordinator' is "big", not a number of bytes)");
  EXPECT_EQ(refusal(R"({"worker_loads": [["worker-0", -2]]})"),
            "x.db: session 3: startup_json: 'worker_loads.worker-0' is -2, not a number of seconds ≥ 0");
  EXPECT_EQ(refusal(R"({"gpus": [{"index": "zero"}]})"), R"(x.db: session 3: startup_json: gpus: 'index' is "zero", not a whole number)");
}

}  // namespace
}  // namespace tandem::reports
