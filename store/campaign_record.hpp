#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "store/gate_design.hpp"
#include "store/gpu_conditions.hpp"
#include "store/session_scores.hpp"
#include "store/stored_enums.hpp"

// One campaign of a store, read whole: what reports, the gate and exports work from.
// Every figure is recomputed from these rows; nothing is cached in the store.
namespace tandem::store {

class Store;

struct ArmImageRecord {
  std::string role, host, id, location;
};

// How an arm was launched, as the campaign stated it (secrets redacted when written).
struct ArmLaunch {
  std::string repository, ref;                // git arms
  std::string coordinator, worker;            // binary arms: the executables
  std::string command, worker_command;        // command arms
  std::string coordinator_from, worker_from;  // mixed arms: the arms whose roles they take
  std::string base_url;                       // external arms
  std::optional<std::string> engine;          // container arms: podman, with the images below
  std::string coordinator_image, worker_image;
  std::vector<std::string> run_args, options, worker_options;
  std::vector<std::pair<std::string, std::string>> env;  // by name; values as stated
};

struct ArmRecord {
  std::int64_t id = 0;
  int position = 0;  // 0: the baseline
  std::string label;
  ArmKind kind = ArmKind::kBinary;
  std::string revision, coordinator_image, worker_image, model_id, model_revision, config_sha256;
  ArmLaunch launch;
  std::vector<ArmImageRecord> images;  // per role and host (by role, then host)
};

// What a layout ran: the processes, their placement and the protocol's options.
struct LayoutRecord {
  std::int64_t id = 0;
  int position = 0;
  std::string name;
  int workers = 0, local_expert_layers = 0, coordinator_ranks = 1;
  std::string expert_parallel = "tp", wire_dtype = "bf16", partial_dtype = "f64";
  int coordinator_threads = 0, worker_threads = 1;  // 0: all the host's CPUs
  std::string coordinator_cpus, worker_cpus;        // CPU lists pinned to; empty: none
  int emulated_rtt_us = 0;                          // a worker's delay per layer request
  std::string coordinator_host = "local", peer_host;
  std::vector<std::string> worker_hosts;
};

// One GPU as nvidia-smi described it; a value it did not give is empty.
struct GpuFacts {
  double index = 0;
  std::string name = "?";
  std::optional<double> power_limit_w, sm_clock_mhz, max_sm_clock_mhz, memory_clock_mhz, max_memory_clock_mhz;
};

// A host as the harness read it before a session (or the campaign): the CPU, memory,
// kernel, GPUs and how busy it was. Text fields hold what the host reported.
struct HostFacts {
  bool known = false;  // false: nothing was recorded
  std::string hostname = "?", kernel = "?", memory = "?";
  std::string cpu_model, cpu_vendor, cpu_model_number, cpu_stepping, cpu_part;
  std::optional<std::string> cpu_family, cpu_implementer, logical_cpus;  // present per architecture
  std::optional<std::vector<std::string>> cpu_isa;                       // the SIMD extensions the kernels use
  std::vector<GpuFacts> gpus;
  std::optional<double> busy_fraction;  // CPUs busy in the second before
  bool load_warning = false;            // busy_fraction over the harness's limit
  std::string name;                     // the campaign's name for it (one of `hosts`)
  std::vector<HostFacts> hosts;         // the other hosts, by name (a session's facts)
};

struct SessionRecord {
  std::int64_t id = 0;
  int order_index = 0;
  std::string layout, arm;
  SessionStatus status = SessionStatus::kPlanned;
  std::string reason, started_at, finished_at;
  int attempts = 0;
  HostFacts host;
  SessionConditions conditions;  // GPU samples and breaches; none in a store from before they were sampled
};

// A workload as it was run: what DescribeWorkload and the reports read of its spec.
struct WorkloadSettings {
  std::vector<std::string> cases;
  std::vector<int> levels, contexts;  // concurrency levels; retained context sizes in tokens
  bool counting = true, greedy = true;
  int repeats = 1, children = 2, max_tokens = 0;  // max_tokens 0: each case's own budget
  double temperature = 0, top_p = 1;
  std::int64_t seed = 0, nonce_seed = 0;
  // The latency families scored for it (p50, p90, p99 of each); none in a store written
  // before latency families were scored.
  std::vector<FamilyMetric> latency;
  // prefill: the cells (retained base × new tokens) and tries; retained_context (exact, as
  // now run: `children` 0): thinking modes and the parent's budget; both: the prompt
  // source and its sha256.
  std::vector<int> bases, new_tokens;
  int tries = 0, parent_max_tokens = 0;
  std::vector<std::string> thinking;
  std::string source, source_sha256;
};

// The draft policy's lifetime round-time prediction sums, from the server's /v1/stats.
struct PredictionSums {
  double rounds = 0, abs_rel_error_sum = 0, error_us_sum = 0;
};

struct WorkloadRecord {
  std::int64_t id = 0;
  std::int64_t session = 0;
  std::string name;
  WorkloadKind kind = WorkloadKind::kBattery;
  bool warmup = false;
  WorkloadSettings settings;
  std::optional<PredictionSums> prediction_before, prediction_after;  // absent: the server reports none
};

// A sample's drafting counters (the server's delta over its request), or why none were read.
struct DraftCounts {
  bool counted = false;  // the counters below were read
  std::int64_t accepted_drafts = 0, verified_drafts = 0, request_rounds = 0;
  std::optional<std::string> error;
};

// Usage that disagrees with the harness's tokenizer and the stream's chunks.
struct TokenCountMismatch {
  int usage = 0, tokenizer = 0, chunks = 0;
};

struct SampleRecord {
  std::int64_t id = 0, run = 0, session = 0;
  std::string workload, case_id, role, nonce, error, content, content_sha256, finish_reason;
  int repeat = 0, level = 1, batch = 0, slot = 0, context = 0, status = 0;
  int new_tokens = 0;       // prefill: tokens the child adds to its base (context)
  bool unverified = false;  // prefill, retained context: the server reported no cached tokens, so it was not scored
  double weight = 0, t_start = 0, t_first_output = 0, t_first_content = 0, t_finish = 0;
  int prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0, chunks = 0, tokenizer_tokens = 0;
  std::map<std::string, bool> checks;  // check name → passed
  std::optional<TokenCountMismatch> token_count_mismatch;
  DraftCounts draft;
  std::vector<double> gaps;  // seconds between consecutive text deltas
  bool valid = false, passed = false;
};

struct CampaignRecord {
  std::string store_path;
  std::int64_t id = 0;
  std::string name, file, yaml_sha256, model_path, model_revision, status, created_at;
  HostFacts host;                         // the harness's own host
  GateDesign gate;                        // as stored, the baseline and candidate defaulted to the first two arms
  std::vector<ArmRecord> arms;            // by position
  std::vector<LayoutRecord> layouts;      // by position
  std::vector<SessionRecord> sessions;    // by order
  std::vector<WorkloadRecord> workloads;  // by id (run order)
  std::vector<SampleRecord> samples;      // by id
  // Samples stored as valid whose times cannot be a request's (ImplausibleTimes): read as
  // invalid, so no figure uses them; the report lists them.
  std::vector<std::int64_t> implausible_samples;
  std::vector<FamilyScores> families;  // session scores, in report order

  const ArmRecord* Arm(const std::string& label) const;
  const SessionRecord* Session(std::int64_t id) const;
  const WorkloadRecord* Workload(std::int64_t id) const;
};

// The campaign `campaign` of the store, or its latest. Throws InputError
// naming the store when there is no such campaign.
CampaignRecord LoadCampaignRecord(const Store& store, std::optional<std::int64_t> campaign);

// The gate design stored for `campaign`, as stored (errors name the store and campaign).
GateDesign LoadGateDesign(const Store& store, std::int64_t campaign);

}  // namespace tandem::store
