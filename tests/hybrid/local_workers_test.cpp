// Workers started by `--spawn-workers` (LocalWorkers) never outlive their coordinator
// and start with a clean signal state, whatever the coordinator blocked or ignored.
#include "runtime/hybrid/local_workers.hpp"

#include <algorithm>
#include <csignal>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <pthread.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/runtime/eval_run.hpp"
#include "tests/runtime/tiny_model.hpp"
#include "tests/support/child_process.hpp"

namespace tandem::rt {
namespace {

using tandem::testing::ChildProcess;
using tandem::testing::ReadFile;
using tandem::testing::TempDir;
using tandem::testing::TinyCheckpoint;
using tandem::testing::WriteFile;
using namespace std::chrono_literals;

// A /proc/PID/status field ("SigBlk", "State", ...), or nullopt once the process is gone.
std::optional<std::string> StatusField(int pid, const std::string& field) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  if (!in) return std::nullopt;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) {
      const auto value = line.find_first_not_of(" \t", field.size() + 1);
      return value == std::string::npos ? "" : line.substr(value);
    }
  }
  return std::nullopt;
}

// Gone: no /proc entry, or a zombie nobody reaps (a reparented child under an init
// that does not reap, as in some sandboxes: it holds no socket and runs no code). A
// multi-threaded process's leader shows 'Z' as soon as it exits, while its other threads
// are still exiting and its descriptors still open: gone only once it is the last task.
bool Gone(int pid) {
  const auto state = StatusField(pid, "State");
  if (!state) return true;
  if (state->front() != 'Z') return false;
  std::error_code ec;
  const auto tasks = std::filesystem::directory_iterator(fmt::format("/proc/{}/task", pid), ec);
  return ec || std::distance(std::filesystem::begin(tasks), std::filesystem::end(tasks)) <= 1;
}

// The processes whose parent is `parent` and whose command line contains `word`.
std::vector<int> ChildrenOf(int parent, const std::string& word) {
  std::vector<int> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const int pid = std::stoi(name);
    const auto ppid = StatusField(pid, "PPid");
    if (!ppid || std::stoi(*ppid) != parent || Gone(pid)) continue;
    std::string cmdline = ReadFile(entry.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(word) != std::string::npos) out.push_back(pid);
  }
  return out;
}

// The inodes of the TCP sockets in LISTEN state, from /proc/net/tcp.
std::set<std::string> ListeningInodes() {
  std::set<std::string> inodes;
  std::istringstream table(ReadFile("/proc/net/tcp"));
  std::string line;
  std::getline(table, line);  // the heading
  while (std::getline(table, line)) {
    std::istringstream f(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
    f >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
    if (state == "0A") inodes.insert(inode);
  }
  return inodes;
}

// The inodes of the listening sockets `pid` holds open.
std::vector<std::string> ListeningSocketsOf(int pid) {
  const auto listening = ListeningInodes();
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& fd : std::filesystem::directory_iterator(fmt::format("/proc/{}/fd", pid), ec)) {
    const auto target = std::filesystem::read_symlink(fd.path(), ec).string();
    if (target.rfind("socket:[", 0) != 0) continue;
    const auto inode = target.substr(8, target.size() - 9);
    if (listening.contains(inode)) out.push_back(inode);
  }
  return out;
}

