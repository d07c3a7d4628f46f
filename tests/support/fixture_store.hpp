#pragma once

#include <cstdint>
#include <filesystem>

#include <nlohmann/json.hpp>

namespace tandem::testing {

// Writes a campaign described in JSON into a new store file and returns its id. The
// same format feeds the session-score, report and gate tests (and the Python scripts
// that compute their expected values):
//   {"campaign": {name, file, yaml_sha256, model_path, model_revision, host, gate, status, created_at},
//    "arms": [{label, kind, revision, coordinator_image, worker_image, launch, model_id, model_revision, config_sha256}],
//    "layouts": [{name, spec}],
//    "sessions": [{order_index, layout, arm, status, reason, attempts, started_at, finished_at, host, served, processes, startup,
//                  "workloads": [{name, kind, warmup, spec, "samples": [{case_id, weight, repeat, level, batch, slot, context,
//                                 role, nonce, completion_tokens, t_first_output, t_finish, valid, checks, ...}]}]}]}
// Everything but sessions[].workloads[].samples' timing fields is optional; arms and
// layouts default to those the sessions name, in order. Timestamps are fixed so
// that rendered reports are reproducible.
std::int64_t WriteFixtureStore(const nlohmann::json& fixture, const std::filesystem::path& file);

}  // namespace tandem::testing
