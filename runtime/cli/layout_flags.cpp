#include "runtime/cli/layout_flags.hpp"

#include <fstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/secret_token.hpp"
#include "runtime/engine/v41_moe_slices.hpp"
#include "runtime/hybrid/local_workers.hpp"
#include "runtime/hybrid/placement_plan.hpp"
#include "runtime/hybrid/remote_expert_executor.hpp"
#include "runtime/hybrid/worker_token.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/v41_checkpoint.hpp"
#include "runtime/model/v41_config.hpp"

namespace tandem::rt::cli {

void AddLayoutFlags(CLI::App* cmd, LayoutFlags& f) {
  const char* group = "Hybrid layout";
  cmd->add_option("--experts", f.experts, "Expert workers, host:port,host:port,... (rank order)")->group(group);
  cmd->add_option("--expert-parallel", f.parallel, "tp: each worker a 1/N intermediate slice of every expert; ep: 1/N of the experts")
      ->check(CLI::IsMember({"tp", "ep"}))
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--local-expert-layers", f.local_expert_layers, "The first K MoE layers keep their experts on the coordinator")
      ->check(CLI::Range(0, 1 << 20))
      ->group(group);
  cmd->add_option("--coordinator-ranks", f.coordinator_ranks, "2: a peer process holds a TP2 half of the coordinator's experts")
      ->check(CLI::IsMember({1, 2}))
      ->group(group);
  cmd->add_option("--peer", f.peer, "host:port of the `tandem-rt expert --role peer` (with --coordinator-ranks 2)")->group(group);
  cmd->add_option("--wire-dtype", f.wire, "Hidden rows on the wire")
      ->check(CLI::IsMember({"bf16", "fp8"}))
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--partial-dtype", f.partial, "Partial rows coming back: f64 is exact, f32/bf16 halve/quarter the bytes")
      ->check(CLI::IsMember({"f64", "f32", "bf16"}))
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--plan-out", f.plan_out, "Write the placement plan as JSON")->group(group);
  cmd->add_option("--connect-timeout-ms", f.connect_timeout_ms, "Connect + handshake limit per rank")
      ->check(CLI::Range(1, 3600000))
      ->group(group);
  cmd->add_option("--expert-input-dtype", f.expert_input,
                  "Round expert inputs as a bf16 or fp8 wire would (to compare a single process with a hybrid run)")
      ->check(CLI::IsMember({"f32", "bf16", "fp8"}))
      ->capture_default_str()
      ->group(group);
  auto* spawn = cmd->add_option("--spawn-workers", f.spawn_workers,
                                "Start N expert workers on loopback (and a peer with --coordinator-ranks 2) for this run")
                    ->check(CLI::Range(0, 64))
                    ->group(group);
  cmd->add_option("--spawned-threads", f.spawned_threads, "Threads of each spawned worker")->check(CLI::Range(1, 1024))->group(group);
  cmd->add_option("--spawned-device", f.spawned_device, "Where each spawned worker computes its experts")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--device", f.device, "Where the coordinator computes: cpu, or cuda (a CUDA build with a GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->get_option("--experts")->excludes(spawn);
  cmd->add_option("--round-trip-timeout-ms", f.round_trip_timeout_ms, "Limit for one layer's partials")
      ->check(CLI::Range(1, 3600000))
      ->group(group);
  cmd->add_option("--rank-late-ms", f.rank_late_ms,
                  "A rank that has not answered a layer for this long is late: serve's /health reports degraded (503) until it "
                  "answers or --round-trip-timeout-ms fails it")
      ->check(CLI::Range(1, 3600000))
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--worker-token-file", f.worker_token_file,
                  "File whose first line is the expert workers' token (default: $TANDEM_WORKER_TOKEN): at least 16 random "
                  "characters (openssl rand -hex 32); must not be readable by group or others")
      ->group(group);
  cmd->add_flag("--map-weights", f.map_weights,
                "Read the weights where the checkpoint's files are mapped (also in spawned workers) instead of copying them "
                "onto 2 MiB pages: less memory when processes share a file, slower decode from 4 KiB pages");
}

// The GPU reads its own copies: on the host the weights are only read while uploading.
WeightPlacement Placement(const LayoutFlags& f) {
  return f.map_weights || f.device == "cuda" ? WeightPlacement::kMapped : WeightPlacement::kCopied;
}

namespace {

Layout LayoutOf(const LayoutFlags& f) {
  Layout layout;
  for (std::size_t start = 0; start < f.experts.size();) {
    const auto comma = f.experts.find(',', start);
    const std::string item = f.experts.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw std::invalid_argument(fmt::format("--experts '{}' has an empty entry", f.experts));
    layout.workers.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  layout.parallel = f.parallel == "ep" ? ExpertParallel::kExpert : ExpertParallel::kTensor;
  layout.local_expert_layers = f.local_expert_layers;
  layout.coordinator_ranks = f.coordinator_ranks;
  layout.peer = f.peer;
  layout.wire = f.wire == "fp8" ? WireDtype::kFp8 : WireDtype::kBf16;
  layout.partial = f.partial == "bf16" ? PartialDtype::kBf16 : f.partial == "f32" ? PartialDtype::kF32 : PartialDtype::kF64;
  return layout;
}

// Writes --plan-out, and logs the placement when it is distributed.
void Announce(const PlacementPlan& plan, const Layout& layout, const LayoutFlags& f) {
  if (!f.plan_out.empty()) {
    std::ofstream out(f.plan_out);
    out << plan.ToJson();
    if (!out) throw std::invalid_argument(fmt::format("--plan-out {}: cannot write", f.plan_out));
  }
  if (!layout.distributed()) return;
  fmt::print(stderr, "placement ({} over {} workers, wire {}, partials {}):\n{}", ToString(layout.parallel), layout.workers.size(),
             ToString(layout.wire), ToString(layout.partial), plan.Summary());
}

RemoteOptions RemoteOptionsOf(const LayoutFlags& f) {
  RemoteOptions options{std::chrono::milliseconds(f.connect_timeout_ms), std::chrono::milliseconds(f.round_trip_timeout_ms)};
  options.late_after = std::chrono::milliseconds(f.rank_late_ms);
  options.device = ParseDevice(f.device);  // a GPU coordinator computes its own share there too
  options.token = LoadWorkerToken(f.worker_token_file);
  if (!options.token) options.token = f.spawned_token;
  options.progress_log = [out = f.progress_out](const std::string& line) {
    fmt::print(out, "{}\n", line);
    std::fflush(out);
  };
  return options;
}

}  // namespace

Engine::ExpertExecutorFactory MakeExpertExecutor(const Checkpoint& ckpt, const LayoutFlags& f,
                                                 std::shared_ptr<RemoteExpertExecutor>* remote) {
  const Layout layout = LayoutOf(f);
  PlacementPlan plan = PlacementPlan::Compute(ckpt.config(), layout);
  Announce(plan, layout, f);
  if (!layout.distributed()) return {};
  const RemoteOptions options = RemoteOptionsOf(f);
  return [&ckpt, plan = std::move(plan), layout, options, remote](ThreadPool& pool) -> std::shared_ptr<ExpertExecutor> {
    auto executor = std::make_shared<RemoteExpertExecutor>(ckpt, plan, layout, &pool, options);
    if (remote != nullptr) *remote = executor;
    return executor;
  };
}

Engine::ExpertExecutorFactory MakeV41ExpertExecutor(const V41Checkpoint& ckpt, const LayoutFlags& f,
                                                    std::shared_ptr<RemoteExpertExecutor>* remote) {
  const Layout layout = LayoutOf(f);
  if (f.device != "cpu") throw std::invalid_argument("--device cuda: a DeepSeek V4.1 checkpoint runs on the CPU in this build");
  const ModelConfig moe = V41MoeConfig(ckpt.config());
  PlacementPlan plan = PlacementPlan::Compute(moe, layout, ExpertCuts::V41());
  Announce(plan, layout, f);
  if (!layout.distributed()) return {};
  const RemoteOptions options = RemoteOptionsOf(f);
  return [&ckpt, moe, plan = std::move(plan), layout, options, remote](ThreadPool& pool) -> std::shared_ptr<ExpertExecutor> {
    auto executor = std::make_shared<RemoteExpertExecutor>(
        moe, ckpt.dir(), std::make_unique<V41MoeSlices>(ckpt, plan.ranks[0].slices, &pool), plan, layout, &pool, options);
    if (remote != nullptr) *remote = executor;
    return executor;
  };
}

std::unique_ptr<LocalWorkers> SpawnRequestedWorkers(const std::filesystem::path& model, LayoutFlags& f) {
  if (f.spawn_workers == 0) return nullptr;
  const bool peer = f.coordinator_ranks == 2 && f.peer.empty();
  std::vector<std::string> extra;
  if (f.spawned_device != "cpu") extra = {"--device", f.spawned_device};
  if (f.map_weights) extra.emplace_back("--map-weights");
  // Loopback workers without a token could be used by any local process: a token per
  // run, unless one is configured (which an external --peer may need as well).
  std::optional<std::string> token = LoadWorkerToken(f.worker_token_file);
  // A fresh one (tandem::NewSecretToken) goes to the spawned workers in their environment,
  // never on a command line (which any local user can read in /proc).
  if (!token) token = f.spawned_token = NewSecretToken();
  auto spawned = std::make_unique<LocalWorkers>(model, f.spawn_workers, peer, f.spawned_threads, std::filesystem::path{}, std::move(extra),
                                                std::chrono::seconds(30), token);
  std::string list;
  for (const std::string& a : spawned->worker_addresses()) list += (list.empty() ? "" : ",") + a;
  f.experts = list;
  if (peer) f.peer = spawned->peer_address();
  return spawned;
}

Device EngineDevice(const LayoutFlags& f) { return ParseDevice(f.device); }

ExpertInputPrecision ExpertInput(const LayoutFlags& f) {
  const bool distributed = !f.experts.empty() || f.coordinator_ranks == 2;
  const std::string& name = distributed ? f.wire : f.expert_input;
  return name == "bf16" ? ExpertInputPrecision::kBf16 : name == "fp8" ? ExpertInputPrecision::kFp8Block32 : ExpertInputPrecision::kF32;
}

std::string FormatRankStats(const RemoteExpertExecutor& remote) {
  const CoordinatorTimes& t = remote.Times();
  const auto ms = [](std::uint64_t ns) { return static_cast<double>(ns) / 1e6; };
  std::string text = fmt::format(
      "coordinator, {} MoE layer steps ({} with remote ranks): serialise {:.1f} ms, own share {:.1f} ms, waiting {:.1f} ms, "
      "reduce {:.1f} ms\n",
      t.layers, t.remote_layers, ms(t.encode_ns), ms(t.local_ns), ms(t.wait_ns), ms(t.reduce_ns));
  for (const RankStats& s : remote.RankStatistics()) {
    text += fmt::format(
        "rank {} {}: {} requests, {:.1f} KB sent, {:.1f} KB received, round trip p50 ≤ {:.0f} µs p99 ≤ {:.0f} µs, "
        "worker compute {:.1f} ms\n",
        s.rank, s.address, s.frames_sent, static_cast<double>(s.bytes_sent) / 1e3, static_cast<double>(s.bytes_received) / 1e3,
        s.RoundTripQuantileMicros(0.5), s.RoundTripQuantileMicros(0.99), static_cast<double>(s.compute_ns) / 1e6);
  }
  return text;
}

}  // namespace tandem::rt::cli
