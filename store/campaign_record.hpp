#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/gate_design.hpp"
#include "store/session_scores.hpp"

// One campaign of a store, read whole: what reports, the gate and exports work from.
// Every figure is recomputed from these rows; nothing is cached in the store.
namespace tandem::store {

class Store;

struct ArmImageRecord {
  std::string role, host, id, location;
};

struct ArmRecord {
  std::int64_t id = 0;
  int position = 0;  // 0: the baseline
  std::string label, kind, revision, coordinator_image, worker_image, model_id, model_revision, config_sha256;
  nlohmann::json launch;               // source, options, environment
  std::vector<ArmImageRecord> images;  // per role and host (by role, then host)
};

struct LayoutRecord {
  std::int64_t id = 0;
  int position = 0;
  std::string name;
  nlohmann::json spec;
};

struct SessionRecord {
  std::int64_t id = 0;
  int order_index = 0;
  std::string layout, arm, status, reason, started_at, finished_at;
  int attempts = 0;
  nlohmann::json host, served, processes;
};

struct WorkloadRecord {
  std::int64_t id = 0;
  std::int64_t session = 0;
  std::string name, kind;
  bool warmup = false;
  nlohmann::json spec, stats_before, stats_after;
};

struct SampleRecord {
  std::int64_t id = 0, run = 0, session = 0;
  std::string workload, case_id, role, nonce, error, content, content_sha256, finish_reason;
  int repeat = 0, level = 1, batch = 0, slot = 0, context = 0, status = 0;
  double weight = 0, t_start = 0, t_first_output = 0, t_first_content = 0, t_finish = 0;
  int prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0, chunks = 0, tokenizer_tokens = 0;
  nlohmann::json checks, flags, draft;
  std::vector<double> gaps;  // seconds between consecutive text deltas
  bool valid = false, passed = false;
};

struct CampaignRecord {
  std::string store_path;
  std::int64_t id = 0;
  std::string name, file, yaml_sha256, model_path, model_revision, status, created_at;
  nlohmann::json host;
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
