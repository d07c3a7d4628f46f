#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/family_id.hpp"
#include "store/gpu_conditions.hpp"
#include "store/stored_enums.hpp"

// A campaign YAML, parsed and validated (reference: docs/campaign-yaml.md). Every
// error names file:line:column and the key at fault; nothing starts until the whole
// file is valid.
namespace tandem::harness {

using store::ArmKind;  // the enumerations the store keeps, with their words (store::ToString)

// A machine of the campaign (`hosts:`), reached with OpenSSH; "local" is the harness's
// own machine (no ssh), always present under that name.
struct HostSpec {
  std::string name;
  std::string ssh = "local";  // [user@]host, or "local"
  int port = 0;               // 0: ssh's default (or its config's)
  std::string identity_file;  // ~ expanded; empty: ssh's default
  std::vector<std::string> ssh_options;
  // Where other hosts (and the harness) reach processes on it; default: the host part of
  // `ssh` (127.0.0.1 for local).
  std::string address;
  bool local() const { return ssh == "local"; }
};

struct ArmSpec {
  std::string label;
  ArmKind kind = ArmKind::kBinary;
  std::filesystem::path coordinator;  // binary: the executable serving HTTP
  std::filesystem::path worker;       // binary: the expert-worker executable
  std::string repository;             // git: repository path or URL
  std::string ref;                    // git: commit, branch or tag
  std::vector<std::string> cmake_flags;
  std::string coordinator_command;  // command: template with {port} {model} {experts}
  std::string worker_command;       // command: template with {port} {model} (optional)
  std::string base_url;             // external
  // container: an image pair run with `engine run` on every host (the image's entrypoint
  // is the runtime executable).
  std::string engine;                 // docker | podman
  std::string coordinator_image;      // as named, e.g. ds/coord:v13
  std::string worker_image;           // default: coordinator_image
  std::vector<std::string> run_args;  // extra `engine run` arguments, e.g. [--gpus, all]
  std::string pull = "never";         // never | missing | always
  // mixed: the coordinator of one arm with the workers of another (labels of binary, git
  // or container arms).
  std::string coordinator_from;
  std::string worker_from;
  std::vector<std::string> options;         // extra coordinator arguments
  std::vector<std::string> worker_options;  // extra worker arguments
  std::map<std::string, std::string> env;
  std::string declared_revision;  // command / external arms may name their revision
  // The environment variable (of the harness, at run time) holding the API key the arm's
  // server wants: sent as `Authorization: Bearer KEY` on every request; never stored.
  std::string api_key_env;
};

struct LayoutSpec {
  std::string name;
  int workers = 0;
  std::string coordinator_host = "local";
  std::vector<std::string> worker_hosts;  // one per worker (a host may repeat); all local when empty
  std::string peer_host;                  // coordinator_ranks: 2; default: the coordinator's host
  std::string expert_parallel = "tp";
  int local_expert_layers = 0;
  int coordinator_ranks = 1;
  std::string wire_dtype = "bf16";
  std::string partial_dtype = "f64";
  int coordinator_threads = 0;  // 0: the runtime's default (all cores)
  int worker_threads = 1;
  // Benchmarking aid: each worker handles a layer request this long after it arrives
  // (`tandem-rt expert --emulated-rtt-us`), standing in for a network slower than
  // loopback. 0: no emulation (the flag is not passed).
  int emulated_rtt_us = 0;
  std::vector<std::string> options;
  std::string coordinator_cpus;  // e.g. "0-1": pin with sched_setaffinity; empty: no pinning
  std::string worker_cpus;
};

struct SamplingSpec {
  bool greedy = true;
  double temperature = 0.0;
  double top_p = 1.0;
  std::uint64_t seed = 0;
};

using store::WorkloadKind;

struct WorkloadSpec {
  std::string name;
  WorkloadKind kind = WorkloadKind::kBattery;
  bool warmup = false;
  std::vector<std::string> cases;  // battery: empty = every weighted case; concurrency: the cases swept
  int repeats = 1;
  std::uint64_t nonce_seed = 0;
  SamplingSpec sampling;
  std::vector<int> levels;    // concurrency, mixed
  std::vector<int> contexts;  // retained_context: tokens of retained context (0: no parent)
  int children = 0;           // retained_context of a store from before contexts were exact; 0 now
  // retained_context: the thinking modes ("off", "on"), one parent each per context size;
  // the parent's answer budget (it must end with stop within it).
  std::vector<std::string> thinking = {"off"};
  int parent_max_tokens = 256;
  // prefill: the cells, retained base × new tokens; tries per sample for a clean cache miss.
  std::vector<int> bases, new_tokens;
  int tries = 3;
  // prefill, retained_context: the text prompts are cut from, and its sha256 when parsed.
  std::filesystem::path source;
  std::string source_sha256;
  int max_tokens = 0;    // 0: each case's own
  bool counting = true;  // battery: also send the counting diagnostic
  // battery, concurrency, mixed: the latency families scored (p50, p90, p99 of each); every
  // one unless `latency:` lists fewer; none for warmup.
  std::vector<store::FamilyMetric> latency;
};

struct SessionSpec {
  int per_layout = 4;  // with until_decided: the most sessions a layout runs (max_per_layout)
  // Sequential (`max_per_layout: N, until: decided`): the gate looks after every block
  // (one repetition of the pattern) and a layout stops once its gated families are decided.
  bool until_decided = false;
  // `precision: p` (sequential only): a decided layout also goes on until every gated
  // family's 95% interval lies within ±p of its ratio (hi ≤ (1 + p)·ratio, so lo ≥ (1 − p)·ratio),
  // or its sessions run out. The verdict stays the first look's that decided it; only the
  // published interval narrows. 0: stop once decided.
  double precision = 0;
  // `method: paired`: the report shows, beside the Welch headline, the paired interval of
  // each ABBA pair of adjacent sessions (stats::PairedLogRatio; store::PairByBlock).
  bool paired = false;
  enum class Order { kPattern, kRandom, kExplicit } order = Order::kPattern;
  std::string pattern = "ABBA";       // kPattern: letters = arms in declaration order, repeated
  std::uint64_t seed = 0;             // kRandom
  std::vector<std::string> sequence;  // kExplicit: arm labels
  int retry = 0;                      // attempts after a failed session
  bool abort_on_failure = false;      // stop the campaign instead of moving on

