// How the harness says a process ended (an exit code, or the signal that killed it),
// here and on other hosts, and how a process on another host gets its environment: the
// wrapper script that ssh runs there is run here by /bin/sh, which is all ssh adds to it.
#include "harness/launch/process_end.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "harness/launch/host.hpp"
#include "harness/launch/managed_process.hpp"
#include "harness/launch/session_process.hpp"
#include "harness/launch/shell.hpp"

namespace tandem::harness {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class ProcessEnds : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("tandem-process-end-{}-{}", ::testing::UnitTest::GetInstance()->current_test_info()->name(), ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs argv to its end; returns how it ended.
  ProcessEnd RunToEnd(const std::vector<std::string>& argv, const std::string& input = "", std::string* last_line = nullptr) {
    ManagedProcess p(argv, {}, dir_ / "run.log", "", input);
    for (int i = 0; i < 1000 && p.running(); ++i) std::this_thread::sleep_for(10ms);
    const std::optional<ProcessEnd> end = p.End();
    EXPECT_TRUE(end.has_value());
    if (last_line != nullptr) *last_line = p.LastLine(5s);
    return end.value_or(ProcessEnd{});
  }

  static std::string Read(const fs::path& file) {
    std::ifstream in(file);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  fs::path dir_;
};

TEST_F(ProcessEnds, AreDescribedAsAnExitCodeOrAKillingSignal) {
  EXPECT_EQ(ProcessEnd::FromWaitStatus(3 << 8).Describe(), "exited with code 3");
  EXPECT_EQ(ProcessEnd::FromWaitStatus(9).Describe(), "was killed by signal 9 (SIGKILL)");
  EXPECT_EQ(ProcessEnd::FromWaitStatus(0x80 | 11).Describe(), "was killed by signal 11 (SIGSEGV), core dumped");
  EXPECT_EQ(ProcessEnd{.signal = 15}.Describe(), "was killed by signal 15 (SIGTERM)");
}

TEST_F(ProcessEnds, OfALocalProcessAreTakenFromItsWaitStatus) {
  EXPECT_EQ(RunToEnd({"/bin/sh", "-c", "kill -9 $$"}).Describe(), "was killed by signal 9 (SIGKILL)");
  EXPECT_EQ(RunToEnd({"/bin/sh", "-c", "exit 9"}).Describe(), "exited with code 9");
  EXPECT_EQ(RunToEnd({"/bin/sh", "-c", "exit 137"}).Describe(), "exited with code 137");
}

TEST_F(ProcessEnds, OfASessionProcessNameItsRoleAndLog) {
  const std::unique_ptr<Host> local = Host::Local(HostSpec{.name = "local"});
  ProcessPlan plan;
  plan.role = "worker-0";
  plan.host = local.get();
  plan.argv = {"/bin/sh", "-c", "echo going >&2; kill -9 $$"};
  plan.log = dir_ / "worker-0.log";
  auto process = SessionProcess::Start(plan, 10s);
  for (int i = 0; i < 1000 && process->running(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(process->DescribeExit(), fmt::format("the worker-0 was killed by signal 9 (SIGKILL) (see {})", plan.log.string()));
}

TEST_F(ProcessEnds, OnAnotherHostAreReportedByTheWrapperWhichTellsASignalFromAnExitCode) {
  const auto remote = [&](const std::string& shell) {
    std::string last;
    const ProcessEnd ssh = RunToEnd({"/bin/sh", "-c", RemoteProcessScript({"/bin/sh", "-c", shell})}, "", &last);
    const std::optional<ProcessEnd> there = ParseRemoteEnd(last);
    EXPECT_TRUE(there.has_value()) << last;
    return std::pair{ssh, there.value_or(ProcessEnd{})};
  };
  const auto [ssh_killed, killed] = remote("kill -9 $$");
  EXPECT_EQ(killed.Describe(), "was killed by signal 9 (SIGKILL)");
  EXPECT_EQ(ssh_killed.code, 9);  // what ssh would return: ambiguous without the wrapper's line
  EXPECT_EQ(remote("exit 9").second.Describe(), "exited with code 9");
  EXPECT_EQ(remote("exit 137").second.Describe(), "exited with code 137");
  EXPECT_EQ(remote("exit 0").second.Describe(), "exited with code 0");
  EXPECT_EQ(ParseRemoteEnd("tandem-ended signal 11 core")->Describe(), "was killed by signal 11 (SIGSEGV), core dumped");
  EXPECT_FALSE(ParseRemoteEnd("listening on 127.0.0.1:5"));
  // The command's own output is untouched, and it runs in a process group of its own.
  const fs::path out = dir_ / "out";
  std::string last;
  RunToEnd({"/bin/sh", "-c",
            RemoteProcessScript({"/bin/sh", "-c", fmt::format("echo $$ $(cut -d' ' -f5 /proc/$$/stat) > {}; echo said", out.string())})},
           "", &last);
  EXPECT_EQ(last, "tandem-ended code 0");
  std::istringstream ids(Read(out));
  int pid = 0, group = 0;
  ids >> pid >> group;
  EXPECT_EQ(pid, group) << Read(out);
  EXPECT_EQ(Read(dir_ / "run.log.stdout").substr(0, 15), "tandem-process ");
  EXPECT_NE(Read(dir_ / "run.log.stdout").find(fmt::format("tandem-process {} ", pid)), std::string::npos);
  EXPECT_NE(Read(dir_ / "run.log.stdout").find("said\n"), std::string::npos);
}

TEST_F(ProcessEnds, AProcessOnAnotherHostGetsItsEnvironmentOverStdinNotOnACommandLine) {
  const std::map<std::string, std::string> env = {{"TANDEM_WORKER_TOKEN", "0123abcd"}, {"ODD", "it's \"quoted\"\nover $two lines"}};
  const fs::path out = dir_ / "env";
  const std::vector<std::string> command = {
      "/bin/sh", "-c",
      fmt::format("printf '%s|%s' \"$TANDEM_WORKER_TOKEN\" \"$ODD\" > {}; tr '\\0' ' ' < /proc/$$/cmdline >> {}", out.string(),
                  out.string())};
  const std::string script = RemoteProcessScript(command);
  EXPECT_EQ(script.find("0123abcd"), std::string::npos);
  std::string last;
  EXPECT_EQ(RunToEnd({"/bin/sh", "-c", script}, EnvironmentScript(env), &last).code, 0);
  EXPECT_EQ(last, "tandem-ended code 0");
  const std::string seen = Read(out);
  EXPECT_EQ(seen.substr(0, seen.find("/bin/sh")), "0123abcd|it's \"quoted\"\nover $two lines");
  EXPECT_EQ(seen.find("0123abcd", 1), std::string::npos) << "on the command line: " << seen;
  EXPECT_THROW(EnvironmentScript({{"A B", "x"}}), std::invalid_argument);
}

// The input (a remote process's environment, its worker token among it) goes through a
// pipe: a temporary file, even unlinked, reaches the disk when /tmp is not a tmpfs. More
// than a pipe holds arrives whole; a process that never reads it neither blocks the harness
// nor kills it with SIGPIPE.
TEST_F(ProcessEnds, AProcessInputGoesThroughAPipeNeverAFile) {
  const std::string input = "export TANDEM_WORKER_TOKEN=0123abcd\n" + std::string(1 << 20, 'x');
  std::string last;
  // What its stdin is: pipe:[inode], or a file's path ("/tmp/#123 (deleted)").
  const std::string what = "echo $(wc -c) $(readlink /proc/$$/fd/0)";
  EXPECT_EQ(RunToEnd({"/bin/sh", "-c", what}, input, &last).code, 0);
  EXPECT_EQ(last.substr(0, last.find('[')), fmt::format("{} pipe:", input.size())) << last;
  EXPECT_EQ(RunToEnd({"/bin/sh", "-c", "exit 3"}, input).code, 3);
  const auto start = std::chrono::steady_clock::now();
  {
    ManagedProcess unread({"/bin/sh", "-c", "exec sleep 30"}, {}, dir_ / "unread.log", "", input);
    EXPECT_TRUE(unread.running());
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  // Without input, stdin is /dev/null.
  EXPECT_EQ(RunToEnd({"/bin/sh", "-c", what}, "", &last).code, 0);
  EXPECT_EQ(last, "0 /dev/null");
}

TEST_F(ProcessEnds, AContainerGetsItsEnvironmentByNameOnly) {
  ProcessPlan plan;
  plan.engine = "podman";
  plan.image = "tandem/rt:a";
  plan.container_name = "tandem-x-c1-s0-worker-0";
  plan.env = {{"TANDEM_WORKER_TOKEN", "0123abcd"}, {"HF_TOKEN", "s3cr3t"}};
  plan.argv = {"expert", "--listen", "127.0.0.1:0"};
  const std::vector<std::string> argv = ContainerCommand(plan);
  const std::string line = ShellJoin(argv);
  EXPECT_NE(line.find("'--env' 'HF_TOKEN' '--env' 'TANDEM_WORKER_TOKEN'"), std::string::npos) << line;
  EXPECT_EQ(line.find("0123abcd"), std::string::npos) << line;
  EXPECT_EQ(line.find("s3cr3t"), std::string::npos) << line;
  EXPECT_EQ(argv.back(), "127.0.0.1:0");
}

}  // namespace
}  // namespace tandem::harness
