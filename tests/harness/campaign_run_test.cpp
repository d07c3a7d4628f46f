// Whole campaigns with the real `tandem` and `tandem-rt` executables on loopback:
// a complete run and its store, kill -9 in the middle and --resume, teardown that
// leaves nothing running, and an external arm against a server this test started.
#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include <dirent.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/input_error.hpp"
#include "common/sha256.hpp"
#include "harness/launch/arm_instance.hpp"
#include "store/session_scores.hpp"
#include "store/store.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/run_command.hpp"
#include "tests/support/scoped_env.hpp"

namespace tandem::harness {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

// Processes whose command line mentions `text` (every arm process names the model
// directory, which is unique to the test). Zombies have no command line.
std::vector<int> ProcessesMentioning(const std::string& text) {
  std::vector<int> out;
  DIR* proc = ::opendir("/proc");
  while (const dirent* e = proc ? ::readdir(proc) : nullptr) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == ::getpid()) continue;
    const std::string cmdline = testing::ReadProcFile(pid, "cmdline");
    if (cmdline.find(text) != std::string::npos) out.push_back(pid);
  }
  if (proc) ::closedir(proc);
  return out;
}

// Waits (briefly: SIGKILLed processes vanish once reaped) until none is left.
std::vector<int> LeftRunning(const std::string& text) {
  std::vector<int> left;
  for (int i = 0; i < 100; ++i) {
    left = ProcessesMentioning(text);
    if (left.empty()) break;
    std::this_thread::sleep_for(50ms);
  }
  return left;
}

// Replaces the `sessions:` line of a campaign written by WriteCampaign.
void SetSessions(const fs::path& file, const std::string& sessions) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  const std::size_t at = yaml.find("sessions: ");
  yaml.replace(at, yaml.find('\n', at) - at, "sessions: " + sessions);
  std::ofstream(file) << yaml;
}

class Campaigns : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(fs::temp_directory_path() / fmt::format("tandem-campaigns-{}", ::getpid()));
    fs::remove_all(*root_);
    fs::create_directories(*root_);
    const auto r =
        testing::RunCommand(TANDEM_RT_BIN, {"init-model", "--preset", "tiny", "--seed", "3", "--out", (*root_ / "model").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
  }

  static fs::path Model() { return *root_ / "model"; }
  fs::path Dir() const {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const fs::path d = *root_ / info->name();
    fs::create_directories(d);
    return d;
  }

  // A sequential campaign whose candidate decodes at a fifth of the speed
  // (--debug-slowdown 0.8), gated on the battery's weighted decode: O'Brien–Fleming cannot
  // decide after one block (2 sessions per arm: a one-sided level of ~1e-5 on a t with
  // ~2 df), but a block or two more show it beyond doubt, even on a loaded machine (at
  // half speed, other tests running beside this one once hid it for 16 sessions).
  fs::path SlowCandidateCampaign(const std::string& sessions) const {
    const fs::path file =
        WriteCampaign(fmt::format("  - label: two\n    source: {{kind: binary, coordinator: {0}, worker: {0}}}\n"
                                  "    options: [--threads, \"1\", --debug-slowdown, \"0.8\"]",
                                  TANDEM_RT_BIN));
    SetSessions(file, sessions);
    std::ofstream(file, std::ios::app) << "gate: {families: [\"battery: weighted decode\"]}\n";
    return file;
  }

  // A small campaign on the tiny model: 2 arms x 4 sessions ABBA, 8 requests each.
  fs::path WriteCampaign(const std::string& second_arm, const std::string& order = "ABBA") const {
    const std::string bin = TANDEM_RT_BIN;
    const fs::path file = Dir() / "campaign.yaml";
    std::ofstream(file) << fmt::format(
        R"(name: test
model: {{path: {model}}}
arms:
  - label: one
    source: {{kind: binary, coordinator: {bin}, worker: {bin}}}
    options: [--threads, "1"]
{second}
layouts:
  - name: tp2
    workers: 2
    expert_parallel: tp
sessions: {{per_layout: 4, order: {order}, retry: 0}}
warmup:
  - {{name: warmup, kind: battery, cases: [hello], max_tokens: 8, counting: false}}
workloads:
  - {{name: battery, kind: battery, cases: [hello, code], repeats: 2, max_tokens: 16, counting: false}}
  - {{name: sweep, kind: concurrency, cases: [code], levels: [1, 2], repeats: 1, max_tokens: 16}}
quality: {{cache_bound: 4}}
corpus: {corpus}
store: {store}
timeouts: {{launch_s: 60, request_s: 60, teardown_grace_s: 5}}
)",
        fmt::arg("model", Model().string()), fmt::arg("bin", bin), fmt::arg("second", second_arm), fmt::arg("order", order),
        fmt::arg("corpus", std::string(TANDEM_SOURCE_DIR) + "/campaigns/corpus.yaml"), fmt::arg("store", (Dir() / "store.db").string()));
    return file;
  }
  // The shortest campaign that runs: the arms given, two sessions (AB), no workers unless
  // asked, one request per session.
  fs::path WriteShortCampaign(const std::string& arms, const std::string& sessions = "{per_layout: 2, order: AB, retry: 0}",
                              int workers = 0) const {
    const fs::path file = Dir() / "campaign.yaml";
    std::ofstream(file) << fmt::format(
        R"(name: short
model: {{path: {model}}}
arms:
{arms}
layouts:
  - name: solo
    workers: {workers}
sessions: {sessions}
workloads:
  - {{name: battery, kind: battery, cases: [hello], repeats: 1, max_tokens: 8, counting: false}}
corpus: {corpus}
store: {store}
timeouts: {{launch_s: 60, request_s: 60, teardown_grace_s: 5}}
)",
        fmt::arg("model", Model().string()), fmt::arg("arms", arms), fmt::arg("workers", workers), fmt::arg("sessions", sessions),
        fmt::arg("corpus", std::string(TANDEM_SOURCE_DIR) + "/campaigns/corpus.yaml"), fmt::arg("store", (Dir() / "store.db").string()));
    return file;
  }
  static std::string BinaryArm() {
    return fmt::format("  - label: two\n    source: {{kind: binary, coordinator: {0}, worker: {0}}}\n    options: [--threads, \"2\"]",
                       TANDEM_RT_BIN);
  }

  static fs::path* root_;
};

fs::path* Campaigns::root_ = nullptr;

struct SampleKey {
  std::int64_t id;
  std::string sha;
  double t_start;
  bool operator==(const SampleKey&) const = default;
};

std::vector<SampleKey> SamplesOf(const store::Store& store, int order_index) {
  store::Statement s(store.handle(),
                     "SELECT x.id, x.content_sha256, x.t_start FROM sample x JOIN session se ON se.id = x.session_id "
                     "WHERE se.order_index = ? ORDER BY x.id");
  s.Bind(1, static_cast<std::int64_t>(order_index));
  std::vector<SampleKey> out;
  while (s.Step()) out.push_back({s.Int(0), s.Text(1), s.Double(2)});
  return out;
}

std::int64_t Count(const store::Store& store, const std::string& sql) {
  store::Statement s(store.handle(), sql);
  return s.Step() ? s.Int(0) : -1;
}

std::string Text(const store::Store& store, const std::string& sql) {
  store::Statement s(store.handle(), sql);
  return s.Step() ? s.Text(0) : "";
}

