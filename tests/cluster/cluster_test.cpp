// Campaigns across machines, for real: scripts/testbed makes five hosts in network
// namespaces (a bridge between them, an OpenSSH server and a podman image store each);
// the harness runs in a sixth and reaches every host over SSH, and the runtime's TCP
// crosses veth pairs and a bridge. Needs root (CI runs as root); without it the tests
// skip and say so.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/sha256.hpp"
#include "store/store.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/run_command.hpp"

namespace tandem::harness {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kTestbed = std::string(TANDEM_SOURCE_DIR) + "/scripts/testbed";
constexpr int kHosts = 5;  // tt1: the coordinator; tt2..tt5: the workers

// Processes whose command line mentions `text`, sshd itself aside (it serves the hosts).
std::vector<std::string> ProcessesMentioning(const std::string& text) {
  std::vector<std::string> out;
  DIR* proc = ::opendir("/proc");
  while (const dirent* e = proc ? ::readdir(proc) : nullptr) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == ::getpid()) continue;
    std::string cmdline = testing::ReadProcFile(pid, "cmdline");
    if (cmdline.find(text) == std::string::npos || cmdline.rfind("/usr/sbin/sshd", 0) == 0 || cmdline.rfind("sshd:", 0) == 0) continue;
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    out.push_back(fmt::format("{}: {}", pid, cmdline.substr(0, 200)));
  }
  if (proc) ::closedir(proc);
  return out;
}

