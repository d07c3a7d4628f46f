// The CI self-test of the whole pipeline: real campaigns on the tiny preset, then
// `tandem gate`. The same arm against itself (A/A) must pass; against itself with
// `--debug-slowdown 0.15` (decode deliberately 15% slower) it must fail. Runs alone
// (RUN_SERIAL): other tests on the same two cores would be noise it has to see through.
// 40 sessions a campaign: with 24, a noisy shared host left the slowed campaign's
// interval too wide (±10–12%) to prove the slowdown; 40 gave ±5–7% there. On a host
// noisier still, the gate is right to call 40 sessions inconclusive; the test's
// point is that enough sessions prove the slowdown, so an inconclusive slowed
// campaign is run again with twice the sessions (docs/reports.md).
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <sched.h>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_command.hpp"

namespace tandem::harness {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class GateSelfTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(fs::temp_directory_path() / fmt::format("tandem-gate-selftest-{}", ::getpid()));
    fs::remove_all(*root_);
    fs::create_directories(*root_);
    const auto r =
        testing::RunCommand(TANDEM_RT_BIN, {"init-model", "--preset", "tiny", "--seed", "11", "--out", (*root_ / "model").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    if (std::getenv("TANDEM_KEEP_SELFTEST") == nullptr) fs::remove_all(*root_);
    delete root_;
  }

  // Runs an A/A campaign whose second arm adds `candidate_options` (", --flag, value");
  // returns the store. Drafting is off in both arms: its exploratory rounds are noise
  // this test does not need.
  static constexpr int kSessions = 40;  // per campaign; twice that for a rerun
  static fs::path Run(const std::string& name, const std::string& candidate_options, int sessions = kSessions) {
    const fs::path file = *root_ / (name + ".yaml");
    std::ofstream(file) << fmt::format(R"(name: {name}
model: {{path: {model}}}
arms:
  - label: base
    source: {{kind: binary, coordinator: {bin}}}
    options: [--draft, "off"]
  - label: cand
    source: {{kind: binary, coordinator: {bin}}}
    options: [--draft, "off"{options}]
layouts:
  - {{name: single, workers: 0, coordinator_threads: 1{pin}}}
sessions: {{per_layout: {sessions}, order: ABBA}}
warmup:
  - {{name: warmup, kind: battery, cases: [code], max_tokens: 32, counting: false}}
workloads:
  - {{name: battery, kind: battery, cases: [code, fable], repeats: 5, max_tokens: 256, counting: false}}
corpus: {corpus}
store: {store}
gate: {{baseline: base, candidate: cand, families: ["battery: weighted decode"], max_regression: 0.03, rule: proven}}
timeouts: {{launch_s: 60, request_s: 60, teardown_grace_s: 5}}
)",
                                       fmt::arg("name", name), fmt::arg("model", (*root_ / "model").string()),
                                       fmt::arg("bin", TANDEM_RT_BIN), fmt::arg("options", candidate_options), fmt::arg("pin", Pinning()),
                                       fmt::arg("sessions", sessions),
                                       fmt::arg("corpus", std::string(TANDEM_SOURCE_DIR) + "/campaigns/corpus.yaml"),
                                       fmt::arg("store", (*root_ / (name + ".db")).string()));
    const auto r = testing::RunCommand(TANDEM_BIN, {"run", file.string(), "--quiet"}, 600s);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return *root_ / (name + ".db");
  }
  // The engine thread on the last CPU this process may use, away from the harness's
  // own threads: fewer migrations, less session-to-session noise.
  static std::string Pinning() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0 || CPU_COUNT(&set) < 2) return "";
    int last = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) last = cpu;
    }
    return fmt::format(", coordinator_cpus: \"{}\"", last);
  }
  static fs::path* root_;
};

fs::path* GateSelfTest::root_ = nullptr;

TEST_F(GateSelfTest, AaPassesAndAFifteenPercentSlowdownFails) {
  const fs::path aa = Run("aa", "");
  const auto pass = testing::RunCommand(TANDEM_BIN, {"gate", aa.string(), "--json"});
  EXPECT_EQ(pass.exit_code, 0) << pass.out << pass.err;
  const auto a = nlohmann::json::parse(pass.out);
  EXPECT_EQ(a["verdict"], "pass") << pass.out;

  fs::path slow = Run("slow", ", --debug-slowdown, \"0.15\"");
  auto fail = testing::RunCommand(TANDEM_BIN, {"gate", slow.string(), "--json"});
  if (const auto first = nlohmann::json::parse(fail.out); first["verdict"] != "fail" && first["families"].size() == 1) {
    fmt::print("slowed, {} sessions: ratio {:.3f} ({:.3f}–{:.3f}), not proven; again with {}\n", kSessions,
               first["families"][0]["ratio"].get<double>(), first["families"][0]["lo"].get<double>(),
               first["families"][0]["hi"].get<double>(), 2 * kSessions);
    slow = Run("slow-rerun", ", --debug-slowdown, \"0.15\"", 2 * kSessions);
    fail = testing::RunCommand(TANDEM_BIN, {"gate", slow.string(), "--json"});
  }
  EXPECT_EQ(fail.exit_code, 1) << fail.out << fail.err;
  const auto f = nlohmann::json::parse(fail.out);
  EXPECT_EQ(f["verdict"], "fail") << fail.out;
  ASSERT_EQ(f["families"].size(), 1u);
  // The measured ratio is near the 0.85 the slowdown makes (0.79–0.85 seen on a
  // 2-core machine; other load on it pushes the ratio down, never up).
  EXPECT_NEAR(f["families"][0]["ratio"].get<double>(), 0.84, 0.07) << fail.out;
  EXPECT_TRUE(f["quality_failures"].empty()) << fail.out;

  // Both reports render, and the slowed arm is disclosed.
  const auto report = testing::RunCommand(TANDEM_BIN, {"report", slow.string()});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("ran with `--debug-slowdown 0.15`"), std::string::npos);
  fmt::print("A/A: ratio {:.3f} ({:.3f}–{:.3f}); slowed: ratio {:.3f} ({:.3f}–{:.3f})\n", a["families"][0]["ratio"].get<double>(),
             a["families"][0]["lo"].get<double>(), a["families"][0]["hi"].get<double>(), f["families"][0]["ratio"].get<double>(),
             f["families"][0]["lo"].get<double>(), f["families"][0]["hi"].get<double>());
}

}  // namespace
}  // namespace tandem::harness
