// The harness's clocks end to end: a real campaign against servers that stream at an
// exactly known pace (tests/support/pace_server.cpp), so every figure is known in advance.
// Runs alone (RUN_SERIAL): its tolerances (0.5% per request, 2 ms TTFT) are about the
// harness, not about other tests competing for the two cores.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "store/store.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/run_command.hpp"
#include "tests/support/scoped_env.hpp"

namespace tandem::harness {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

class PaceCampaign : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("tandem-pace-{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const auto r =
        testing::RunCommand(TANDEM_RT_BIN, {"init-model", "--preset", "tiny", "--seed", "3", "--out", (dir_ / "model").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// A server that answers at a known pace, started for a test; its URL.
struct PaceServer {
  PaceServer(double rate, double first_ms, const fs::path& err)
      : PaceServer({"--rate", fmt::format("{}", rate), "--first-ms", fmt::format("{}", first_ms), "--tokens", "65"}, err) {}
  PaceServer(const std::vector<std::string>& args, const fs::path& err) : process(TANDEM_PACE_SERVER, args, err.string()) {
    for (int i = 0; i < 20 && url.empty(); ++i) {
      const auto line = process.ReadLine(3s);
      if (line && line->find("listening on ") != std::string::npos) url = line->substr(line->find("http://"));
    }
  }
  testing::ChildProcess process;
  std::string url;
};

TEST_F(PaceCampaign, ThePaceServerIsMeasuredAtItsExactPace) {
  // Two servers streaming at exactly 40 and 50 tokens/s after a 40 ms first token: every
  // figure the harness derives is known in advance. 65 tokens: 1.3–1.6 s of decode, so the
  // few milliseconds a 2-core machine may take to wake a client thread stay small (with 33
  // tokens one request in 224 once came out 0.61% off); the median request is held to 0.25%.
  constexpr double kFirstMs = 40;
  PaceServer slow(40, kFirstMs, dir_ / "slow.err"), fast(50, kFirstMs, dir_ / "fast.err");
  ASSERT_FALSE(slow.url.empty());
  ASSERT_FALSE(fast.url.empty());
  const fs::path file = dir_ / "pace.yaml";
  std::ofstream(file) << fmt::format(
      R"(name: pace
model: {{path: {model}}}
arms:
  - {{label: slow, source: {{kind: external, base_url: "{slow}"}}, revision: r40}}
  - {{label: fast, source: {{kind: external, base_url: "{fast}"}}, revision: r50}}
layouts:
  - {{name: loopback, workers: 0}}
sessions: {{per_layout: 4, order: ABBA}}
workloads:
  - {{name: battery, kind: battery, cases: [code, hello], repeats: 3, max_tokens: 65, counting: false}}
  - {{name: sweep, kind: concurrency, cases: [code], levels: [1, 16], repeats: 2, max_tokens: 65}}
quality: {{cache_bound: 4}}
corpus: {corpus}
store: {store}
gate: {{baseline: slow, candidate: fast, families: ["battery: weighted decode"]}}
timeouts: {{launch_s: 30, request_s: 30, teardown_grace_s: 5}}
)",
      fmt::arg("model", (dir_ / "model").string()), fmt::arg("slow", slow.url), fmt::arg("fast", fast.url),
      fmt::arg("corpus", std::string(TANDEM_SOURCE_DIR) + "/campaigns/corpus.yaml"), fmt::arg("store", (dir_ / "store.db").string()));
  const auto r = testing::RunCommand(TANDEM_BIN, {"run", file.string(), "--quiet"}, 300s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const store::Store store = store::Store::Open(dir_ / "store.db");
  store::Statement s(store.handle(),
                     "SELECT a.label, x.level, x.batch, se.id, x.completion_tokens, x.t_start, x.t_first_output, x.t_finish, x.valid "
                     "FROM sample x JOIN session se ON se.id = x.session_id JOIN arm a ON a.id = se.arm_id "
                     "JOIN workload_run w ON w.id = x.workload_run_id WHERE w.warmup = 0");
  std::map<std::string, double> rate_of = {{"slow", 40}, {"fast", 50}};
  std::map<std::tuple<std::string, std::int64_t, int>, std::vector<std::array<double, 3>>> c16;  // (arm, session, batch) → timings
  std::map<std::string, std::vector<double>> ttft_c1, ttft_c16;
  double worst_rate = 0;
  std::map<std::string, std::vector<double>> rate_errors;  // per arm, rate / pace − 1
  int samples = 0;
  while (s.Step()) {
    ++samples;
    EXPECT_EQ(s.Int(8), 1) << "an invalid sample";
    const std::string arm = s.Text(0);
    const double ct = static_cast<double>(s.Int(4)), t0 = s.Double(5), first = s.Double(6), finish = s.Double(7);
    EXPECT_EQ(ct, 65);
    const double rate = (ct - 1) / (finish - first);
    worst_rate = std::max(worst_rate, std::abs(rate / rate_of[arm] - 1));
    // Each request within 2%: a shared 2-core VM once took ~10 ms to wake the client for
    // some last tokens (0.88% off on an otherwise idle CI machine); the median, below, is
    // what must be exact.
    EXPECT_NEAR(rate / rate_of[arm], 1.0, 0.02) << arm << " request rate " << rate << " at C" << s.Int(1);
    rate_errors[arm].push_back(rate / rate_of[arm] - 1);
    (s.Int(1) == 16 ? ttft_c16 : ttft_c1)[arm].push_back(first - t0);
    if (s.Int(1) == 16) c16[{arm, s.Int(3), static_cast<int>(s.Int(2))}].push_back({ct, first, finish});
  }
  EXPECT_EQ(samples, 4 * (2 * 3 + 2 * (1 + 16)));
  for (auto& [arm, v] : ttft_c1) {
    std::sort(v.begin(), v.end());
    EXPECT_NEAR(1e3 * v[v.size() / 2], kFirstMs, 2.0) << arm << " median TTFT, one request at a time";
  }
  for (auto& [arm, errors] : rate_errors) {
    std::sort(errors.begin(), errors.end());
    EXPECT_NEAR(errors[errors.size() / 2], 0.0, 0.0025) << arm << ": the median request's rate is not the server's pace";
  }
  double worst_c16 = 0, worst_stagger = 0;
  // Per arm, each batch's aggregate against what a server at exactly R gives for the
  // batch's own first outputs: the requests of a batch reach the server a few ms apart
  // (the client starts 16 streams; 1–2 ms on one host, 3–9 on another), and the span
  // the aggregate divides by starts at the first of them, so against 16·R alone a
  // batch reads short by that stagger over ~1.3 s (0.4–0.6% on a Zen 5 VM), which is
  // the request pattern, not the harness's clock.
  std::map<std::string, std::vector<double>> c16_ratios;
  for (const auto& [key, batch] : c16) {
    ASSERT_EQ(batch.size(), 16u);
    const double pace = rate_of[std::get<0>(key)];  // the batch's own server
    double tokens = 0, lo = 1e300, hi = 0, paced_end = 0, first_last = 0;
    for (const auto& [ct, first, finish] : batch) {
      tokens += ct - 1;
      lo = std::min(lo, first);
      hi = std::max(hi, finish);
      paced_end = std::max(paced_end, first + (ct - 1) / pace);
      first_last = std::max(first_last, first);
    }
    const double aggregate = tokens / (hi - lo), paced = tokens / (paced_end - lo);
    const double want = 16 * pace;
    worst_c16 = std::max(worst_c16, 1 - aggregate / want);
    worst_stagger = std::max(worst_stagger, first_last - lo);
    // Each batch within 5%: one request's last tokens read late stretch its batch's span
    // (CI on a shared 2-core VM twice had a batch 2.1–2.3% short, its largest TTFT 55–71 ms
    // against 40); the median batch, below, is what must be exact. (A real fault, a listen
    // backlog dropping SYNs, gave 44–49%.)
    EXPECT_NEAR(aggregate / want, 1.0, 0.05) << "C16 aggregate " << aggregate << " of " << want;
    c16_ratios[std::get<0>(key)].push_back(aggregate / paced);
  }
  for (auto& [arm, ratios] : c16_ratios) {
    std::sort(ratios.begin(), ratios.end());
    const double median = (ratios[(ratios.size() - 1) / 2] + ratios[ratios.size() / 2]) / 2;
    fmt::print("{}: median C16 batch at {:.3f}% of the paced aggregate\n", arm, 100 * median);
    EXPECT_NEAR(median, 1.0, 0.005) << arm
                                    << ": the median C16 batch's aggregate is not what the server's pace gives from its first outputs";
  }
  std::vector<double> all16;
  for (const auto& [arm, v] : ttft_c16) all16.insert(all16.end(), v.begin(), v.end());
  std::sort(all16.begin(), all16.end());
  fmt::print(
      "pace server: worst per-request rate error {:.3f}%; C16 aggregate at most {:.2f}% below 16·R (first outputs of a batch at most "
      "{:.1f} ms apart); C16 TTFT median {:.1f} ms, max {:.1f} ms (first token sent at {} ms)\n",
      100 * worst_rate, 100 * worst_c16, 1e3 * worst_stagger, 1e3 * all16[all16.size() / 2], 1e3 * all16.back(), kFirstMs);
  // The weighted decode ratio is the pace ratio, 50 / 40.
  const auto gate = testing::RunCommand(TANDEM_BIN, {"gate", (dir_ / "store.db").string(), "--json"}, 60s);
  const json g = json::parse(gate.out);
  ASSERT_EQ(g["families"].size(), 1u) << gate.out;
  EXPECT_NEAR(g["families"][0]["ratio"].get<double>(), 1.25, 0.25 * 0.005) << gate.out;
  EXPECT_EQ(g["verdict"], "pass") << gate.out;
}

// Startup and latency as measured families: two launched servers that stream at the same pace
// after the same 250 ms first token, one starting in 1.0 s and one in 1.5 s. The harness
// measures each launch's ready time and each request's TTFT within 2% of what the servers do,
// and the gate fails the slower starter on startup while its decode passes.
TEST_F(PaceCampaign, StartupAndTtftAreMeasuredAndGated) {
  const double kFirstMs = 250, kFastStartMs = 1000, kSlowStartMs = 1500;
  const auto command = [&](double startup_ms) {
    return fmt::format("{} --port {{port}} --startup-ms {} --first-ms {} --rate 50 --tokens 9", TANDEM_PACE_SERVER, startup_ms, kFirstMs);
  };
  const fs::path file = dir_ / "startup.yaml";
  std::ofstream(file) << fmt::format(
      R"(name: startup
model: {{path: {model}}}
arms:
  - {{label: fast, source: {{kind: command, command: "{fast}"}}, revision: f}}
  - {{label: slow, source: {{kind: command, command: "{slow}"}}, revision: s}}
layouts:
  - {{name: loopback, workers: 0}}
sessions: {{per_layout: 8, order: ABBA}}
startup: {{discard: 0}}
workloads:
  - {{name: battery, kind: battery, cases: [code, hello], repeats: 2, max_tokens: 9, counting: false}}
quality: {{cache_bound: 4}}
corpus: {corpus}
store: {store}
gate:
  baseline: fast
  candidate: slow
  families: ["battery: weighted decode", {{workload: startup, metric: startup, case: ready}}]
timeouts: {{launch_s: 30, request_s: 30, teardown_grace_s: 5}}
)",
      fmt::arg("model", (dir_ / "model").string()), fmt::arg("fast", command(kFastStartMs)), fmt::arg("slow", command(kSlowStartMs)),
      fmt::arg("corpus", std::string(TANDEM_SOURCE_DIR) + "/campaigns/corpus.yaml"), fmt::arg("store", (dir_ / "store.db").string()));
  const auto r = testing::RunCommand(TANDEM_BIN, {"run", file.string(), "--quiet"}, 300s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const store::Store store = store::Store::Open(dir_ / "store.db");
  std::map<std::string, double> start_of = {{"fast", kFastStartMs / 1e3}, {"slow", kSlowStartMs / 1e3}};
  store::Statement s(store.handle(),
                     "SELECT a.label, se.startup_json FROM session se JOIN arm a ON a.id = se.arm_id ORDER BY se.order_index");
  int sessions = 0;
  while (s.Step()) {
    ++sessions;
    const json startup = json::parse(s.Text(1));
    ASSERT_TRUE(startup.contains("ready_s")) << startup.dump();
    const double ready = startup["ready_s"];
    // The process's own start (fork, exec of sh and the server) comes on top of its wait.
    EXPECT_NEAR(ready / start_of[s.Text(0)], 1.0, 0.02) << s.Text(0) << " ready after " << ready << " s";
    EXPECT_GT(startup["first_output_s"].get<double>(), ready + kFirstMs / 1e3 * 0.98) << startup.dump();
    ASSERT_TRUE(startup.contains("resident_bytes")) << startup.dump();
    EXPECT_GT(startup["resident_bytes"][0][1].get<double>(), 1 << 20) << startup.dump();
  }
  EXPECT_EQ(sessions, 8);
  // The TTFT p50 family: each session's median request, at the server's first-token delay.
  const auto exported =
      testing::RunCommand(TANDEM_BIN, {"export", (dir_ / "store.db").string(), "--table", "scores", "--format", "json"}, 60s);
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  int ttft = 0;
  for (const json& row : json::parse(exported.out)) {
    if (row["family"] != "battery: TTFT p50") continue;
    ++ttft;
    EXPECT_NEAR(row["score"].get<double>() / (kFirstMs / 1e3), 1.0, 0.02) << row.dump();
  }
  EXPECT_EQ(ttft, 8);
  const auto gate = testing::RunCommand(TANDEM_BIN, {"gate", (dir_ / "store.db").string(), "--json"}, 60s);
  EXPECT_EQ(gate.exit_code, 1) << gate.out << gate.err;
  const json g = json::parse(gate.out);
  ASSERT_EQ(g["families"].size(), 2u) << gate.out;
  for (const json& f : g["families"]) {
    if (f["family"] == "battery: weighted decode") {
      EXPECT_EQ(f["verdict"], "pass") << gate.out;
    } else {
      EXPECT_EQ(f["family"], "startup: ready (/health, /v1/models)") << gate.out;
      EXPECT_EQ(f["verdict"], "fail") << gate.out;
      EXPECT_NEAR(f["ratio"].get<double>(), 1.5, 0.03) << gate.out;
    }
  }
}

// The prefill matrix against servers of a known prefill rate (the pace server counts prompt
// tokens with the model's tokenizer, keeps a prefix cache, and waits --prefill-ms per uncached
// token before the first): each cell's rate is new tokens / (first-ms + uncached · prefill-ms),
// within 2%; the gate passes a twin server against it (A/A). A server whose usage gives no
// cached tokens has its cells marked unverified, never scored, and the gate inconclusive.
TEST_F(PaceCampaign, PrefillRatesAreMeasuredAndAServerWithoutCacheAccountingIsUnverified) {
  constexpr double kFirstMs = 100, kPrefillMs = 1;
  const auto server = [&](const char* name, bool usage) {
    std::vector<std::string> args = {"--first-ms",   fmt::format("{}", kFirstMs),
                                     "--prefill-ms", fmt::format("{}", kPrefillMs),
                                     "--tokens",     "1",
                                     "--tokenizer",  (dir_ / "model" / "tokenizer.json").string()};
    if (!usage) args.push_back("--no-cached-usage");
    return std::make_unique<PaceServer>(args, dir_ / name);
  };
  const auto counted = server("counted.err", true), uncounted = server("uncounted.err", false), twin = server("twin.err", true);
  const std::string counted_url = counted->url, uncounted_url = uncounted->url, twin_url = twin->url;
  ASSERT_FALSE(counted_url.empty());
  ASSERT_FALSE(uncounted_url.empty());
  ASSERT_FALSE(twin_url.empty());
  const fs::path file = dir_ / "prefill.yaml";
  std::ofstream(file) << fmt::format(
      R"(name: prefill
model: {{path: {model}}}
arms:
  - {{label: counted, source: {{kind: external, base_url: "{counted}"}}, revision: c}}
  - {{label: uncounted, source: {{kind: external, base_url: "{uncounted}"}}, revision: u}}
  - {{label: twin, source: {{kind: external, base_url: "{twin}"}}, revision: c}}
layouts:
  - {{name: loopback, workers: 0}}
sessions: {{per_layout: 6, order: ABC}}
workloads:
  - {{name: prefill, kind: prefill, bases: [0, 200], new_tokens: [100, 400], repeats: 1, source: {source}}}
corpus: {corpus}
store: {store}
timeouts: {{launch_s: 30, request_s: 30, teardown_grace_s: 5}}
)",
      fmt::arg("model", (dir_ / "model").string()), fmt::arg("counted", counted_url), fmt::arg("uncounted", uncounted_url),
      fmt::arg("twin", twin_url), fmt::arg("source", std::string(TANDEM_SOURCE_DIR) + "/campaigns/context-source.txt"),
      fmt::arg("corpus", std::string(TANDEM_SOURCE_DIR) + "/campaigns/corpus.yaml"), fmt::arg("store", (dir_ / "store.db").string()));
  const auto r = testing::RunCommand(TANDEM_BIN, {"run", file.string(), "--quiet"}, 300s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto exported =
      testing::RunCommand(TANDEM_BIN, {"export", (dir_ / "store.db").string(), "--table", "scores", "--format", "json"}, 60s);
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  int cells = 0;
  for (const json& row : json::parse(exported.out)) {
    if (row["metric"] != "prefill") continue;
    EXPECT_NE(row["arm"], "uncounted") << row.dump();  // that server's cells are never scored
    const std::string family = row["family"];
    const double add = family.ends_with("+100") ? 100 : 400;
    // A fresh prompt (base 0) shares the server's 3 leading template tokens with every
    // earlier one: those are cached, the rest of its tokens prefilled.
    const double uncached = family.find("base 0 ") != std::string::npos ? add - 3 : add;
    EXPECT_NEAR(row["score"].get<double>() / (add / ((kFirstMs + uncached * kPrefillMs) / 1e3)), 1.0, 0.02) << row.dump();
    ++cells;
  }
  EXPECT_EQ(cells, 2 * 2 * 4);  // 4 cells in each of 2 sessions of the counted arm and of its twin
  const auto gate = [&](const std::string& candidate) {
    return testing::RunCommand(TANDEM_BIN,
                               {"gate", (dir_ / "store.db").string(), "--json", "--baseline", "counted", "--candidate", candidate,
                                "--family", "prefill: base 200 +400", "--family", "prefill: prefill, geometric mean of cells"},
                               60s);
  };
  const auto same = gate("twin");
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  const auto unverified = gate("uncounted");
  EXPECT_EQ(unverified.exit_code, 2) << unverified.out << unverified.err;
  const auto report = testing::RunCommand(TANDEM_BIN, {"report", (dir_ / "store.db").string(), "--out", (dir_ / "report.md").string()});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  std::ifstream in(dir_ / "report.md");
  const std::string md((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(md.find("### prefill · uncounted"), std::string::npos) << md;
  EXPECT_NE(md.find("| 200 | unverified (no cached tokens in usage) | unverified (no cached tokens in usage) |"), std::string::npos)
      << md.substr(md.find("## Prefill"), 3000);
}

// GPU conditions: with a stand-in nvidia-smi on the PATH (tests/support/fake_nvidia_smi) the
// harness samples the GPU through every session and reads its memory once ready; a power
// limit below the declared one flags every session, and the gate is inconclusive for the
// layout whose decode would otherwise pass.
TEST_F(PaceCampaign, ASessionOutsideTheDeclaredGpuConditionsIsFlaggedAndTheGateInconclusive) {
  const fs::path bin = dir_ / "bin";
  fs::create_directories(bin);
  fs::create_symlink(std::string(TANDEM_SOURCE_DIR) + "/tests/support/fake_nvidia_smi", bin / "nvidia-smi");
  const testing::ScopedEnv path("PATH", bin.string() + ":" + std::getenv("PATH"));
  const testing::ScopedEnv limit("FAKE_POWER_LIMIT", "600");
  const auto command = [](double startup_ms) {
    return fmt::format("{} --port {{port}} --startup-ms {} --first-ms 20 --rate 100 --tokens 9", TANDEM_PACE_SERVER, startup_ms);
  };
  const fs::path file = dir_ / "conditions.yaml";
  std::ofstream(file) << fmt::format(
      R"(name: conditions
model: {{path: {model}}}
arms:
  - {{label: a, source: {{kind: command, command: "{a}"}}, revision: a}}
  - {{label: b, source: {{kind: command, command: "{b}"}}, revision: b}}
layouts:
  - {{name: loopback, workers: 0}}
sessions: {{per_layout: 4, order: ABBA}}
conditions: {{power_limit_w: 700, sample_s: 0.2}}
workloads:
  - {{name: battery, kind: battery, cases: [code, hello], repeats: 2, max_tokens: 9, counting: false}}
corpus: {corpus}
store: {store}
gate: {{baseline: a, candidate: b, families: ["battery: weighted decode"]}}
timeouts: {{launch_s: 30, request_s: 30, teardown_grace_s: 5}}
)",
      fmt::arg("model", (dir_ / "model").string()), fmt::arg("a", command(100)), fmt::arg("b", command(100)),
      fmt::arg("corpus", std::string(TANDEM_SOURCE_DIR) + "/campaigns/corpus.yaml"), fmt::arg("store", (dir_ / "store.db").string()));
  const auto r = testing::RunCommand(TANDEM_BIN, {"run", file.string()}, 300s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(
      (r.out + r.err)
          .find("ran outside the campaign's GPU conditions: host local GPU 0 (GPU-fake-0): power limit 600 W, not the declared 700 W"),
      std::string::npos)
      << r.out << r.err;
  const store::Store store = store::Store::Open(dir_ / "store.db");
  store::Statement s(store.handle(), "SELECT conditions_json, startup_json FROM session ORDER BY order_index");
  int sessions = 0;
  while (s.Step()) {
    ++sessions;
    const json conditions = json::parse(s.Text(0)), startup = json::parse(s.Text(1));
    EXPECT_GE(conditions["samples"].size(), 2u) << conditions;
    EXPECT_EQ(conditions["samples"][0]["power_limit_w"], 600) << conditions;
    EXPECT_EQ(conditions["breaches"].size(), 1u) << conditions;
    EXPECT_EQ(startup["gpus"][0]["used_mib"], 1024) << startup;
  }
  EXPECT_EQ(sessions, 4);
  const auto gate = testing::RunCommand(TANDEM_BIN, {"gate", (dir_ / "store.db").string()}, 60s);
  EXPECT_EQ(gate.exit_code, 2) << gate.out << gate.err;
  EXPECT_NE(
      gate.out.find("the layout ran outside the campaign's GPU conditions (session 1: host local GPU 0 (GPU-fake-0): power limit 600 W"),
      std::string::npos)
      << gate.out;
  const auto report = testing::RunCommand(TANDEM_BIN, {"report", (dir_ / "store.db").string()}, 60s);
  EXPECT_NE(report.out.find("## GPU conditions"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("| 1 | a | local | 0 |"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("350 W (600 W)"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("memory: GPU 0 used (local)"), std::string::npos) << report.out;
  const auto shown = testing::RunCommand(TANDEM_BIN, {"show", (dir_ / "store.db").string(), "1"}, 60s);
  EXPECT_NE(shown.out.find("gpu      host local GPU 0 (GPU-fake-0): 1024 of 81559 MiB used once ready"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("samples through the session; outside the campaign's conditions: host local GPU 0"), std::string::npos)
      << shown.out;
}

}  // namespace
}  // namespace tandem::harness
