#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

// How a session's launch went, as the harness measured it and the session's row stores it
// (session.startup_json): the source of the startup and memory families.
namespace tandem::store {

// One GPU's memory once the server was ready (nvidia-smi on the host that holds it).
struct GpuMemory {
  std::string host;  // the campaign's name for the host ("local": the harness's machine)
  int index = 0;
  std::string uuid;
  double used_mib = 0, total_mib = 0;
  bool operator==(const GpuMemory&) const = default;
};

struct SessionStartup {
  // One of the first `startup.discard` sessions of its arm in its layout: its launch reads
  // the images from a cold page cache, so it is stored and not scored.
  bool discarded = false;
  // Seconds from the launch's start (before its first process started) to each process
  // saying where it listens, by role (worker-0, peer-0, coordinator), in start order.
  std::vector<std::pair<std::string, double>> listening;
  std::optional<double> ready_s;                                      // /health answers and /v1/models lists the model
  std::optional<double> first_output_s;                               // the first streamed output of the session's first workload
  std::vector<std::pair<std::string, std::uint64_t>> resident_bytes;  // role → RSS once ready
  std::vector<GpuMemory> gpus;
  // What the server reported of its own startup (Tandem's runtime: /v1/stats "startup"):
  // seconds from its process's start to each phase; the bytes of weights it opened.
  std::vector<std::pair<std::string, double>> server_phases;
  std::optional<std::uint64_t> weight_bytes;
  // Each expert worker's own load of its slices in seconds, as the server reported it
  // (Tandem's runtime: /v1/stats "workers" load_s), by role.
  std::vector<std::pair<std::string, double>> worker_loads;
  bool operator==(const SessionStartup&) const = default;

  std::string ToJson() const;
  // `where` names the store and row in errors; "{}" (or "") is a session with nothing measured.
  static SessionStartup FromJson(const std::string& text, const std::string& where);
};

}  // namespace tandem::store