class ClusterCampaign : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::getuid() != 0) return;
    dir_ = new fs::path(fs::temp_directory_path() / fmt::format("tandem-cluster-{}", ::getpid()));
    fs::remove_all(*dir_);
    ::setenv("TANDEM_TESTBED_DIR", (*dir_ / "testbed").c_str(), 1);
    ::setenv("TANDEM_TESTBED_PREFIX", "tt", 1);
    const auto up = testing::RunCommand(kTestbed, {"up", std::to_string(kHosts)}, 120s);
    ASSERT_EQ(up.exit_code, 0) << up.out << up.err;
    const auto image = testing::RunCommand(kTestbed, {"image", "tandem-test/rt:a", TANDEM_RT_BIN}, 300s);
    ASSERT_EQ(image.exit_code, 0) << image.out << image.err;
    const auto hosts = testing::RunCommand(kTestbed, {"hosts"}, 30s);
    ASSERT_EQ(hosts.exit_code, 0) << hosts.err;
    hosts_yaml_ = new std::string(hosts.out);
  }
  static void TearDownTestSuite() {
    if (dir_ == nullptr) return;
    testing::RunCommand(kTestbed, {"down"}, 120s);
    fs::remove_all(*dir_);
    ::sync();  // the image stores' writes, flushed now rather than under the next (timing) test
    delete dir_;
    delete hosts_yaml_;
  }
  void SetUp() override {
    if (::getuid() != 0) GTEST_SKIP() << "needs root for network namespaces (CI runs as root): the cluster tests did not run";
    ASSERT_NE(dir_, nullptr);
  }
  void TearDown() override {
    if (dir_ == nullptr) return;
    // Nothing of any session may be left on any host, whatever the test did.
    std::vector<std::string> left;
    for (int i = 0; i < 100; ++i) {
      left = ProcessesMentioning(Testbed().string());
      if (left.empty()) break;
      std::this_thread::sleep_for(100ms);
    }
    EXPECT_TRUE(left.empty()) << fmt::format("left running: {}", fmt::join(left, "\n"));
    for (int h = 1; h <= kHosts; ++h) EXPECT_EQ(Containers(h), "") << "containers left on tt" << h;
  }

  static fs::path Testbed() { return *dir_ / "testbed"; }
  fs::path Dir() const {
    const fs::path d = *dir_ / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(d);
    return d;
  }
  // The containers (running or not) in host N's image store.
  static std::string Containers(int host) {
    const auto r = testing::RunCommand(
        "/bin/sh",
        {"-c", fmt::format("CONTAINERS_CONF={0}/containers.conf CONTAINERS_STORAGE_CONF={0}/tt{1}/storage.conf podman ps -a -q",
                           Testbed().string(), host)},
        60s);
    return r.out;
  }

  // A campaign over the testbed: layout tp4 (coordinator on tt1, a worker on each of
  // tt2..tt5), the arms given, the tiny preset, one battery.
  fs::path WriteCampaign(const std::string& arms, const std::string& extra_hosts = "", const std::string& workers = "[tt2, tt3, tt4, tt5]",
                         int repeats = 1, int retry = 0) const {
    const fs::path file = Dir() / "campaign.yaml";
    std::ofstream(file) << fmt::format(
        R"(name: cluster
model: {{preset: tiny, seed: 3}}
{hosts}{extra}
arms:
{arms}
layouts:
  - name: tp4
    coordinator_host: tt1
    worker_hosts: {workers}
sessions: {{per_layout: 2, order: AB, retry: {retry}}}
workloads:
  - {{name: battery, kind: battery, cases: [hello, code], repeats: {repeats}, max_tokens: 16, counting: false}}
corpus: {corpus}
store: {store}
timeouts: {{launch_s: 60, request_s: 60, teardown_grace_s: 5}}
)",
        fmt::arg("hosts", *hosts_yaml_), fmt::arg("extra", extra_hosts), fmt::arg("arms", arms), fmt::arg("workers", workers),
        fmt::arg("repeats", repeats), fmt::arg("retry", retry),
        fmt::arg("corpus", std::string(TANDEM_SOURCE_DIR) + "/campaigns/corpus.yaml"), fmt::arg("store", (Dir() / "store.db").string()));
    return file;
  }
  static std::string BinaryAndContainerArms() {
    return fmt::format(
        "  - label: bin\n    source: {{kind: binary, coordinator: {}}}\n"
        "  - label: img\n    source: {{kind: container, engine: podman, coordinator_image: tandem-test/rt:a}}",
        TANDEM_RT_BIN);
  }
  // `tandem ARGS...` in the harness's namespace.
  static testing::CommandResult Tandem(const std::vector<std::string>& args, std::chrono::seconds timeout = 600s) {
    std::vector<std::string> argv = {"run", TANDEM_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunCommand(kTestbed, argv, timeout);
  }

  // The pid of a runtime process (`role` is " expert " or " serve ") running from its
  // binary's copy on `host`, once there is one; 0 after 30 s.
  static int WaitForRuntime(const std::string& host, const std::string& role) {
    const std::string images = (Testbed() / host / "home" / ".cache" / "tandem" / "images").string();
    for (int i = 0; i < 600; ++i) {
      for (const std::string& p : ProcessesMentioning(images)) {
        const std::string cmdline = p.substr(p.find(": ") + 2);  // argv[0] is the copy (not the setsid wrapper)
        if (cmdline.rfind(images, 0) == 0 && cmdline.find(role) != std::string::npos) return std::atoi(p.c_str());
      }
      std::this_thread::sleep_for(50ms);
    }
    return 0;
  }

  static fs::path* dir_;
  static std::string* hosts_yaml_;
};

fs::path* ClusterCampaign::dir_ = nullptr;
std::string* ClusterCampaign::hosts_yaml_ = nullptr;