  // Sessions per block: the pattern's length (or the explicit list's, or one per arm).
  int block(std::size_t arms) const;
  // Sessions per layout after which the gate looks: every block when sequential, else once.
  std::vector<int> looks(std::size_t arms) const;
};

struct QualitySpec {
  int cache_bound = 4;        // cached prompt tokens a nonced request may report
  bool fail_session = false;  // a failed integrity check fails the session
};

struct TimeoutSpec {
  double launch_s = 300;
  double request_s = 600;
  double teardown_grace_s = 10;
};

// `startup:`: how launches are scored (the startup and memory families).
struct StartupSpec {
  // The first `discard` sessions of each arm in each layout are stored and not scored: their
  // launch reads the images from a cold page cache.
  int discard = 1;
};

// `conditions:`: what the GPUs must run under (store::GpuControls), and how often
// nvidia-smi is sampled through each session on the hosts that have it.
struct ConditionsSpec {
  store::GpuControls controls;
  double sample_s = 2;
};

struct ModelSpec {
  std::filesystem::path path;     // a checkpoint directory, or
  std::string preset;             // a preset: synthetic (written once into the cache) or trained
  std::uint64_t seed = 1;         // a synthetic preset's
  std::filesystem::path trained;  // a trained preset's committed checkpoint (model_preset.hpp)
};

// The `gate:` section: `tandem gate`'s defaults for this campaign (its flags override them).
// The runner stores it with the session plan's looks as the campaign's gate design.
struct GateSection {
  std::string baseline, candidate;  // arm labels; empty: the first and second arm
  std::vector<store::FamilySelector> families;
  std::optional<double> max_regression;
  bool proven = false;  // rule: proven (else noninferior)
  bool require_identical_greedy = false;
};

struct Campaign {
  std::string name;
  std::filesystem::path file;
  std::string yaml_text;
  std::string yaml_sha256;
  ModelSpec model;
  std::vector<ArmSpec> arms;
  std::vector<LayoutSpec> layouts;
  SessionSpec sessions;
  std::vector<WorkloadSpec> warmup;
  std::vector<WorkloadSpec> workloads;
  QualitySpec quality;
  std::filesystem::path store;
  std::filesystem::path corpus;
  TimeoutSpec timeouts;
  StartupSpec startup;
  ConditionsSpec conditions;
  GateSection gate;

  std::vector<HostSpec> hosts;  // "local" first, then the `hosts:` entries

  const ArmSpec& Arm(std::string_view label) const;
  const HostSpec& Host(std::string_view name) const;
  // Whether any layout places a process on a host other than the harness's machine.
  bool uses_remote_hosts() const;
};

// The host of a layout's worker `index` (0-based), and of its peer rank.
const std::string& WorkerHost(const LayoutSpec& layout, int index);
const std::string& PeerHost(const LayoutSpec& layout);

// Reads and validates a campaign. Relative paths are resolved against the file's
// directory. Throws InputError "FILE:LINE:COLUMN: ..." on the first problem.
Campaign LoadCampaign(const std::filesystem::path& file);
Campaign ParseCampaign(std::string_view yaml_text, const std::filesystem::path& file);

}  // namespace tandem::harness
