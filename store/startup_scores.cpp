// The startup and memory families of one session's launch (docs/statistics.md, "Startup and
// memory families"): one value a session, lower is better.
#include <algorithm>
#include <string_view>

#include <fmt/format.h>

#include "store/workload_scorers.hpp"

namespace tandem::store {

namespace {

bool IsWorker(std::string_view role) { return role.rfind("worker-", 0) == 0 || role.rfind("peer-", 0) == 0; }

FamilyScores Family(FamilyMetric metric, const std::string& case_id, const std::string& label) {
  FamilyScores f;
  f.workload = metric == FamilyMetric::kStartup ? "startup" : "memory";
  f.family = fmt::format("{}: {}", f.workload, label);
  f.metric = metric;
  f.case_id = case_id;
  f.direction = Direction::kLowerIsBetter;
  return f;
}

}  // namespace

void ScoreStartup(const SessionStartup& s, const FamilySink& put) {
  if (s.discarded) return;
  std::optional<double> workers, coordinator;
  for (const auto& [role, seconds] : s.listening) {
    if (IsWorker(role)) workers = std::max(workers.value_or(0.0), seconds);
    if (role == "coordinator") coordinator = seconds;
  }
  if (workers) put(Family(FamilyMetric::kStartup, "workers_listening", "workers listening (the last)"), {*workers});
  if (coordinator) put(Family(FamilyMetric::kStartup, "coordinator_listening", "coordinator listening"), {*coordinator});
  if (s.ready_s) put(Family(FamilyMetric::kStartup, "ready", "ready (/health, /v1/models)"), {*s.ready_s});
  if (s.first_output_s) put(Family(FamilyMetric::kStartup, "first_output", "first output"), {*s.first_output_s});
  // The server's own account, from its process's start (Tandem's runtime: opening the
  // checkpoint, loading the engine with its workers, warming up).
  for (const auto& [phase, seconds] : s.server_phases) {
    put(Family(FamilyMetric::kStartup, "server:" + phase, fmt::format("server's own: {}", phase)), {seconds});
  }
  // The workers load at once: the slowest one's load is what the coordinator waits for.
  std::optional<double> slowest_load;
  for (const auto& [role, seconds] : s.worker_loads) slowest_load = std::max(slowest_load.value_or(0.0), seconds);
  if (slowest_load) put(Family(FamilyMetric::kStartup, "workers_loaded", "workers' own load (the slowest)"), {*slowest_load});
  std::optional<double> coordinator_rss, workers_rss;
  for (const auto& [role, bytes] : s.resident_bytes) {
    if (role == "coordinator") coordinator_rss = static_cast<double>(bytes);
    if (IsWorker(role)) workers_rss = workers_rss.value_or(0.0) + static_cast<double>(bytes);
  }
  if (coordinator_rss) put(Family(FamilyMetric::kMemory, "coordinator_rss", "coordinator RSS"), {*coordinator_rss});
  if (workers_rss) put(Family(FamilyMetric::kMemory, "workers_rss", "workers RSS (sum)"), {*workers_rss});
  for (const GpuMemory& g : s.gpus) {
    put(Family(FamilyMetric::kMemory, fmt::format("gpu:{}:{}", g.host, g.index), fmt::format("GPU {} used ({})", g.index, g.host)),
        {g.used_mib});
  }
}

}  // namespace tandem::store