std::string ReadFailure(const fs::path& attempt) {
  std::ifstream in(attempt / "failure.txt");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::int64_t Count(const store::Store& store, const std::string& sql) {
  store::Statement s(store.handle(), sql);
  return s.Step() ? s.Int(0) : -1;
}

TEST_F(ClusterCampaign, ACampaignRunsAcrossFiveHostsWithABinaryAndAContainerArm) {
  const auto r = Tandem({"run", WriteCampaign(BinaryAndContainerArms()).string(), "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const store::Store store = store::Store::Open(Dir() / "store.db");
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM session WHERE status = 'complete'"), 2);
  // Per arm, role and host: the binary's sha256 computed on each host, the image's ID there.
  const std::string sha = FileSha256(TANDEM_RT_BIN);
  EXPECT_EQ(Count(store, fmt::format("SELECT COUNT(*) FROM arm_image i JOIN arm a ON a.id = i.arm_id WHERE a.label = 'bin' AND "
                                     "i.image_id = '{}' AND i.location LIKE '%/.cache/tandem/images/{}/tandem-rt'",
                                     sha, sha)),
            kHosts);
  EXPECT_EQ(Count(store, "SELECT COUNT(DISTINCT host) FROM arm_image WHERE role = 'worker'"), 4);
  EXPECT_EQ(Count(store,
                  "SELECT COUNT(*) FROM arm_image i JOIN arm a ON a.id = i.arm_id WHERE a.label = 'img' AND i.image_id LIKE "
                  "'sha256:%' AND i.location = 'tandem-test/rt:a'"),
            kHosts);
  EXPECT_EQ(Count(store, "SELECT COUNT(DISTINCT i.image_id) FROM arm_image i JOIN arm a ON a.id = i.arm_id WHERE a.label = 'img'"), 1);
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM arm WHERE label = 'img' AND coordinator_image LIKE 'sha256:%'"), 1);
  // Every host's facts, read there, before every session.
  store::Statement s(store.handle(), "SELECT host_json, processes_json FROM session ORDER BY order_index");
  while (s.Step()) {
    const json host = json::parse(s.Text(0));
    for (int h = 1; h <= kHosts; ++h) {
      const json& facts = host["hosts"][fmt::format("tt{}", h)];
      EXPECT_TRUE(facts.contains("cpu_model") && facts.contains("busy_fraction") && facts.contains("logical_cpus")) << host.dump();
    }
    std::set<std::string> hosts;
    for (const json& p : json::parse(s.Text(1))) hosts.insert(p.value("host", ""));
    EXPECT_EQ(hosts, (std::set<std::string>{"tt1", "tt2", "tt3", "tt4", "tt5"})) << s.Text(1);
  }
  // Logs came back per host and role.
  EXPECT_TRUE(fs::exists(Dir() / "store-logs" / "session-0" / "attempt-1" / "tt3-worker-1.log"));
  // The report shows where each image ran.
  const auto report = testing::RunCommand(TANDEM_BIN, {"report", (Dir() / "store.db").string()}, 120s);
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("| img | tt4 | — | `sha256:"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find(fmt::format("| bin | tt1 | `{}` | — |", sha.substr(0, 16))), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("| tt3 | "), std::string::npos) << report.out;  // its facts in the host section
  EXPECT_NE(report.out.find("Layout tp4: coordinator on host tt1, workers on tt2, tt3, tt4, tt5."), std::string::npos) << report.out;
}

TEST_F(ClusterCampaign, AWorkerKilledMidSessionFailsThatSessionWhichIsRetriedLeavingNothing) {
  testing::ChildProcess run(
      kTestbed, {"run", TANDEM_BIN, "run", WriteCampaign(BinaryAndContainerArms(), "", "[tt2, tt3, tt4, tt5]", 20, 1).string(), "--quiet"},
      (Dir() / "run.err").string());
  // The first session's worker-2 (on tt4) is a plain process of the binary arm: killed
  // once the coordinator (on tt1) serves, i.e. during the measured workload.
  const int victim = WaitForRuntime("tt4", " expert ");
  ASSERT_GT(victim, 0) << "no worker started on tt4";
  ASSERT_GT(WaitForRuntime("tt1", " serve "), 0) << "no coordinator started on tt1";
  std::this_thread::sleep_for(500ms);
  ASSERT_EQ(::kill(victim, SIGKILL), 0) << "the worker ended before it could be killed: make the workload longer";
  const auto code = run.WaitExit(600s);
  ASSERT_TRUE(code.has_value());
  std::ifstream err_file(Dir() / "run.err");
  const std::string err((std::istreambuf_iterator<char>(err_file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(*code, 0) << err;  // the retry completed it
  EXPECT_NE(err.find("the worker-2 on host tt4"), std::string::npos) << err;
  // How it ended, as the wrapper on tt4 saw it (ssh alone would have said "exited with code 9").
  EXPECT_NE(err.find("was killed by signal 9 (SIGKILL)"), std::string::npos) << err;
  // The failed attempt's logs and reason stay beside the retry's.
  EXPECT_NE(ReadFailure(Dir() / "store-logs" / "session-0" / "attempt-1").find("the worker-2 on host tt4"), std::string::npos);
  EXPECT_TRUE(fs::exists(Dir() / "store-logs" / "session-0" / "attempt-2" / "tt4-worker-2.log"));
  EXPECT_NE(err.find("retrying"), std::string::npos) << err;
  const store::Store store = store::Store::Open(Dir() / "store.db");
  EXPECT_EQ(Count(store, "SELECT attempts FROM session WHERE order_index = 0"), 2);
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM session WHERE status = 'complete'"), 2);
}

TEST_F(ClusterCampaign, AnUnreachableHostIsRefusedBeforeTheFirstSession) {
  const std::string ghost = "  - {name: ghost, ssh: root@10.213.0.99, ssh_options: [-o, ConnectTimeout=3]}\n";
  const auto r = Tandem({"run", WriteCampaign(BinaryAndContainerArms(), ghost, "[tt2, tt3, ghost, tt5]").string(), "--quiet"}, 120s);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("host ghost (ssh root@10.213.0.99)"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(Dir() / "store.db")) << "nothing may start before every host answers";
  // The dry run checks the same way.
  const auto dry = Tandem({"run", (Dir() / "campaign.yaml").string(), "--dry-run", "--check-hosts"}, 120s);
  EXPECT_EQ(dry.exit_code, 2) << dry.out << dry.err;
  EXPECT_NE(dry.err.find("host ghost"), std::string::npos) << dry.err;
}

TEST_F(ClusterCampaign, AnImageWhoseIdDiffersBetweenHostsIsRefused) {
  // The same tag everywhere, but tt3 holds a different build of it.
  const fs::path other = Dir() / "tandem-rt-other";
  fs::copy_file(TANDEM_RT_BIN, other, fs::copy_options::overwrite_existing);
  std::ofstream(other, std::ios::app) << "another build\n";
  ASSERT_EQ(testing::RunCommand(kTestbed, {"image", "tandem-test/rt:b", TANDEM_RT_BIN}, 300s).exit_code, 0);
  ASSERT_EQ(testing::RunCommand(kTestbed, {"image-on", "tt3", "tandem-test/rt:b", other.string()}, 300s).exit_code, 0);
  const std::string arms = fmt::format(
      "  - label: bin\n    source: {{kind: binary, coordinator: {}}}\n"
      "  - label: img\n    source: {{kind: container, engine: podman, coordinator_image: tandem-test/rt:b}}",
      TANDEM_RT_BIN);
  const auto r = Tandem({"run", WriteCampaign(arms).string(), "--quiet"}, 300s);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("arm 'img': the worker image tandem-test/rt:b differs between hosts"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" on tt3"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(Dir() / "store.db"));
}

TEST_F(ClusterCampaign, ResumeAfterTheHarnessIsKilledLeavesNothingRunningOnAnyHost) {
  const fs::path file = WriteCampaign(BinaryAndContainerArms(), "", "[tt2, tt3, tt4, tt5]", 20);
  int killed = 0;
  {
    testing::ChildProcess run(kTestbed, {"run", TANDEM_BIN, "run", file.string(), "--quiet"}, (Dir() / "first.err").string());
    // Kill the harness (nsenter execs it: this pid is tandem) while a session runs.
    ASSERT_GT(WaitForRuntime("tt1", " serve "), 0) << "no session started";
    std::this_thread::sleep_for(500ms);
    killed = run.pid();
    run.Kill();
  }
  // What the killed run could not remove: its SSH control directory.
  const fs::path stale_control = fs::path("/tmp") / fmt::format("tandem-ssh-{}", killed);
  EXPECT_TRUE(fs::exists(stale_control));
  // Its local children died with it; on the other hosts its processes go on.
  std::this_thread::sleep_for(1000ms);
  EXPECT_GT(WaitForRuntime("tt3", " expert "), 0) << "expected the killed harness's worker on tt3 still running";
  const auto resumed = Tandem({"run", "--resume", (Dir() / "store.db").string(), "--quiet"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.err.find("left running by the interrupted run"), std::string::npos) << resumed.err;
  EXPECT_FALSE(fs::exists(stale_control)) << "the resumed run removes a killed run's control directory";
  const store::Store store = store::Store::Open(Dir() / "store.db");
  EXPECT_EQ(Count(store, "SELECT COUNT(*) FROM session WHERE status = 'complete'"), 2);
  // TearDown checks every host: no process and no container left.
}

}  // namespace
}  // namespace tandem::harness
