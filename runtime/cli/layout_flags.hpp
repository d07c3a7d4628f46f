#pragma once

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "runtime/engine/engine.hpp"
#include "runtime/model/checkpoint.hpp"

namespace CLI {
class App;
}

namespace tandem::rt {
class LocalWorkers;
class RemoteExpertExecutor;
class V41Checkpoint;
}  // namespace tandem::rt

namespace tandem::rt::cli {

// The coordinator's layout flags, shared by generate, eval and (later) serve.
struct LayoutFlags {
  std::string experts;  // comma-separated host:port list
  std::string parallel = "tp";
  int local_expert_layers = 0;
  int coordinator_ranks = 1;
  std::string peer;
  std::string wire = "bf16";
  std::string partial = "f64";
  std::string plan_out;
  int connect_timeout_ms = 10000;
  int round_trip_timeout_ms = 10000;
  int rank_late_ms = 1000;
  std::string expert_input = "f32";  // single process: round expert inputs as a wire would
  int spawn_workers = 0;             // start N local workers (and a peer if needed) instead of --experts
  int spawned_threads = 1;
  std::string device = "cpu";          // where the coordinator computes
  std::string spawned_device = "cpu";  // where spawned workers compute
  bool map_weights = false;            // WeightPlacement::kMapped, here and in spawned workers
  std::string worker_token_file;       // --worker-token-file; else $TANDEM_WORKER_TOKEN (worker_token.hpp)
  // Where the workers' "loading progress: …" lines go: stderr, or stdout for serve, whose
  // launcher reads its stdout and waits for as long as loading advances.
  std::FILE* progress_out = stderr;
  // Set by SpawnRequestedWorkers when no token is configured: the fresh one its workers hold.
  std::optional<std::string> spawned_token;
};

void AddLayoutFlags(CLI::App* command, LayoutFlags& flags);

// Starts the workers `--spawn-workers` asks for (null when it is 0) and fills their
// addresses into `flags`. Keep it alive as long as the engine, and call it on the main
// thread (the workers die with the thread that started them). They hold the configured
// worker token, or else a fresh random one (`flags.spawned_token`).
std::unique_ptr<LocalWorkers> SpawnRequestedWorkers(const std::filesystem::path& model, LayoutFlags& flags);

// The factory for Engine: local experts when the flags name no other rank;
// otherwise computes the placement plan, logs it (and writes --plan-out), connects
// and hands every rank its slices, proving the worker token (the configured one, else
// the spawned workers'). `remote` receives the executor, for its stats.
Engine::ExpertExecutorFactory MakeExpertExecutor(const Checkpoint& ckpt, const LayoutFlags& flags,
                                                 std::shared_ptr<RemoteExpertExecutor>* remote = nullptr);

// The same for a DeepSeek V4.1 checkpoint, whose experts are held whole: --parallel ep
// (and local expert layers) over the workers, one coordinator rank, the CPU; a layout
// that would split an expert's columns is refused (std::invalid_argument) before any
// rank is contacted.
Engine::ExpertExecutorFactory MakeV41ExpertExecutor(const V41Checkpoint& ckpt, const LayoutFlags& flags,
                                                    std::shared_ptr<RemoteExpertExecutor>* remote = nullptr);

// The precision experts see their inputs in: --expert-input-dtype, or the wire's
// when the flags name other ranks.
ExpertInputPrecision ExpertInput(const LayoutFlags& flags);

// The checkpoint's WeightPlacement: kMapped with --map-weights or --device cuda.
WeightPlacement Placement(const LayoutFlags& flags);

// --device as the engine's Device.
Device EngineDevice(const LayoutFlags& flags);

// One line per remote rank: frames, bytes, round-trip p50/p99, worker compute.
std::string FormatRankStats(const RemoteExpertExecutor& remote);

}  // namespace tandem::rt::cli
