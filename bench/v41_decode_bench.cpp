// DeepSeek V4.1 decode in the engine (runtime/engine/v41_engine): one sequence, one token a
// step with the context cycling 32–160 (as BM_Decode for V3), on a synthetic preset written
// fresh: its FP8 attention and FP4 experts read as stored. Beside BM_Decode/threads:T/
// experts:16 (V3's `small` preset, bf16), what V4.1's pieces cost at a similar size.
//
// BM_V41Decode/threads:T/preset:P — P 0 v41-tiny, 1 v41-small. Counters: tok/s.
// BM_V41HybridDecodeVsSingle/parallel:E — v41-small with 1 coordinator + 4 expert workers on
// loopback (E 0 tp: every expert's columns split four ways; 1 ep: whole experts), against the
// single process in the same run, blocks of 64 steps alternating.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "bench/decode_loop.hpp"
#include "runtime/engine/v41_engine.hpp"
#include "runtime/engine/v41_moe_slices.hpp"
#include "runtime/hybrid/local_workers.hpp"
#include "runtime/hybrid/placement_plan.hpp"
#include "runtime/hybrid/remote_expert_executor.hpp"
#include "runtime/model/engram_layout.hpp"
#include "runtime/model/text_file.hpp"
#include "runtime/model/v41_checkpoint.hpp"
#include "runtime/model/v41_config.hpp"
#include "runtime/model/v41_synthetic.hpp"

namespace tandem::rt {
namespace {

using tandem::bench::DecodeLoop;

// A preset in a temporary directory with Engram constants of its own (any odd multipliers
// serve a benchmark; the map t → t / 2 of the presets).
std::filesystem::path V41BenchModel(const std::string& preset) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tandem-bench-" + preset);
  std::filesystem::remove_all(dir);
  const V41SyntheticReport r = WriteV41SyntheticCheckpoint(preset, 1, dir);
  const V41Config& c = r.config;
  nlohmann::json layers = nlohmann::json::array();
  for (const EngramLayerLayout& l : EngramLayout(c)) {
    std::vector<std::int64_t> multipliers;
    for (int k = 0; k < c.engram_max_ngram_size; ++k) multipliers.push_back(2 * (1000003 + 7919 * k) + 1);
    layers.push_back({{"layer", l.layer}, {"multipliers", multipliers}, {"primes", l.primes}, {"offsets", l.offsets}});
  }
  std::vector<std::int64_t> map;
  for (int t = 0; t < c.vocab_size; ++t) map.push_back(t / 2);
  const nlohmann::json engram = {{"source", "bench/v41_decode_bench.cpp"},
                                 {"pad_id", map[static_cast<std::size_t>(c.engram_pad_id)]},
                                 {"compressed_vocab_size", c.engram_compressed_vocab_size},
                                 {"layers", layers},
                                 {"token_map", map}};
  WriteTextFile(dir / "engram.json", engram.dump());
  return dir;
}

void BM_V41Decode(benchmark::State& state) {
  const std::string preset = state.range(1) == 0 ? "v41-tiny" : "v41-small";
  const std::filesystem::path dir = V41BenchModel(preset);
  const V41Checkpoint ckpt = V41Checkpoint::Open(dir);
  V41Engine engine(ckpt, V41EngineOptions{.threads = static_cast<int>(state.range(0))});
  DecodeLoop loop(engine);
  for (auto _ : state) loop.Step();
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(preset);
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_V41Decode)->ArgsProduct({{1, 0}, {0, 1}})->ArgNames({"threads", "preset"})->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_V41HybridDecodeVsSingle(benchmark::State& state) {
  const std::filesystem::path dir = V41BenchModel("v41-small");
  {
    const V41Checkpoint ckpt = V41Checkpoint::Open(dir);
    LocalWorkers workers(dir, 4, false, 1, TANDEM_RT_BIN);
    Layout layout;
    layout.workers = workers.worker_addresses();
    layout.parallel = state.range(0) == 0 ? ExpertParallel::kTensor : ExpertParallel::kExpert;
    const ModelConfig moe = V41MoeConfig(ckpt.config());
    const PlacementPlan plan = PlacementPlan::Compute(moe, layout, ExpertCuts::V41());
    std::shared_ptr<RemoteExpertExecutor> remote;
    V41Engine hybrid(ckpt, V41EngineOptions{}, [&](ThreadPool& pool) {
      remote = std::make_shared<RemoteExpertExecutor>(moe, dir, std::make_unique<V41MoeSlices>(ckpt, plan.ranks[0].slices, &pool), plan,
                                                      layout, &pool);
      return remote;
    });
    V41Engine single(ckpt, V41EngineOptions{});
    DecodeLoop hybrid_loop(hybrid), single_loop(single);
    std::uint64_t bytes_before = 0;
    for (const RankStats& r : remote->RankStatistics()) bytes_before += r.bytes_sent + r.bytes_received;
    const tandem::bench::SideBySide run = tandem::bench::Alternate(state, single_loop, hybrid_loop);
    const double single_s = run.first_s, hybrid_s = run.second_s, tokens = run.tokens;
    std::uint64_t bytes = 0;
    for (const RankStats& r : remote->RankStatistics()) bytes += r.bytes_sent + r.bytes_received;
    state.counters["single_tok/s"] = tokens / single_s;
    state.counters["hybrid_tok/s"] = tokens / hybrid_s;
    state.counters["hybrid/single"] = single_s / hybrid_s;
    state.counters["net_KB/tok"] = static_cast<double>(bytes - bytes_before) / 1e3 / tokens;
    state.SetLabel(state.range(0) == 0 ? "v41-small tp4" : "v41-small ep4");
  }
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_V41HybridDecodeVsSingle)->ArgName("parallel")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->MinTime(6.0);

}  // namespace
}  // namespace tandem::rt