std::string ReadFile(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

using testing::ScopedEnv;

TEST_F(Campaigns, RunCompletesWithEverySampleStoredAndNothingLeftRunning) {
  const fs::path file = WriteCampaign(BinaryArm());
  const auto r = testing::RunCommand(TANDEM_BIN, {"run", file.string(), "--quiet"}, 300s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("summary: candidate / baseline"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("battery: weighted decode"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sweep: code C2"), std::string::npos) << r.out;
  EXPECT_TRUE(LeftRunning(Model().string()).empty());

  const store::Store store = store::Store::Open(Dir() / "store.db");
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM session WHERE status = 'complete'"), 4);
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM sample"), 4 * 8);
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM sample x JOIN workload_run w ON w.id = x.workload_run_id WHERE w.warmup = 1"), 4);
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM sample WHERE valid = 0"), 0);
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM workload_run WHERE stats_after IS NULL OR stats_before = ''"), 0);
  // Arms: revisions and image ids; the campaign text and its sha256.
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM arm WHERE length(coordinator_image) = 64 AND runtime_revision <> ''"), 2);
  EXPECT_EQ(Count(store,
                  "SELECT COUNT(*) FROM arm a JOIN campaign c ON c.id = a.campaign_id WHERE a.model_id = 'tandem' "
                  "AND a.model_revision = c.model_revision AND length(a.config_sha256) = 64"),
            2);
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM campaign WHERE length(yaml_sha256) = 64 AND yaml LIKE '%name: test%'"), 1);
  // Every session: host facts, the processes with their CPU time, and served model.
  store::Statement s(store.handle(), "SELECT host_json, processes_json, served_json, startup_json FROM session ORDER BY order_index");
  int sessions = 0;
  while (s.Step()) {
    ++sessions;
    const json host = json::parse(s.Text(0)), processes = json::parse(s.Text(1)), served = json::parse(s.Text(2));
    // The launch: each process listening (workers first), ready after them, the first
    // output after that, each process's memory, and the runtime's own phases.
    const json startup = json::parse(s.Text(3));
    ASSERT_EQ(startup["listening"].size(), 3u) << startup;
    EXPECT_EQ(startup["listening"][2][0], "coordinator") << startup;
    EXPECT_GE(startup["ready_s"].get<double>(), startup["listening"][2][1].get<double>()) << startup;
    EXPECT_GT(startup["first_output_s"].get<double>(), startup["ready_s"].get<double>()) << startup;
    EXPECT_EQ(startup["resident_bytes"].size(), 3u) << startup;
    EXPECT_EQ(startup["server_phases"].back()[0], "ready") << startup;
    // Each worker's own load, as its handshake told the coordinator: within the launch.
    ASSERT_EQ(startup["worker_loads"].size(), 2u) << startup;
    EXPECT_EQ(startup["worker_loads"][1][0], "worker-1") << startup;
    EXPECT_GT(startup["worker_loads"][1][1].get<double>(), 0) << startup;
    EXPECT_LT(startup["worker_loads"][1][1].get<double>(), startup["ready_s"].get<double>()) << startup;
    EXPECT_GT(startup["weight_bytes"].get<double>(), 0) << startup;
    EXPECT_EQ(startup.value("discarded", false), sessions <= 2) << "the first session of each arm (ABBA) is discarded: " << startup;
    EXPECT_TRUE(host.contains("cpu_model") && host.contains("load_average") && host.contains("busy_fraction")) << host;
    ASSERT_EQ(processes.size(), 3u) << processes;  // 2 workers + the coordinator
    for (const json& p : processes) {
      EXPECT_GT(p["cpu_seconds"].get<double>(), 0.0) << p;
      EXPECT_TRUE(fs::exists(p["log"].get<std::string>())) << p;
    }
    EXPECT_EQ(served.value("id", ""), "tandem");
  }
  EXPECT_EQ(sessions, 4);
  // Nonces: no marker is used by two batches of a session (a C-level batch shares one).
  EXPECT_EQ(Count(store,
                  "SELECT COUNT(*) FROM (SELECT DISTINCT se.order_index, x.nonce, x.batch, w.name FROM sample x "
                  "JOIN session se ON se.id = x.session_id JOIN workload_run w ON w.id = x.workload_run_id WHERE x.nonce <> '')"),
            Count(store,
                  "SELECT COUNT(*) FROM (SELECT DISTINCT se.order_index, x.nonce FROM sample x "
                  "JOIN session se ON se.id = x.session_id WHERE x.nonce <> '')"));
  // Greedy content agrees across the four sessions and both arms.
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM sample WHERE json_extract(checks_json, '$.greedy_match') = 0"), 0);
  EXPECT_GT(Count(store, "SELECT COUNT(*) FROM sample WHERE json_extract(checks_json, '$.greedy_match') = 1"), 0);

  const auto listed = testing::RunCommand(TANDEM_BIN, {"sessions", (Dir() / "store.db").string()});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find("complete"), std::string::npos) << listed.out;
  const auto shown = testing::RunCommand(TANDEM_BIN, {"show", (Dir() / "store.db").string(), "2"});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("[warmup] warmup"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("process  coordinator"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("launch   ready "), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find(" · listening: worker-0 "), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("server   listening "), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("workers  own load: worker-0 "), std::string::npos) << shown.out;
#if defined(__x86_64__)
  // The CPU beyond its model name: what tells two hosts of one name apart.
  EXPECT_NE(shown.out.find(" family "), std::string::npos) << shown.out;
#endif
  const auto missing = testing::RunCommand(TANDEM_BIN, {"sessions", (Dir() / "nope.db").string()});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("nope.db: no such store"), std::string::npos) << missing.err;
  EXPECT_FALSE(fs::exists(Dir() / "nope.db"));
}

// The prefill matrix and exact retained context on the trained mini model, against the
// runtime with its prefix cache and with it off (--prefix-cache-entries 0): prompts land on
// the exact token counts by the server's usage; with the cache, every child shows the base
// (or the context) cached; without, the prefill children fail after their tries and the
// retained children fail their cache check, and none of them is scored.
TEST_F(Campaigns, PrefillAndRetainedContextAreExactAndAColdCacheFailsThem) {
  const fs::path file = Dir() / "campaign.yaml";
  const std::string bin = TANDEM_RT_BIN, source = std::string(TANDEM_SOURCE_DIR) + "/campaigns/context-source.txt";
  std::ofstream(file) << fmt::format(
      R"(name: context
model: {{path: {model}}}
arms:
  - {{label: cached, source: {{kind: binary, coordinator: {bin}}}, options: [--threads, "1"]}}
  - {{label: cold, source: {{kind: binary, coordinator: {bin}}}, options: [--threads, "1", --prefix-cache-entries, "0"]}}
layouts:
  - {{name: solo, workers: 0}}
sessions: {{per_layout: 2, order: AB, retry: 0}}
workloads:
  - {{name: prefill, kind: prefill, bases: [0, 160], new_tokens: [48], repeats: 1, tries: 2, source: {source}}}
  - {{name: retained, kind: retained_context, contexts: [0, 300], cases: [hello], repeats: 2, thinking: [off, on], source: {source}}}
corpus: {corpus}
store: {store}
timeouts: {{launch_s: 60, request_s: 120, teardown_grace_s: 5}}
)",
      fmt::arg("model", std::string(TANDEM_SOURCE_DIR) + "/models/mini/checkpoint"), fmt::arg("bin", bin), fmt::arg("source", source),
      fmt::arg("corpus", std::string(TANDEM_SOURCE_DIR) + "/campaigns/corpus.yaml"), fmt::arg("store", (Dir() / "store.db").string()));
  const auto r = testing::RunCommand(TANDEM_BIN, {"run", file.string(), "--quiet"}, 300s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const store::Store store = store::Store::Open(Dir() / "store.db");
  const auto count = [&](const std::string& arm, const std::string& where) {
    return Count(store,
                 "SELECT COUNT(*) FROM sample x JOIN session se ON se.id = x.session_id JOIN arm a ON a.id = se.arm_id "
                 "JOIN workload_run w ON w.id = x.workload_run_id WHERE a.label = '" +
                     arm + "' AND " + where);
  };
  // Prefill: with the cache, each child (the discarded round and the measured one, in both
  // cells) is exact and clean at the first try; the parents are exactly the base.
  EXPECT_EQ(count("cached", "w.name = 'prefill' AND x.role = 'child'"), 4);
  EXPECT_EQ(count("cached",
                  "w.name = 'prefill' AND x.role = 'child' AND x.valid = 1 AND x.prompt_tokens = x.context + 48 AND "
                  "json_extract(x.checks_json, '$.prefill_cache') = 1 AND ((x.context = 160 AND x.cached_tokens = 160) OR "
                  "(x.context = 0 AND x.cached_tokens <= 4))"),
            4);
  EXPECT_EQ(count("cached", "w.name = 'prefill' AND x.role = 'parent' AND x.prompt_tokens = 160"), 2);
  EXPECT_EQ(count("cached", "x.role = 'retry'"), 0);
  // Without it the base-160 children miss: tried again, then failed and not scored.
  EXPECT_EQ(count("cold", "w.name = 'prefill' AND x.role = 'retry' AND x.context = 160 AND x.valid = 0"), 2);
  EXPECT_EQ(count("cold",
                  "w.name = 'prefill' AND x.role = 'child' AND x.context = 160 AND x.valid = 0 AND x.passed = 0 AND "
                  "json_extract(x.checks_json, '$.prefill_cache') = 0"),
            2);
  EXPECT_EQ(count("cold", "w.name = 'prefill' AND x.role = 'child' AND x.context = 0 AND x.valid = 1"), 2);
  // Retained context: the parent is exactly 300 tokens by the server's usage; the cached
  // arm's children hit at least the context, the cold arm's fail the check.
  EXPECT_EQ(count("cached", "w.name = 'retained' AND x.role = 'parent' AND x.prompt_tokens = 300"), 1);
  EXPECT_EQ(count("cold", "w.name = 'retained' AND x.role = 'parent' AND x.prompt_tokens = 300"), 1);
  EXPECT_EQ(count("cached",
                  "w.name = 'retained' AND x.role = 'child' AND x.context = 300 AND x.valid = 1 AND x.cached_tokens >= 300 "
                  "AND x.cached_tokens < x.prompt_tokens AND json_extract(x.checks_json, '$.retained_cache') = 1"),
            2);
  EXPECT_EQ(count("cold",
                  "w.name = 'retained' AND x.role = 'child' AND x.context = 300 AND x.valid = 0 AND "
                  "json_extract(x.checks_json, '$.retained_cache') = 0"),
            2);
  EXPECT_EQ(count("cached", "w.name = 'retained' AND x.role = 'control'"), 2);
  // Thinking: its own parent of exactly 300 tokens; its children hit the parent's text (the
  // parent's prompt ends in "<think>", its turn in the history does not).
  EXPECT_EQ(count("cached",
                  "w.name = 'retained' AND x.role = 'parent thinking' AND x.prompt_tokens = 300 AND "
                  "json_extract(x.request_json, '$.thinking.type') = 'enabled'"),
            1);
  EXPECT_EQ(count("cached",
                  "w.name = 'retained' AND x.role = 'child thinking' AND x.context = 300 AND x.valid = 1 AND "
                  "x.cached_tokens >= 290 AND json_extract(x.checks_json, '$.retained_cache') = 1"),
            2);
  EXPECT_EQ(count("cold", "w.name = 'retained' AND x.role = 'child thinking' AND x.context = 300 AND x.valid = 0"), 2);
  // The session scores: a prefill cell's score is the median of new tokens / seconds to the
  // first token of its measured children, recomputed here from the stored times.
  const auto families = store::ComputeSessionScores(store, 1);
  const auto cell =
      std::find_if(families.begin(), families.end(), [](const store::FamilyScores& f) { return f.family == "prefill: base 160 +48"; });
  ASSERT_NE(cell, families.end());
  EXPECT_FALSE(cell->by_arm.contains("cold"));
  ASSERT_EQ(cell->by_arm.at("cached").size(), 1u);
  const double seconds = std::stod(Text(store,
                                        "SELECT x.t_first_output - x.t_start FROM sample x JOIN session se ON se.id = x.session_id "
                                        "JOIN arm a ON a.id = se.arm_id WHERE a.label = 'cached' AND x.role = 'child' AND x.context = 160 "
                                        "AND x.repeat = 0"));
  EXPECT_NEAR(cell->by_arm.at("cached")[0], 48 / seconds, 1e-9 * 48 / seconds);
  EXPECT_TRUE(
      std::any_of(families.begin(), families.end(), [](const store::FamilyScores& f) { return f.family == "retained: retained 300"; }));
  const auto report = testing::RunCommand(TANDEM_BIN, {"report", (Dir() / "store.db").string(), "--out", (Dir() / "report.md").string()});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const std::string md = ReadFile(Dir() / "report.md");
  EXPECT_NE(md.find("## Prefill"), std::string::npos);
  EXPECT_NE(md.find("| 160 | — (0 of 1 clean), 1 retried |"), std::string::npos) << md.substr(md.find("## Prefill"), 2000);
  EXPECT_NE(md.find("| retained | 300 tokens |"), std::string::npos);
  EXPECT_NE(md.find("| retained | 300 tokens, thinking |"), std::string::npos);
  EXPECT_NE(md.find("A/B: cold vs cached, prefill (higher is better; a ratio above 1 is a gain)"), std::string::npos);
}

// A resumed campaign cuts its prompts from the text its sessions used: a source that changed
// since is refused, naming the workload and both hashes, before anything starts.
TEST_F(Campaigns, ResumingAfterThePromptSourceChangedIsRefused) {
  const fs::path source = Dir() / "source.txt";
  fs::copy_file(fs::path(TANDEM_SOURCE_DIR) / "campaigns" / "context-source.txt", source, fs::copy_options::overwrite_existing);
  const fs::path file =
      WriteShortCampaign(fmt::format("  - {{label: one, source: {{kind: binary, coordinator: {0}}}, options: [--threads, \"1\"]}}\n"
                                     "  - {{label: two, source: {{kind: binary, coordinator: {0}}}, options: [--threads, \"1\"]}}",
                                     TANDEM_RT_BIN));
  std::string yaml = ReadFile(file);
  yaml.replace(
      yaml.find("workloads:"), std::string("workloads:").size(),
      fmt::format("workloads:\n  - {{name: prefill, kind: prefill, bases: [0], new_tokens: [32], tries: 1, source: {}}}", source.string()));
  std::ofstream(file) << yaml;
  const auto r = testing::RunCommand(TANDEM_BIN, {"run", file.string(), "--quiet"}, 120s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::ofstream(source, std::ios::app) << "A sentence added after the campaign started.\n";
  const auto resumed = testing::RunCommand(TANDEM_BIN, {"run", "--resume", (Dir() / "store.db").string(), "--extend", "2", "--quiet"}, 60s);
  EXPECT_EQ(resumed.exit_code, 2) << resumed.out << resumed.err;
  EXPECT_NE(resumed.err.find("workload 'prefill': its prompt source " + source.string() + " changed since the campaign started"),
            std::string::npos)
      << resumed.err;
  const store::Store store = store::Store::Open(Dir() / "store.db");
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM session"), 2);  // nothing was added
}

TEST_F(Campaigns, KillDuringASessionThenResumeLosesAndDuplicatesNothing) {
  const fs::path file = WriteCampaign(BinaryArm());
  const fs::path db = Dir() / "store.db";
  {
    testing::ChildProcess run(TANDEM_BIN, {"run", file.string(), "--quiet"}, (Dir() / "first.err").string());
    // Wait until the second session is in its measured workloads, then kill -9.
    bool midway = false;
    for (int i = 0; i < 2400 && !midway && run.running(); ++i) {
      std::this_thread::sleep_for(50ms);
      if (!fs::exists(db)) continue;
      // Read-only, as `tandem sessions` would: the harness may be creating the file right now,
      // and a store without its tables yet is "not a Tandem store" to a reader.
      try {
        const store::Store store = store::Store::Open(db, store::OpenMode::kReadOnly);
        midway = Count(store,
                       "SELECT COUNT(*) FROM workload_run w JOIN session se ON se.id = w.session_id "
                       "WHERE se.order_index = 1 AND se.status = 'running' AND w.name = 'battery'") > 0;
      } catch (const InputError&) {
        continue;
      }
    }
    ASSERT_TRUE(midway) << "the campaign never reached its second session";
    run.Kill();
  }
  // The kernel takes the arm's processes down with the harness.
  EXPECT_TRUE(LeftRunning(Model().string()).empty());
  std::vector<SampleKey> first_session;
  {
    const store::Store store = store::Store::Open(db);
    EXPECT_EQ(Count(store, "SELECT status = 'complete' FROM session WHERE order_index = 0"), 1);
    EXPECT_EQ(Count(store, "SELECT status = 'running' FROM session WHERE order_index = 1"), 1);
    first_session = SamplesOf(store, 0);
    ASSERT_EQ(first_session.size(), 8u);
  }

  const auto resumed = testing::RunCommand(TANDEM_BIN, {"run", "--resume", db.string(), "--quiet"}, 300s);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_TRUE(LeftRunning(Model().string()).empty());

  const store::Store store = store::Store::Open(db);
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM campaign"), 1);
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM session WHERE status = 'complete'"), 4);
  EXPECT_EQ(SamplesOf(store, 0), first_session);  // complete work is untouched
  EXPECT_EQ(Count(store, "SELECT attempts FROM session WHERE order_index = 1"), 2);
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM sample"), 4 * 8);
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM workload_run"), 4 * 3);
  EXPECT_EQ(Count(store,
                  "SELECT COUNT(*) FROM (SELECT 1 FROM sample x JOIN workload_run w ON w.id = x.workload_run_id "
                  "GROUP BY x.session_id, w.name, x.case_id, x.repeat, x.batch, x.slot HAVING COUNT(*) > 1)"),
            0);
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM sample x LEFT JOIN workload_run w ON w.id = x.workload_run_id WHERE w.id IS NULL"), 0);
  // The redone session repeated exactly the same requests (nonces are pure functions).
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM sample WHERE json_extract(checks_json, '$.greedy_match') = 0"), 0);
  EXPECT_NE(resumed.out.find("summary"), std::string::npos) << resumed.out;
}

TEST_F(Campaigns, MixedPairsRunOneSidesCoordinatorWithTheOthersWorkersAndTheReportShowsTheGrid) {
  // "two" is a copy of the same runtime elsewhere, so the four arms are told apart by
  // where each role's executable comes from.
  const fs::path two = Dir() / "tandem-rt-two";
  fs::copy_file(TANDEM_RT_BIN, two, fs::copy_options::overwrite_existing);
  fs::permissions(two, fs::perms::owner_all);
  const std::string arms = fmt::format(
      "  - label: two\n    source: {{kind: binary, coordinator: {0}, worker: {0}}}\n"
      "  - {{label: one-two, coordinator_from: one, worker_from: two}}\n"
      "  - {{label: two-one, coordinator_from: two, worker_from: one}}",
      two.string());
  const auto r = testing::RunCommand(TANDEM_BIN, {"run", WriteCampaign(arms, "ABCD").string(), "--quiet"}, 300s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const store::Store store = store::Store::Open(Dir() / "store.db");
  // one-two's coordinator ran one's executable, its workers two's.
  store::Statement s(
      store.handle(),
      "SELECT se.processes_json, a.source_kind, a.launch_json FROM session se JOIN arm a ON a.id = se.arm_id WHERE a.label = 'one-two'");
  ASSERT_TRUE(s.Step());
  EXPECT_EQ(s.Text(1), "mixed");
  const json launch = json::parse(s.Text(2));
  EXPECT_EQ(launch["coordinator_from"], "one");
  EXPECT_EQ(launch["worker_from"], "two");
  EXPECT_EQ(launch["coordinator"], TANDEM_RT_BIN);
  EXPECT_EQ(launch["worker"], two.string());
  const auto report = testing::RunCommand(TANDEM_BIN, {"report", (Dir() / "store.db").string()}, 60s);
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("## Coordinator × workers"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("**mixed**: the coordinator of one, the workers of two"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("| coordinator \\ workers | one | two |"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("`two-one`"), std::string::npos) << report.out;
  EXPECT_TRUE(LeftRunning(Model().string()).empty());
}

TEST_F(Campaigns, ASequentialCampaignStopsALayoutOnceItsGatedFamiliesAreDecided) {
  const fs::path file = SlowCandidateCampaign("{max_per_layout: 16, until: decided, order: ABBA}");
  const auto r = testing::RunCommand(TANDEM_BIN, {"run", file.string()}, 300s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("[tp2] look after 4 sessions: undecided, going on"), std::string::npos) << r.err;
  // Where exactly it is decided depends on this machine's noise: after the 2nd or 3rd block.
  const store::Store store = store::Store::Open(Dir() / "store.db");
  const std::int64_t complete = Count(store, "SELECT COUNT(*) FROM session WHERE status = 'complete'");
  EXPECT_TRUE(complete == 8 || complete == 12) << r.err;
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM session WHERE status = 'skipped'"), 16 - complete);
  EXPECT_NE(r.err.find(fmt::format("[tp2] decided after {} sessions: {} planned session(s) skipped", complete, 16 - complete)),
            std::string::npos)
      << r.err;
  const auto gate = testing::RunCommand(TANDEM_BIN, {"gate", (Dir() / "store.db").string(), "--json"}, 60s);
  EXPECT_EQ(gate.exit_code, 1) << gate.out << gate.err;
  const json g = json::parse(gate.out);
  EXPECT_TRUE(g["sequential"].get<bool>());
  ASSERT_EQ(g["families"].size(), 1u);
  // `tandem gate` takes the same looks from the store and decides at the same one.
  EXPECT_EQ(g["families"][0]["look"], complete / 4) << gate.out;
  EXPECT_EQ(g["families"][0]["planned_looks"], 4) << gate.out;
  EXPECT_NEAR(g["families"][0]["information_fraction"].get<double>(), static_cast<double>(complete) / 16, 1e-12);
  EXPECT_TRUE(g["quality_doubts"].empty()) << gate.out;  // skipped sessions are not unfinished ones
  EXPECT_TRUE(LeftRunning(Model().string()).empty());
}

TEST_F(Campaigns, ASequentialCampaignWithAPrecisionGoesOnPastTheDecidingLookUntilTheIntervalIsNarrow) {
  // The same slow candidate, but the campaign also wants every gated interval within
  // ±0.1% of its ratio, which 16 sessions cannot give: it runs them all, the log says why
  // after each look that decided, and the verdict stays the one of the look that decided.
  const fs::path file = SlowCandidateCampaign("{max_per_layout: 16, until: decided, precision: 0.001, order: ABBA}");
  const auto plan = testing::RunCommand(TANDEM_BIN, {"run", file.string(), "--dry-run"}, 60s);
  EXPECT_NE(plan.out.find("sessions (at most 16 per layout: the gate looks after every block of 4 and stops a layout once it is "
                          "decided and within ±0.1%)"),
            std::string::npos)
      << plan.out;
  const auto r = testing::RunCommand(TANDEM_BIN, {"run", file.string()}, 300s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("[tp2] look after 4 sessions: undecided, going on"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sessions: decided, but battery: weighted decode's interval is ±"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(precision: ±0.1%), going on"), std::string::npos) << r.err;
  const store::Store store = store::Store::Open(Dir() / "store.db");
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM session WHERE status = 'complete'"), 16);
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM session WHERE status = 'skipped'"), 0);
  const auto gate = testing::RunCommand(TANDEM_BIN, {"gate", (Dir() / "store.db").string(), "--json"}, 60s);
  EXPECT_EQ(gate.exit_code, 1) << gate.out << gate.err;
  const json g = json::parse(gate.out);
  EXPECT_DOUBLE_EQ(g["precision"].get<double>(), 0.001);
  ASSERT_EQ(g["families"].size(), 1u);
  EXPECT_EQ(g["families"][0]["verdict"], "fail");
  EXPECT_LT(g["families"][0]["look"].get<int>(), 4) << gate.out;  // decided before the sessions ran out
  EXPECT_EQ(g["families"][0]["n_baseline"], 8);
  const auto text = testing::RunCommand(TANDEM_BIN, {"gate", (Dir() / "store.db").string()}, 60s);
  EXPECT_NE(text.out.find("stopping once decided and within ±0.1%"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("wider than the campaign's precision (±0.1%)"), std::string::npos) << text.out;
  const auto report = testing::RunCommand(TANDEM_BIN, {"report", (Dir() / "store.db").string()}, 60s);
  EXPECT_NE(report.out.find("stopped once its gated families were decided and their 95% intervals lay within ±0.1% of the ratio"),
            std::string::npos)
      << report.out;
  EXPECT_TRUE(LeftRunning(Model().string()).empty());
}

TEST_F(Campaigns, ExtendAddsWholeBlocksToAFinishedCampaignAndTheGateLooksAgain) {
  const fs::path file = WriteCampaign(BinaryArm());
  std::ofstream(file, std::ios::app) << "gate: {families: [\"battery: weighted decode\"]}\n";
  ASSERT_EQ(testing::RunCommand(TANDEM_BIN, {"run", file.string(), "--quiet"}, 300s).exit_code, 0);
  const std::string db = (Dir() / "store.db").string();
  const auto odd = testing::RunCommand(TANDEM_BIN, {"run", "--resume", db, "--extend", "3", "--quiet"}, 60s);
  EXPECT_EQ(odd.exit_code, 2) << odd.err;
  EXPECT_NE(odd.err.find("--extend 3: must be a whole number of blocks of 4 sessions"), std::string::npos) << odd.err;
  const auto more = testing::RunCommand(TANDEM_BIN, {"run", "--resume", db, "--extend", "4", "--quiet"}, 300s);
  ASSERT_EQ(more.exit_code, 0) << more.out << more.err;
  EXPECT_NE(more.err.find("by 4 sessions per layout (4 → 8)"), std::string::npos) << more.err;
  const store::Store store = store::Store::Open(db);
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM session WHERE status = 'complete'"), 8);
  // The new sessions continue the order: ABBA ABBA.
  store::Statement order(store.handle(), "SELECT a.label FROM session s JOIN arm a ON a.id = s.arm_id ORDER BY s.order_index");
  std::string arms;
  while (order.Step()) arms += order.Text(0) == "one" ? "A" : "B";
  EXPECT_EQ(arms, "ABBAABBA");
  const auto gate = testing::RunCommand(TANDEM_BIN, {"gate", db, "--json"}, 60s);
  const json g = json::parse(gate.out);
  ASSERT_EQ(g["families"].size(), 1u);
  EXPECT_EQ(g["families"][0]["planned_looks"], 2) << gate.out;  // the old end became a look
  EXPECT_EQ(g["families"][0]["n_baseline"], 4);
}

TEST_F(Campaigns, ADifferentRuntimeIsJudgedOnItsOwnDeterminismNotOnTheBaselinesText) {
  // "Another runtime": the same server with an fp8 wire and fp8 expert inputs, started by a
  // command arm. Lossy on the way to the experts, so on random weights some greedy texts
  // differ from the baseline's — deterministically, in every session.
  const std::string other = fmt::format(
      "  - label: other\n    source: {{kind: command, command: '{} serve --model {{model}} --listen 127.0.0.1:{{port}} "
      "--spawn-workers 2 --wire-dtype fp8 --expert-input-dtype fp8 --threads 1'}}\n    revision: other-runtime",
      TANDEM_RT_BIN);
  const auto r = testing::RunCommand(TANDEM_BIN, {"run", WriteCampaign(other).string(), "--quiet"}, 300s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("greedy determinism: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("greedy agreement across arms: "), std::string::npos) << r.out;
  const store::Store store = store::Store::Open(Dir() / "store.db");
  // No sample failed for the other arm's text.
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM sample WHERE json_extract(checks_json, '$.greedy_match') = 0"), 0);
  EXPECT_GT(Count(store, "SELECT COUNT(*) FROM sample WHERE json_extract(checks_json, '$.greedy_match') = 1"), 0);
  const auto report = testing::RunCommand(TANDEM_BIN, {"report", (Dir() / "store.db").string()}, 60s);
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const std::size_t line = report.out.find("- tp2: determinism: one **");
  ASSERT_NE(line, std::string::npos) << report.out;
  const std::string agreement = report.out.substr(line, report.out.find('\n', line) - line);
  EXPECT_NE(agreement.find("other **"), std::string::npos) << agreement;
  EXPECT_NE(agreement.find("across arms: other matched one's output on **"), std::string::npos) << agreement;
  fmt::print("{}\n", agreement);
  // This "other runtime" does write different text for some prompts (else the test shows nothing).
  const std::size_t at = agreement.find("output on **") + 12;
  const int matched = std::stoi(agreement.substr(at));
  const int compared = std::stoi(agreement.substr(agreement.find(" of ", at) + 4));
  EXPECT_LT(matched, compared) << agreement;
  // The gate fails on the difference only when the campaign asks for identical output.
  const auto gate = testing::RunCommand(TANDEM_BIN, {"gate", (Dir() / "store.db").string(), "--json"}, 60s);
  const json g = json::parse(gate.out);
  for (const json& f : g["quality_failures"]) EXPECT_EQ(f.get<std::string>().find("greedy output differs"), std::string::npos) << f;
}

TEST_F(Campaigns, SecondRunOnTheSameStoreIsRefused) {
  const fs::path file = WriteCampaign(BinaryArm());
  testing::ChildProcess run(TANDEM_BIN, {"run", file.string(), "--quiet"}, (Dir() / "first.err").string());
  for (int i = 0; i < 600 && !fs::exists(Dir() / "store.db"); ++i) std::this_thread::sleep_for(50ms);
  std::this_thread::sleep_for(500ms);
  const auto second = testing::RunCommand(TANDEM_BIN, {"run", "--resume", (Dir() / "store.db").string(), "--quiet"}, 60s);
  EXPECT_EQ(second.exit_code, 2) << second.out << second.err;
  EXPECT_NE(second.err.find("another `tandem run` is using this store"), std::string::npos) << second.err;
  run.Kill();
  EXPECT_TRUE(LeftRunning(Model().string()).empty());
}

TEST_F(Campaigns, TeardownKillsWhatIgnoresSigterm) {
  // A command arm whose shell leaves a helper that ignores SIGTERM in the group.
  ResolvedArm arm;
  arm.spec.label = "cmd";
  arm.spec.kind = ArmKind::kCommand;
  arm.spec.coordinator_command = fmt::format(
      "sh -c 'trap \"\" TERM; while :; do sleep 1; done' {{model}} & exec {} serve --model {{model}} --listen 127.0.0.1:{{port}}",
      TANDEM_RT_BIN);
  LayoutSpec layout;
  layout.workers = 0;
  Campaign campaign;  // the harness's machine only
  campaign.hosts = {HostSpec{.name = "local"}};
  campaign.layouts = {layout};
  std::vector<ResolvedArm> arms = {arm};
  std::ostringstream log;
  const auto cluster = Cluster::Prepare(campaign, arms, Model(), "", false, log);
  auto instance = ArmInstance::Launch(arm, layout, *cluster, "teardown", Dir() / "logs", 60);
  EXPECT_EQ(ProcessesMentioning(Model().string()).size(), 2u);
  const auto start = std::chrono::steady_clock::now();
  instance->Teardown(2.0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_TRUE(LeftRunning(Model().string()).empty());
}

TEST_F(Campaigns, TeardownFindsAndKillsWhatLeftItsGroupHoldingTheOutput) {
  // A helper started with setsid leaves the process group but keeps the server's stdout:
  // the reader waited for an end of file that never came, and `tandem run` hung with the
  // helper still running.
  ResolvedArm arm;
  arm.spec.label = "cmd";
  arm.spec.kind = ArmKind::kCommand;
  arm.spec.coordinator_command =
      fmt::format("setsid sleep 7777 & exec {} serve --model {{model}} --listen 127.0.0.1:{{port}}", TANDEM_RT_BIN);
  LayoutSpec layout;
  layout.workers = 0;
  Campaign campaign;
  campaign.hosts = {HostSpec{.name = "local"}};
  campaign.layouts = {layout};
  std::vector<ResolvedArm> arms = {arm};
  std::ostringstream log;
  const auto cluster = Cluster::Prepare(campaign, arms, Model(), "", false, log);
  auto instance = ArmInstance::Launch(arm, layout, *cluster, "detached", Dir() / "logs", 60);
  const std::string helper(
      "sleep\0"
      "7777",
      10);  // as /proc/PID/cmdline has it
  ASSERT_EQ(ProcessesMentioning(helper).size(), 1u);
  const auto start = std::chrono::steady_clock::now();
  const std::string left = instance->Teardown(2.0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
  EXPECT_NE(left.find("outlived its process group holding its output, killed: pid"), std::string::npos) << left;
  EXPECT_NE(left.find("sleep 7777"), std::string::npos) << left;
  EXPECT_TRUE(LeftRunning(helper).empty());
  EXPECT_TRUE(LeftRunning(Model().string()).empty());
}

// A binary arm runs the copy of its executable taken when the campaign started: the
// file it names (often a build directory's output) may be rebuilt while sessions run,
// and a session must run what was hashed and stored as the arm's image.
TEST_F(Campaigns, ABinaryArmRunsTheExecutableItHashedEvenIfTheFileIsRebuiltMeanwhile) {
  const fs::path exe = Dir() / "build" / "bin" / "tandem-rt";
  fs::create_directories(exe.parent_path());
  fs::copy_file(TANDEM_RT_BIN, exe, fs::copy_options::overwrite_existing);
  ArmSpec spec;
  spec.label = "built";
  spec.coordinator = spec.worker = exe;
  spec.declared_revision = "v-built";
  std::vector<ResolvedArm> arms = {ResolveArm(spec, {.build = false, .build_cache = Dir() / "cache"})};
  LayoutSpec layout;
  layout.workers = 0;
  Campaign campaign;  // the harness's machine only
  campaign.hosts = {HostSpec{.name = "local", .address = "127.0.0.1"}};
  campaign.layouts = {layout};
  std::ostringstream log;
  const auto cluster = Cluster::Prepare(campaign, arms, Model(), "", false, log);
  const PlacedImage& placed = cluster->image("built", Role::kCoordinator, "local");
  EXPECT_NE(placed.executable, exe.string());
  EXPECT_NE(placed.executable.find(arms[0].coordinator.id), std::string::npos) << placed.executable;
  EXPECT_EQ(FileSha256(placed.executable), arms[0].coordinator.id);
  // The build rewrites the file: what it names now fails at once.
  fs::remove(exe);
  {
    std::ofstream rebuilt(exe);
    rebuilt << "#!/bin/sh\nexit 3\n";
  }
  fs::permissions(exe, fs::perms::owner_all);
  try {
    auto instance = ArmInstance::Launch(arms[0], layout, *cluster, "rebuilt", Dir() / "logs", 60);
    instance->Teardown(2.0);
  } catch (const std::exception& e) {
    std::ifstream in(Dir() / "logs" / "coordinator.log");
    std::stringstream text;
    text << in.rdbuf();
    ADD_FAILURE() << e.what() << "\n" << text.str();
  }
  EXPECT_TRUE(LeftRunning(Model().string()).empty());
}

TEST_F(Campaigns, ExternalArmIsMeasuredButNeverRelaunched) {
  testing::ChildProcess server(TANDEM_RT_BIN,
                               {"serve", "--model", Model().string(), "--listen", "127.0.0.1:0", "--served-model-name", "ext-model"},
                               (Dir() / "server.err").string());
  std::string url;
  for (int i = 0; i < 20 && url.empty(); ++i) {
    const auto line = server.ReadLine(3s);
    if (line && line->find("listening on ") != std::string::npos) url = line->substr(line->find("http://"));
  }
  ASSERT_FALSE(url.empty());
  const fs::path file =
      WriteCampaign(fmt::format("  - label: ext\n    source: {{kind: external, base_url: {}}}\n    revision: v-ext", url));
  const auto r = testing::RunCommand(TANDEM_BIN, {"run", file.string(), "--quiet"}, 300s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("note: arm ext is an external server (" + url + "), not relaunched"), std::string::npos) << r.out;
  EXPECT_TRUE(server.running());  // the harness never stops what it did not start

  const store::Store store = store::Store::Open(Dir() / "store.db");
  EXPECT_EQ(Count(store,
                  "SELECT COUNT(*) FROM arm WHERE label = 'ext' AND source_kind = 'external' AND runtime_revision = 'v-ext' "
                  "AND model_id = 'ext-model' AND config_sha256 = ''"),
            1);
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM session WHERE status = 'complete'"), 4);
  EXPECT_EQ(Count(store,
                  "SELECT COUNT(*) FROM session se JOIN arm a ON a.id = se.arm_id WHERE a.label = 'ext' AND se.processes_json = '[]' "
                  "AND json_extract(se.served_json, '$.id') = 'ext-model'"),
            2);
  // Its second session used other nonce markers, so its prompts missed the prefix
  // cache the server kept: every sample passed cache_bound, no marker repeated.
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM sample WHERE valid = 0"), 0)
      << Text(store,
              "SELECT group_concat(session_id || ' ' || case_id || ' level ' || level || ' slot ' || slot || ': ' || checks_json || ' "
              "' || error, char(10)) FROM sample WHERE valid = 0");
  EXPECT_EQ(Count(store,
                  "SELECT COUNT(*) FROM sample x JOIN session a ON a.id = x.session_id JOIN sample y ON y.nonce = x.nonce "
                  "JOIN session b ON b.id = y.session_id WHERE a.order_index = 1 AND b.order_index = 2 AND x.nonce <> ''"),
            0);
}

TEST_F(Campaigns, ARetriedSessionKeepsEveryAttemptsLogsAndSaysWhichSignalEndedItsProcess) {
  // A command arm whose first launch dies of SIGKILL before it serves (its shell kills
  // itself); the retry serves.
  const fs::path once = Dir() / "once";
  const std::string arms = fmt::format(
      "  - label: flaky\n    source: {{kind: command, command: 'if [ ! -e {once} ]; then touch {once}; echo first attempt >&2; "
      "kill -9 $$; fi; exec {bin} serve --model {{model}} --listen 127.0.0.1:{{port}} --threads 1'}}\n"
      "  - label: two\n    source: {{kind: binary, coordinator: {bin}}}\n    options: [--threads, \"1\"]",
      fmt::arg("once", once.string()), fmt::arg("bin", TANDEM_RT_BIN));
  const fs::path file = WriteShortCampaign(arms, "{per_layout: 2, order: AB, retry: 1}");
  const auto r = testing::RunCommand(TANDEM_BIN, {"run", file.string(), "--quiet"}, 300s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const fs::path first = Dir() / "store-logs" / "session-0" / "attempt-1";
  const fs::path second = Dir() / "store-logs" / "session-0" / "attempt-2";
  EXPECT_NE(r.err.find(fmt::format("session 1 (solo, flaky) failed: the coordinator was killed by signal 9 (SIGKILL) (see {}); retrying",
                                   (first / "coordinator.log").string())),
            std::string::npos)
      << r.err;
  // Each attempt's logs are kept apart: the failed one's output is still there.
  EXPECT_NE(ReadFile(first / "coordinator.log").find("first attempt"), std::string::npos);
  EXPECT_NE(ReadFile(first / "failure.txt").find("the coordinator was killed by signal 9 (SIGKILL)"), std::string::npos);
  EXPECT_TRUE(fs::exists(second / "coordinator.log"));
  EXPECT_EQ(ReadFile(second / "coordinator.log").find("first attempt"), std::string::npos);
  EXPECT_FALSE(fs::exists(second / "failure.txt"));
  EXPECT_TRUE(fs::exists(Dir() / "store-logs" / "session-1" / "attempt-1" / "coordinator.log"));
  const store::Store store = store::Store::Open(Dir() / "store.db");
  EXPECT_EQ(Count(store, "SELECT attempts FROM session WHERE order_index = 0"), 2);
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM session WHERE status = 'complete'"), 2);
  EXPECT_EQ(Text(store, "SELECT json_extract(processes_json, '$[0].log') FROM session WHERE order_index = 0"),
            (second / "coordinator.log").string());
  // `tandem show` points at the last attempt's logs and says where the earlier one's are and why it failed.
  const std::string id = std::to_string(Count(store, "SELECT id FROM session WHERE order_index = 0"));
  const auto shown = testing::RunCommand(TANDEM_BIN, {"show", (Dir() / "store.db").string(), id});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("log " + (second / "coordinator.log").string()), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find(fmt::format("attempt 1 {}: failed: the coordinator was killed by signal 9 (SIGKILL)", first.string())),
            std::string::npos)
      << shown.out;
  EXPECT_TRUE(LeftRunning(Model().string()).empty());
}

TEST_F(Campaigns, AnApiKeyComesFromTheEnvironmentAndNoSecretIsStoredOrPrinted) {
  const std::string arms = fmt::format(
      "  - label: keyed\n    source: {{kind: binary, coordinator: {0}}}\n"
      "    options: [--threads, \"1\", --api-key, s3cr3t]\n"
      "    env: {{HF_TOKEN: s3cr3t, OMP_NUM_THREADS: \"1\"}}\n"
      "    api_key_env: TANDEM_TEST_API_KEY\n"
      "  - label: cmd\n    source: {{kind: command, command: '{0} serve --model {{model}} --listen 127.0.0.1:{{port}} --threads 1 "
      "--api-key=s3cr3t'}}\n"
      "    api_key_env: TANDEM_TEST_API_KEY",
      TANDEM_RT_BIN);
  const fs::path file = WriteShortCampaign(arms);
  const ScopedEnv key("TANDEM_TEST_API_KEY", "s3cr3t");
  const auto dry = testing::RunCommand(TANDEM_BIN, {"run", file.string(), "--dry-run"}, 60s);
  ASSERT_EQ(dry.exit_code, 0) << dry.out << dry.err;
  EXPECT_EQ((dry.out + dry.err).find("s3cr3t"), std::string::npos) << dry.out << dry.err;
  EXPECT_NE(dry.out.find("options --threads 1 --api-key <redacted>"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("--api-key=<redacted>"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("API key from $TANDEM_TEST_API_KEY"), std::string::npos) << dry.out;

  const auto r = testing::RunCommand(TANDEM_BIN, {"run", file.string(), "--quiet"}, 300s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ((r.out + r.err).find("s3cr3t"), std::string::npos) << r.out << r.err;
  const fs::path db = Dir() / "store.db";
  {
    const store::Store store = store::Store::Open(db);
    EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM session WHERE status = 'complete'"), 2);
    EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM sample WHERE valid = 1"), 2);
    // What was stored says what was redacted, and keeps what was not.
    const json launch = json::parse(Text(store, "SELECT launch_json FROM arm WHERE label = 'keyed'"));
    EXPECT_EQ(launch["env"], (json{{"HF_TOKEN", "<redacted>"}, {"OMP_NUM_THREADS", "1"}})) << launch;
    EXPECT_EQ(launch["options"], (json{"--threads", "1", "--api-key", "<redacted>"})) << launch;
    EXPECT_EQ(launch["api_key_env"], "TANDEM_TEST_API_KEY") << launch;
    const std::string yaml = Text(store, "SELECT yaml FROM campaign");
    EXPECT_NE(yaml.find("env: {HF_TOKEN: \"<redacted>\", OMP_NUM_THREADS: \"1\"}"), std::string::npos) << yaml;
  }
  // No byte of the store (nor of anything beside it) holds the secret.
  for (const auto& e : fs::recursive_directory_iterator(Dir())) {
    if (e.is_regular_file() && e.path() != file) {
      EXPECT_EQ(ReadFile(e.path()).find("s3cr3t"), std::string::npos) << e.path();
    }
  }
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{{"report", db.string()},
                                                                                    {"sessions", db.string()},
                                                                                    {"show", db.string(), "1"},
                                                                                    {"show", db.string(), "2"},
                                                                                    {"gate", db.string(), "--json"},
                                                                                    {"export", db.string(), "--format", "json"}}) {
    const auto read = testing::RunCommand(TANDEM_BIN, args, 60s);
    EXPECT_NE(read.out, "") << args[0] << read.err;
    EXPECT_EQ((read.out + read.err).find("s3cr3t"), std::string::npos) << args[0] << ":\n" << read.out << read.err;
  }
  const auto report = testing::RunCommand(TANDEM_BIN, {"report", db.string()}, 60s);
  EXPECT_NE(report.out.find("environment `HF_TOKEN=<redacted> OMP_NUM_THREADS=1`"), std::string::npos) << report.out;
  // --resume reads the secrets from the campaign file, which must be the one the campaign started from.
  const auto resumed = testing::RunCommand(TANDEM_BIN, {"run", "--resume", db.string(), "--quiet"}, 120s);
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  std::ofstream(file, std::ios::app) << "# edited\n";
  const auto edited = testing::RunCommand(TANDEM_BIN, {"run", "--resume", db.string(), "--quiet"}, 120s);
  EXPECT_EQ(edited.exit_code, 2) << edited.out << edited.err;
  EXPECT_NE(edited.err.find(fmt::format("{} changed since the campaign started", file.string())), std::string::npos) << edited.err;
  EXPECT_TRUE(LeftRunning(Model().string()).empty());
}

TEST_F(Campaigns, AServerThatWantsAnApiKeyFailsItsSessionAtOnceWhenTheArmGivesNone) {
  const std::string arms = fmt::format(
      "  - label: keyed\n    source: {{kind: binary, coordinator: {0}}}\n    options: [--threads, \"1\", --api-key, s3cr3t]\n"
      "  - label: two\n    source: {{kind: binary, coordinator: {0}}}\n    options: [--threads, \"1\"]",
      TANDEM_RT_BIN);
  const auto start = std::chrono::steady_clock::now();
  const auto r = testing::RunCommand(TANDEM_BIN, {"run", WriteShortCampaign(arms).string(), "--quiet"}, 300s);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_LT(took, 40s) << "the harness waited for a server that had refused it";  // launch_s is 60
  const store::Store store = store::Store::Open(Dir() / "store.db");
  const std::string reason = Text(store, "SELECT reason FROM session WHERE order_index = 0");
  EXPECT_NE(reason.find("answered 401: the server requires an API key"), std::string::npos) << reason;
  EXPECT_NE(reason.find("api_key_env"), std::string::npos) << reason;
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM session WHERE status = 'complete'"), 1);
  EXPECT_TRUE(LeftRunning(Model().string()).empty());
}

// A coordinator that exits at once (here an option it does not know) was reported as one
// that "did not report where it listens within 300 s": its exit, how soon, and its last
// words are the session's failure now.
// A launch takes as long as the workers' load: launch_s counts from the coordinator's
// last "loading progress" line, not from the start. Here each worker's load (48 expert
// slices, 150 ms each: 7 s) is well past launch_s (4 s); the coordinator reports
// progress every 2 s.
TEST_F(Campaigns, TheLaunchTimeoutCountsFromTheLastLoadingProgress) {
  std::string arms;
  for (const char* label : {"one", "two"}) {
    arms += fmt::format(
        "  - label: {0}\n    source: {{kind: binary, coordinator: {1}, worker: {1}}}\n    options: [--threads, \"1\"]\n"
        "    env: {{TANDEM_DEBUG_LOAD_DELAY_MS: \"150\"}}\n",
        label, TANDEM_RT_BIN);
  }
  const fs::path file = WriteShortCampaign(arms, "{per_layout: 2, order: AB, retry: 0}", 1);
  std::string yaml = ReadFile(file);
  yaml.replace(yaml.find("launch_s: 60"), 12, "launch_s: 4");
  std::ofstream(file) << yaml;
  const auto r = testing::RunCommand(TANDEM_BIN, {"run", file.string(), "--quiet"}, 300s);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const store::Store store = store::Store::Open(Dir() / "store.db");
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM session WHERE status = 'complete'"), 2) << Text(store, "SELECT reason FROM session");
  bool progress = false;
  for (const auto& entry : fs::recursive_directory_iterator(Dir())) {
    if (entry.path().filename() == "coordinator.log.stdout")
      progress |= ReadFile(entry.path()).find("loading progress: expert worker rank 1") != std::string::npos;
  }
  EXPECT_TRUE(progress) << "the coordinator's log must show the workers' loading progress";
  EXPECT_TRUE(LeftRunning(Model().string()).empty());
}

TEST_F(Campaigns, ACoordinatorThatExitsAtOnceIsReportedWithItsCodeAndLastWords) {
  const std::string arms = fmt::format(
      "  - label: broken\n    source: {{kind: binary, coordinator: {0}}}\n    options: [--threads, \"1\", --no-such-flag]\n"
      "  - label: two\n    source: {{kind: binary, coordinator: {0}}}\n    options: [--threads, \"1\"]",
      TANDEM_RT_BIN);
  const auto r = testing::RunCommand(TANDEM_BIN, {"run", WriteShortCampaign(arms).string(), "--quiet"}, 300s);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const store::Store store = store::Store::Open(Dir() / "store.db");
  const std::string reason = Text(store, "SELECT reason FROM session WHERE order_index = 0");
  EXPECT_NE(reason.find("exited with code 2"), std::string::npos) << reason;
  EXPECT_NE(reason.find(" s; its log ends: "), std::string::npos) << reason;
  EXPECT_NE(reason.find("--no-such-flag"), std::string::npos) << reason;
  EXPECT_EQ(reason.find("did not report where it listens"), std::string::npos) << reason;
  EXPECT_TRUE(LeftRunning(Model().string()).empty());
}

// SIGINT to `tandem run` stops the running session at once, tears it down, records it
// as interrupted and exits 130; --resume then finishes the campaign.
TEST_F(Campaigns, SigintStopsTheSessionTearsItDownAndExits130ThenResumeFinishes) {
  const fs::path file = Dir() / "campaign.yaml";
  std::ofstream(file) << fmt::format(
      R"(name: interrupted
model: {{path: {model}}}
arms:
  - label: one
    source: {{kind: binary, coordinator: {rt}}}
    options: [--threads, "1", --debug-slowdown, "0.9"]
  - label: two
    source: {{kind: binary, coordinator: {rt}}}
    options: [--threads, "1"]
layouts:
  - name: solo
    workers: 0
sessions: {{per_layout: 2, order: AB, retry: 0}}
workloads:
  - {{name: battery, kind: battery, cases: [hello], repeats: 40, max_tokens: 64, counting: false}}
corpus: {corpus}
store: {store}
timeouts: {{launch_s: 60, request_s: 60, teardown_grace_s: 5}}
)",
      fmt::arg("model", Model().string()), fmt::arg("rt", TANDEM_RT_BIN),
      fmt::arg("corpus", std::string(TANDEM_SOURCE_DIR) + "/campaigns/corpus.yaml"), fmt::arg("store", (Dir() / "store.db").string()));
  testing::ChildProcess run(TANDEM_BIN, {"run", file.string(), "--quiet"}, (Dir() / "run.stderr").string());
  // Once the first session's server is up and answering.
  for (int i = 0; i < 300 && ProcessesMentioning(Model().string()).empty(); ++i) std::this_thread::sleep_for(50ms);
  ASSERT_FALSE(ProcessesMentioning(Model().string()).empty());
  std::this_thread::sleep_for(1500ms);
  const auto sent = std::chrono::steady_clock::now();
  run.Signal(SIGINT);
  const auto code = run.WaitExit(60s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 130);
  EXPECT_LT(std::chrono::steady_clock::now() - sent, 20s) << "the session stopped at once, not after its workload";
  EXPECT_TRUE(LeftRunning(Model().string()).empty());
  {
    const store::Store store = store::Store::Open(Dir() / "store.db");
    const std::string reason = Text(store, "SELECT reason FROM session WHERE order_index = 0");
    EXPECT_EQ(reason.rfind("interrupted: the harness received SIGINT during this session", 0), 0u) << reason;
  }
  const auto resumed = testing::RunCommand(TANDEM_BIN, {"run", "--resume", (Dir() / "store.db").string(), "--quiet"}, 300s);
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  const store::Store store = store::Store::Open(Dir() / "store.db");
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM session WHERE status = 'complete'"), 2);
  EXPECT_TRUE(LeftRunning(Model().string()).empty());
}

TEST_F(Campaigns, AnApiKeyVariableThatIsNotSetIsRefusedBeforeAnythingStarts) {
  const std::string arms = fmt::format(
      "  - label: keyed\n    source: {{kind: binary, coordinator: {0}}}\n    api_key_env: TANDEM_TEST_UNSET_VARIABLE\n"
      "  - label: two\n    source: {{kind: binary, coordinator: {0}}}",
      TANDEM_RT_BIN);
  const auto r = testing::RunCommand(TANDEM_BIN, {"run", WriteShortCampaign(arms).string(), "--quiet"}, 60s);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("arm 'keyed': api_key_env: the environment variable TANDEM_TEST_UNSET_VARIABLE is not set"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(Dir() / "store.db"));
  EXPECT_FALSE(fs::exists(Dir() / "store-logs"));
}

TEST_F(Campaigns, EveryProcessOfASessionGetsTheSessionsOwnWorkerTokenWhichIsNeverStored) {
  // A binary arm through a wrapper that notes its role and token, and a command arm that does the same.
  const fs::path tokens = Dir() / "tokens";
  const fs::path fake = Dir() / "fake-rt";
  std::ofstream(fake) << fmt::format(
      "#!/bin/sh\n[ \"$1\" = --version ] || printf '%s %s\\n' \"$1\" \"${{TANDEM_WORKER_TOKEN-unset}}\" >> {}\nexec {} \"$@\"\n",
      tokens.string(), TANDEM_RT_BIN);
  fs::permissions(fake, fs::perms::owner_all);
  const std::string arms = fmt::format(
      "  - label: bin\n    source: {{kind: binary, coordinator: {fake}}}\n    options: [--threads, \"1\"]\n"
      "  - label: cmd\n    source: {{kind: command, command: 'printf \"command %s\\n\" \"${{TANDEM_WORKER_TOKEN-unset}}\" >> {tokens}; "
      "exec {bin} serve --model {{model}} --listen 127.0.0.1:{{port}} --threads 1'}}",
      fmt::arg("fake", fake.string()), fmt::arg("tokens", tokens.string()), fmt::arg("bin", TANDEM_RT_BIN));
  const auto r =
      testing::RunCommand(TANDEM_BIN, {"run", WriteShortCampaign(arms, "{per_layout: 2, order: AB}", 2).string(), "--quiet"}, 300s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::map<std::string, std::set<std::string>> by_role;
  std::istringstream lines(ReadFile(tokens));
  for (std::string role, token; lines >> role >> token;) by_role[role].insert(token);
  // Session 1: two workers and the coordinator, one token; session 2 (the command arm): another.
  ASSERT_EQ(by_role["expert"].size(), 1u) << ReadFile(tokens);
  ASSERT_EQ(by_role["serve"], by_role["expert"]) << ReadFile(tokens);
  ASSERT_EQ(by_role["command"].size(), 1u) << ReadFile(tokens);
  const std::string first = *by_role["serve"].begin(), second = *by_role["command"].begin();
  EXPECT_NE(first, second);
  for (const std::string& token : {first, second}) {
    EXPECT_EQ(token.size(), 64u) << token;
    EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos) << token;
    for (const auto& e : fs::recursive_directory_iterator(Dir())) {
      if (e.is_regular_file() && e.path() != tokens) {
        EXPECT_EQ(ReadFile(e.path()).find(token), std::string::npos) << e.path();
      }
    }
    EXPECT_EQ((r.out + r.err).find(token), std::string::npos);
  }
  EXPECT_TRUE(LeftRunning(Model().string()).empty());
}

}  // namespace
}  // namespace tandem::harness
