#pragma once

#include <atomic>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "harness/campaign/campaign.hpp"
#include "harness/campaign/corpus.hpp"
#include "harness/campaign/nonce.hpp"
#include "harness/campaign/session_plan.hpp"
#include "harness/launch/arm.hpp"
#include "harness/launch/cluster.hpp"
#include "harness/launch/host.hpp"
#include "runtime/model/tokenizer.hpp"
#include "store/gate_design.hpp"
#include "store/session_scores.hpp"
#include "store/store.hpp"

// The jobs of a campaign run, each in a file of its own, for campaign_runner.cpp (which
// reads down them: prepare, print the plan or record the campaign, run each session,
// stop a decided layout, summarise) and nothing else.
namespace tandem::harness {

class ArmInstance;

// Everything a run needs that does not depend on the session.
struct Prepared {
  const Campaign* campaign = nullptr;
  Corpus corpus;
  std::vector<ResolvedArm> arms;
  std::filesystem::path model;
  std::string model_revision;
  std::optional<rt::Tokenizer> tokenizer;
  std::optional<NonceBook> nonces;
  std::vector<PlannedSession> plan;
  int requests_per_session = 0;
  std::unique_ptr<Cluster> cluster;  // null in a dry run that does not check hosts
  // Every secret value the processes get: scrubbed from what is stored and printed.
  std::vector<std::string> secrets;
};

// The arms resolved (built, images read), the model in place, the plan made, every host
// checked (unless a dry run without check_hosts).
Prepared Prepare(const Campaign& c, bool dry_run, bool check_hosts, std::ostream& log);

// `tandem run --dry-run`: what would run, resolved.
void PrintPlan(const Prepared& p, std::ostream& out);

// The live status line, on a terminal only.
class Progress {
 public:
  Progress(bool enabled, int total_requests);
  void Update(const std::string& where, int requests_done_in_workload, int workload_total);
  void Add(int requests) { done_ += requests; }
  void Line(const std::string& text);

 private:
  bool enabled_;
  int total_;
  int done_ = 0;
  double start_;
};

// SIGINT or SIGTERM while a campaign runs: the session running stops at once (a thread
// sends SIGTERM to every process group the harness started, so its requests and waits
// end), it is torn down as always and recorded as interrupted, and `tandem run` exits 130;
// `--resume` redoes that session. A second signal exits at once (the kernel then ends the
// children: PR_SET_PDEATHSIG).
class InterruptWatch {
 public:
  InterruptWatch();
  ~InterruptWatch();
  InterruptWatch(const InterruptWatch&) = delete;
  InterruptWatch& operator=(const InterruptWatch&) = delete;
  static bool interrupted();
  static const char* signal_name();

 private:
  struct sigaction old_int_ {
  }, old_term_{};
  std::atomic<bool> stop_ = false;
  std::thread watcher_;
};

// Where a session stands in the campaign's plan.
struct SessionPlace {
  int session_count = 0;  // sessions in the campaign
  int nonce_round = 0;    // NonceRound
  int launch_index = 0;   // LaunchIndex: earlier sessions of its arm in its layout
};

// Runs one session; returns "" when it completed, else the reason it failed.
std::string RunSession(store::Store& store, std::int64_t campaign, const Prepared& p, const store::SessionRow& row, Progress& progress,
                       const SessionPlace& place);

// Samples the GPUs of `hosts` (nvidia-smi) every `interval_s` on a thread of its own until
// Stop(); `t` of each sample counts from `started_at` (MonotonicSeconds).
class GpuSampler {
 public:
  GpuSampler(std::vector<const Host*> hosts, double interval_s, double started_at);
  ~GpuSampler();
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;
  std::vector<store::GpuSample> Stop();  // every sample so far

 private:
  struct State;
  std::shared_ptr<State> state_;
  std::thread thread_;
};

// The hosts a layout places processes on.
std::vector<const Host*> LayoutHosts(const LayoutSpec& layout, const Cluster& cluster);

// The sessions of the same arm in the same layout that come before `s` in the plan.
int LaunchIndex(const std::vector<store::SessionRow>& sessions, const store::SessionRow& s);
// Each GPU's used and total memory now (nvidia-smi), on `host`; none where it has no nvidia-smi.
std::vector<store::GpuMemory> GpuMemoryOn(const Host& host);
// The launch as the session's row stores it: the arm's launch record, and each GPU's memory
// on the hosts the layout used.
store::SessionStartup MeasureLaunch(const ArmInstance& instance, const LayoutSpec& layout, const Cluster& cluster, bool discarded);

// A relaunched server starts with an empty prefix cache; an external one does not, so
// its n-th session (n ≥ 1) uses the n-th block of nonce positions: unseen prompts.
int NonceRound(const Prepared& p, const std::vector<store::SessionRow>& sessions, const store::SessionRow& s);

// A session left "running" belongs to a harness that died: its local processes got
// SIGKILL from the kernel (PR_SET_PDEATHSIG), but anything they started may remain, and on
// other hosts (processes, containers) everything may.
void KillLeftovers(store::Store& store, const Cluster& cluster, const store::SessionRow& s, Progress& progress);

// A sequential campaign looks after every block of a layout: once every gated family of
// the layout is decided, its remaining sessions are skipped (status "skipped"). The gate
// recomputes the same looks from the store, so `tandem gate` gives the verdict seen here.
void StopIfDecided(store::Store& store, std::int64_t campaign, const Campaign& c, std::vector<store::SessionRow>& sessions,
                   const store::SessionRow& done, Progress& progress);

// `tandem run`'s closing summary: each family's ratio and interval, greedy agreement.
void PrintSummary(const store::Store& store, std::int64_t campaign, const std::vector<ResolvedArm>& arms,
                  const store::GreedyAgreementCounts& greedy, std::ostream& out);

// One harness per store at a time: an exclusive flock on the database file (SQLite's
// own locks are fcntl locks and do not interact). The kernel drops it when we die.
class StoreLock {
 public:
  explicit StoreLock(const std::filesystem::path& db);
  ~StoreLock();
  StoreLock(const StoreLock&) = delete;
  StoreLock& operator=(const StoreLock&) = delete;

 private:
  int fd_;
};

// `--extend N`: N more sessions per layout, continuing each layout's order, and the gate's
// looks to go with them (every block when sequential, else one more at the new end). The
// gate then computes every look's boundary for the new size: docs/statistics.md says what
// that does to the error rates.
void Extend(store::Store& store, std::int64_t campaign, const Campaign& c, int more);

}  // namespace tandem::harness