// `tandem-rt serve` blocks SIGTERM and SIGINT in every thread (to sigwait on them); its
// spawned workers must neither inherit that nor outlive it when it is SIGKILLed.
TEST(SpawnedWorkers, DieWithTheirServerWhenItIsKilledAndStartWithNothingBlocked) {
  const auto log = TempDir("serve") / "stderr.log";
  ChildProcess server(TANDEM_RT_BIN,
                      {"serve", "--model", TinyCheckpoint().string(), "--listen", "127.0.0.1:0", "--threads", "1", "--draft", "off",
                       "--spawn-workers", "2"},
                      log.string());
  ASSERT_TRUE(server.ReadLine(30s).has_value()) << ReadFile(log);
  const auto ready = server.ReadLine(60s);
  ASSERT_TRUE(ready && ready->find("ready") != std::string::npos) << ReadFile(log);
  const std::vector<int> workers = ChildrenOf(server.pid(), " expert ");
  ASSERT_EQ(workers.size(), 2u) << ReadFile(log);
  // The workers' listening sockets, by inode rather than port: once they are closed, another
  // test running in parallel may bind the same port number.
  std::vector<std::string> sockets;
  for (int pid : workers) {
    EXPECT_EQ(StatusField(pid, "SigBlk").value_or("?"), "0000000000000000") << "worker " << pid;
    // A fresh token, in the environment (private to the user), never on the command line.
    std::string environ = "\n" + ReadFile(fmt::format("/proc/{}/environ", pid));
    std::replace(environ.begin(), environ.end(), '\0', '\n');
    const auto at = environ.find("\nTANDEM_WORKER_TOKEN=");
    ASSERT_NE(at, std::string::npos) << "worker " << pid;
    const std::string token = environ.substr(at + 21, environ.find('\n', at + 1) - at - 21);
    EXPECT_EQ(token.size(), 64u);
    EXPECT_EQ(ReadFile(fmt::format("/proc/{}/cmdline", pid)).find(token), std::string::npos);
    const auto listening = ListeningSocketsOf(pid);
    ASSERT_EQ(listening.size(), 1u) << "worker " << pid;
    sockets.push_back(listening[0]);
  }
  server.Kill();  // SIGKILL: no destructor runs, nothing reaps the workers
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  auto all_gone = [&] { return std::all_of(workers.begin(), workers.end(), Gone); };
  while (!all_gone() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(50ms);
  const bool gone = all_gone();
  for (int pid : workers) {
    if (!Gone(pid)) ::kill(pid, SIGKILL);  // leave nothing running, whatever the verdict
  }
  EXPECT_TRUE(gone) << "spawned workers outlived their SIGKILLed server";
  // Nothing else (a grandchild that inherited the descriptor) keeps a worker's socket listening.
  const auto still_listening = ListeningInodes();
  for (const auto& inode : sockets) EXPECT_FALSE(gone && still_listening.contains(inode)) << "socket " << inode << " still listens";
}

// A stand-in for tandem-rt: records its signal mask and ignored set, then announces
// itself as a worker would.
std::filesystem::path ProbeExecutable(const std::filesystem::path& dir) {
  const auto script = dir / "probe.sh";
  WriteFile(script,
            "#!/bin/sh\n"
            "# argv: expert --listen ADDR --model DIR ...\n"
            "# Builtins only: the shell's own status (a child's would show the shell's mask while it waits).\n"
            "while IFS= read -r line; do\n"
            "  case \"$line\" in SigBlk:* | SigIgn:*) echo \"$line\" ;; esac\n"
            "done < /proc/$$/status > \"$5/signals.$$\"\n"
            "echo 'tandem-rt expert: listening on 127.0.0.1:1'\n"
            "exec sleep 60\n");
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  return script;
}

TEST(LocalWorkers, ChildrenStartWithNoSignalBlockedOrIgnored) {
  const auto dir = TempDir("probe");
  const auto probe = ProbeExecutable(dir);
  // As serve does: SIGTERM and SIGINT blocked in the spawning thread; and something ignored.
  sigset_t blocked, previous;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGTERM);
  sigaddset(&blocked, SIGINT);
  pthread_sigmask(SIG_BLOCK, &blocked, &previous);
  struct sigaction ignore {
  }, old_usr2{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGUSR2, &ignore, &old_usr2);
  {
    LocalWorkers workers(dir, 2, false, 1, probe);
    EXPECT_EQ(workers.worker_addresses().size(), 2u);
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  sigaction(SIGUSR2, &old_usr2, nullptr);
  int probes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("signals.", 0) != 0) continue;
    ++probes;
    EXPECT_EQ(ReadFile(entry.path()), "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n") << entry.path();
  }
  EXPECT_EQ(probes, 2);
}

}  // namespace
}  // namespace tandem::rt
