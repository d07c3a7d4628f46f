// Single-process decode speed on a synthetic checkpoint, against the machine's
// measured read bandwidth. Decode is memory-bound: each token reads every active
// weight once, so tok/s × bytes per token ÷ bandwidth says how close we are.
//
// The checkpoint is bench::BenchModel().
#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <numeric>
#include <random>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench/bench_model.hpp"
#include "bench/decode_loop.hpp"
#include "bench/memory_bandwidth.hpp"
#include "runtime/draft/quantized_experts.hpp"
#include "runtime/engine/engine.hpp"
#include "runtime/engine/moe_slices.hpp"
#include "runtime/hybrid/local_workers.hpp"
#include "runtime/hybrid/placement_plan.hpp"
#include "runtime/hybrid/remote_expert_executor.hpp"
#include "runtime/kernels/thread_pool.hpp"
#include "runtime/model/checkpoint.hpp"

namespace {

using tandem::bench::DecodeLoop;

using namespace tandem::rt;

// What one decode step reads and computes in each region of StepProfile: every
// weight of the main model except the routed experts, num_experts_per_tok experts
// per MoE layer, the whole LM head, one embedding row, and the KV cache up to
// `context`. FLOPs: 2 per multiply-add of every product, plus attention's scores and
// weighted sums over the cache.
struct RegionCost {
  double bytes = 0, flops = 0;
};
using RegionCosts = std::array<RegionCost, StepProfile::kRegions>;

RegionCosts CostsPerToken(const Checkpoint& ckpt, int context) {
  const ModelConfig& c = ckpt.config();
  RegionCosts costs{};
  const std::string mtp = fmt::format("model.layers.{}.", c.num_hidden_layers);
  const auto region_of = [](const std::string& name) {
    if (name.find(".self_attn.kv_b_proj.") != std::string::npos) return StepProfile::kAttentionCache;
    if (name.find("layernorm") != std::string::npos) return StepProfile::kOther;
    if (name.find(".self_attn.") != std::string::npos) return StepProfile::kAttentionProjections;
    if (name.find(".mlp.gate.") != std::string::npos) return StepProfile::kRouter;
    if (name.find(".mlp.shared_experts.") != std::string::npos) return StepProfile::kExperts;
    if (name.find(".mlp.") != std::string::npos) return StepProfile::kDenseMlp;
    if (name == "lm_head.weight" || name == "model.norm.weight") return StepProfile::kLmHead;
    return StepProfile::kOther;
  };
  for (const std::string& name : ckpt.TensorNames()) {
    if (c.num_nextn_predict_layers > 0 && name.starts_with(mtp)) continue;
    if (name.find(".mlp.experts.") != std::string::npos) continue;  // counted below: only the routed ones
    const TensorInfo& info = ckpt.Info(name);
    const auto size = static_cast<double>(info.end - info.begin);
    // Multiply-adds: a matrix's values (an int4 `.qweight` packs two per byte);
    // scales and vectors have none.
    double values = 0;
    if (info.shape.size() == 2 && (name.ends_with(".weight") || name.ends_with(".qweight"))) {
      values = static_cast<double>(info.elements()) * (info.dtype == DType::kU8 ? 2 : 1);
    }
    // A quantized matrix's values and scales count where its X.weight would.
    std::string as_weight = name;
    for (const char* suffix : {".qweight", ".qscales"}) {
      if (name.ends_with(suffix)) as_weight = name.substr(0, name.size() - std::string_view(suffix).size()) + ".weight";
    }
    if (as_weight == "model.embed_tokens.weight") {  // one row copied; a tied LM head reads all of it
      costs[StepProfile::kOther].bytes += size / static_cast<double>(c.vocab_size);
      if (c.tie_word_embeddings) {
        costs[StepProfile::kLmHead].bytes += size;
        costs[StepProfile::kLmHead].flops += 2 * values;
      }
      continue;
    }
    RegionCost& r = costs[region_of(as_weight)];
    r.bytes += size;
    r.flops += 2 * values;
  }
  int moe_layers = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) moe_layers += c.IsMoeLayer(l) ? 1 : 0;
  // As stored: bf16, fp8 (a byte, and a 128 × 128 block's scale), or what `tandem-rt
  // quantize` writes: a byte (int8) or half (int4) per value and an fp32 scale per group.
  double per_value = 2.0;
  const std::string routed = fmt::format("model.layers.{}.mlp.experts.0.gate_proj.weight", c.first_k_dense_replace);
  if (c.quantization) {
    per_value = (c.quantization->format == QuantFormat::kInt8 ? 1.0 : 0.5) + 4.0 / c.quantization->group_size;
  } else if (ckpt.Has(routed) && ckpt.Info(routed).dtype == DType::kF8E4M3) {
    per_value = 1.0 + 4.0 / (128.0 * 128.0);
  }
  const double expert_values = 3.0 * c.hidden_size * c.moe_intermediate_size;
  costs[StepProfile::kExperts].bytes += moe_layers * c.num_experts_per_tok * expert_values * per_value;
  costs[StepProfile::kExperts].flops += moe_layers * c.num_experts_per_tok * expert_values * 2;
  // The cache: read once per layer; per head, a score over (latent + rope) and a
  // weighted sum over the latent at every position.
  const double width = c.kv_lora_rank + c.qk_rope_head_dim;
  costs[StepProfile::kAttentionCache].bytes += static_cast<double>(context) * c.num_hidden_layers * width * 4.0;
  costs[StepProfile::kAttentionCache].flops +=
      static_cast<double>(context) * c.num_hidden_layers * c.num_attention_heads * 2.0 * (width + c.kv_lora_rank);
  return costs;
}

double BytesPerToken(const Checkpoint& ckpt, int context) {
  double bytes = 0;
  for (const RegionCost& r : CostsPerToken(ckpt, context)) bytes += r.bytes;
  return bytes;
}

// One sequence decoding with its context cycling between 32 and 160 tokens.
// The checkpoint of a format argument: 16 = BenchModel() (bf16), 8 / 4 = its routed
// experts quantized to int8 / int4, 48 / 44 = its routed and shared experts.
const std::filesystem::path& ModelOfFormat(std::int64_t format) {
  if (format == 16) return tandem::bench::BenchModel();
  const bool all = format >= 40;
  return tandem::bench::BenchModelQuantized(format % 10 == 8 ? QuantFormat::kInt8 : QuantFormat::kInt4, all);
}

// Args: threads (0 = all cores), expert format (16, 8, 4, 44; see ModelOfFormat).
void DecodeWith(benchmark::State& state, WeightPlacement placement) {
  const Checkpoint ckpt = Checkpoint::Open(ModelOfFormat(state.range(1)), placement);
  Engine engine(ckpt, EngineOptions{.threads = static_cast<int>(state.range(0))});
  DecodeLoop loop(engine);
  // The read bandwidth both before and after the decode loop, the higher counting:
  // on a shared host it changes between minutes, and the fraction should not flatter.
  const double before = tandem::bench::MeasureReadBandwidth(engine.pool());
  for (auto _ : state) loop.Step();
  const double bytes = BytesPerToken(ckpt, DecodeLoop::kPrompt + DecodeLoop::kWindow / 2);
  const double bandwidth = std::max(before, tandem::bench::MeasureReadBandwidth(engine.pool()));
  state.SetItemsProcessed(state.iterations());
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["MB/token"] = bytes / 1e6;
  state.counters["read_GB/s"] = bandwidth / 1e9;
  state.counters["bw_fraction"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * bytes / bandwidth, benchmark::Counter::kIsRate);
}
void BM_Decode(benchmark::State& state) { DecodeWith(state, WeightPlacement::kCopied); }
BENCHMARK(BM_Decode)->ArgsProduct({{1, 0}, {16, 8, 4, 44}})->ArgNames({"threads", "experts"})->Unit(benchmark::kMillisecond)->MinTime(3.0);
// The same with the weights read where the checkpoint is mapped (--map-weights): on
// the page cache's page size, which depends on how the file got there.
void BM_DecodeMapped(benchmark::State& state) { DecodeWith(state, WeightPlacement::kMapped); }
BENCHMARK(BM_DecodeMapped)->ArgsProduct({{1, 0}, {16}})->ArgNames({"threads", "experts"})->Unit(benchmark::kMillisecond)->MinTime(3.0);

// BM_Decode with the engine's StepProfile: per region of a step, its time per token,
// bytes and FLOPs per token (CostsPerToken), and the rates they make, beside the
// read bandwidth of the same threads in the same run. bench/roofline.py sets these
// out as the roofline table in docs/performance.md. Arg: threads (0 = all cores).
void BM_DecodeRoofline(benchmark::State& state) {
  const Checkpoint ckpt = Checkpoint::Open(tandem::bench::BenchModel());
  StepProfile profile;
  Engine engine(ckpt, EngineOptions{.threads = static_cast<int>(state.range(0)), .profile = &profile});
  DecodeLoop loop(engine);
  const double before = tandem::bench::MeasureReadBandwidth(engine.pool());
  profile = StepProfile{};
  for (auto _ : state) loop.Step();
  const double bandwidth = std::max(before, tandem::bench::MeasureReadBandwidth(engine.pool()));
  const RegionCosts costs = CostsPerToken(ckpt, DecodeLoop::kPrompt + DecodeLoop::kWindow / 2);
  const auto passes = static_cast<double>(profile.passes);
  double bytes = 0;
  for (std::size_t r = 0; r < StepProfile::kRegions; ++r) {
    const std::string name(StepProfile::Name(static_cast<StepProfile::Region>(r)));
    const double seconds = profile.seconds[r] / passes;
    state.counters[name + "_us"] = seconds * 1e6;
    state.counters[name + "_MB"] = costs[r].bytes / 1e6;
    state.counters[name + "_MFLOP"] = costs[r].flops / 1e6;
    bytes += costs[r].bytes;
  }
  state.counters["step_us"] = profile.TotalSeconds() / passes * 1e6;
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["MB/token"] = bytes / 1e6;
  state.counters["read_GB/s"] = bandwidth / 1e9;
  state.counters["bw_fraction"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * bytes / bandwidth, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DecodeRoofline)->Arg(1)->Arg(0)->ArgName("threads")->Unit(benchmark::kMillisecond)->MinTime(3.0);

// Per StepProfile region its time per pass (REGION_us), and the whole pass (step_us).
void StepCounters(benchmark::State& state, const StepProfile& profile) {
  const auto passes = static_cast<double>(profile.passes);
  for (std::size_t r = 0; r < StepProfile::kRegions; ++r) {
    state.counters[std::string(StepProfile::Name(static_cast<StepProfile::Region>(r))) + "_us"] = profile.seconds[r] / passes * 1e6;
  }
  state.counters["step_us"] = profile.TotalSeconds() / passes * 1e6;
}

// C sequences decoding together, one row each per step (what the server's scheduler
// does at concurrency C once prompts are in), contexts cycling between 32 and 160
// tokens and staggered so the batch's rows sit at different positions. Reports
// tokens per second over all sequences and, per StepProfile region, the time of a
// step: where a batched step's time goes against C1's. Args: threads (0 = all
// cores), sequences, same: 0 as above (every row routed its own way: ~51 of 64
// experts a layer at C16), 1 for C identical sequences fed the same tokens at the same
// positions, as a campaign's concurrency workload sends C identical greedy requests
// (every row routed alike: 6 experts a layer, C rows each).
void BM_BatchDecode(benchmark::State& state) {
  const Checkpoint ckpt = Checkpoint::Open(tandem::bench::BenchModel());
  StepProfile profile;
  Engine engine(ckpt, EngineOptions{.threads = static_cast<int>(state.range(0)), .profile = &profile});
  const int sequences = static_cast<int>(state.range(1));
  const bool same = state.range(2) != 0;
  constexpr int kPrompt = DecodeLoop::kPrompt, kWindow = DecodeLoop::kWindow;
  ForwardOutput out;
  std::vector<Row> rows;
  std::vector<int> positions(static_cast<std::size_t>(sequences));
  const auto id = [](int s) { return static_cast<SequenceId>(s + 1); };
  const auto own = [same](int s) { return same ? 0 : s; };  // what sets sequence s apart (nothing when alike)
  for (int s = 0; s < sequences; ++s) {                     // each prompt as long as its sequence's start position
    engine.kv().Open(id(s), kPrompt + kWindow);
    positions[static_cast<std::size_t>(s)] = kPrompt + (own(s) * kWindow) / sequences;
    rows.clear();
    for (int i = 0; i < positions[static_cast<std::size_t>(s)]; ++i) {
      rows.push_back({id(s), i, static_cast<TokenId>(100 + i + own(s)), i + 1 == positions[static_cast<std::size_t>(s)]});
    }
    engine.Forward(rows, out);
  }
  profile = StepProfile{};
  for (auto _ : state) {
    rows.clear();
    for (int s = 0; s < sequences; ++s) {
      int& p = positions[static_cast<std::size_t>(s)];
      if (p == kPrompt + kWindow) {
        engine.kv().Get(id(s)).Truncate(kPrompt);
        p = kPrompt;
      }
      rows.push_back({id(s), p, static_cast<TokenId>((p * 7 + own(s)) % 1000), true});
      ++p;
    }
    engine.Forward(rows, out);
  }
  StepCounters(state, profile);
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * sequences, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_BatchDecode)
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int threads : {1, 0}) {
        for (int sequences : {1, 4, 16}) {
          for (int same : {0, 1}) {
            if (sequences > 1 || same == 0) b->Args({threads, sequences, same});  // one sequence is alike either way
          }
        }
      }
    })
    ->ArgNames({"threads", "sequences", "same"})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

// A burst of prompts in one step, as the scheduler takes the prompts that wait beside
// a few decoding streams (PrefillBudget): S fresh sequences of P prompt tokens each in
// one Forward, the last row of each with logits. Prompt tokens per second over the
// step and, per StepProfile region, its time. Args: threads (0 = all cores), sequences,
// prompt tokens each (15 × 100 is a campaign's C16 batch after its first request).
void BM_PromptBurst(benchmark::State& state) {
  const Checkpoint ckpt = Checkpoint::Open(tandem::bench::BenchModel());
  StepProfile profile;
  Engine engine(ckpt, EngineOptions{.threads = static_cast<int>(state.range(0)), .profile = &profile});
  const int sequences = static_cast<int>(state.range(1)), prompt = static_cast<int>(state.range(2));
  ForwardOutput out;
  std::vector<Row> rows;
  SequenceId next = 1;
  const auto fresh_burst = [&] {  // the previous burst's caches closed, new ones opened
    rows.clear();
    for (int s = 0; s < sequences; ++s, ++next) {
      const SequenceId previous = next - static_cast<SequenceId>(sequences);  // the same place in the last burst
      if (engine.kv().Contains(previous)) engine.kv().Close(previous);
      engine.kv().Open(next, prompt);
      for (int i = 0; i < prompt; ++i) rows.push_back({next, i, static_cast<TokenId>(100 + (i * 7 + s) % 1000), i + 1 == prompt});
    }
  };
  fresh_burst();
  engine.Forward(rows, out);  // untimed: the step's buffers
  profile = StepProfile{};
  for (auto _ : state) {
    state.PauseTiming();
    fresh_burst();
    state.ResumeTiming();
    engine.Forward(rows, out);
  }
  StepCounters(state, profile);
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * sequences * prompt, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PromptBurst)
    ->ArgsProduct({{1, 0}, {15}, {100}})
    ->ArgNames({"threads", "sequences", "prompt"})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

// What an expert worker holding every routed and shared expert does per decoded
// token: for each MoE layer, one row through its 6 routed experts (drawn at random,
// as a router spreads them) and the shared expert. Args: threads (0 = all cores),
// expert format (16, 8, 4: the shared experts stay bf16; 44: int4 shared experts too).
void BM_ExpertDecode(benchmark::State& state) {
  const Checkpoint ckpt = Checkpoint::Open(ModelOfFormat(state.range(1)));
  const ModelConfig& c = ckpt.config();
  ThreadPool pool(static_cast<int>(state.range(0)));
  MoeSlices experts(ckpt, MoeSlices::Everything(c), &pool, false);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(c.hidden_size));
  for (float& v : x) v = normal(rng);
  std::vector<double> out(x.size());
  std::vector<ExpertRoute> routes(static_cast<std::size_t>(c.num_experts_per_tok));
  std::vector<int> ids(static_cast<std::size_t>(c.n_routed_experts));
  for (auto _ : state) {
    for (const LayerSlice& s : experts.slices()) {
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng);
      for (std::size_t k = 0; k < routes.size(); ++k) routes[k] = {ids[k], 1.0f / static_cast<float>(routes.size())};
      experts.Compute(s.layer, x.data(), 1, routes, c.num_experts_per_tok, out.data());
    }
  }
  // Bytes read per token: 6 routed experts and the shared one, per MoE layer.
  double per_value = 2.0;
  if (c.quantization) per_value = (c.quantization->format == QuantFormat::kInt8 ? 1.0 : 0.5) + 4.0 / c.quantization->group_size;
  const double expert_values = 3.0 * c.hidden_size * c.moe_intermediate_size;
  const double shared_per_value = c.quantization && c.quantization->shared_experts() ? per_value : 2.0;
  const double bytes = static_cast<double>(experts.slices().size()) *
                       (c.num_experts_per_tok * expert_values * per_value + c.n_shared_experts * expert_values * shared_per_value);
  const double bandwidth = tandem::bench::MeasureReadBandwidth(pool);
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["MB/token"] = bytes / 1e6;
  state.counters["read_GB/s"] = bandwidth / 1e9;
  state.counters["bw_fraction"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * bytes / bandwidth, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ExpertDecode)
    ->ArgsProduct({{1, 0}, {16, 8, 4, 44}})
    ->ArgNames({"threads", "experts"})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

// The replica drafter's forward (what one draft token costs): the same model with
// its projections and experts group-quantized. Arg: 8 (int8) or 4 (int4).
void BM_ReplicaDecode(benchmark::State& state) {
  const Checkpoint ckpt = Checkpoint::Open(tandem::bench::BenchModel());
  const QuantFormat format = state.range(0) == 8 ? QuantFormat::kInt8 : QuantFormat::kInt4;
  Engine engine(ckpt, EngineOptions{.quantize = format, .quantize_group = 32},
                [&](ThreadPool& pool) { return std::make_shared<QuantizedExpertExecutor>(ckpt, format, 32, &pool); });
  DecodeLoop loop(engine);
  for (auto _ : state) loop.Step();
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ReplicaDecode)->Arg(8)->Arg(4)->Unit(benchmark::kMillisecond)->MinTime(3.0);

// Greedy decode with 1 coordinator + 4 expert workers (tp, bf16 wire, 1 thread each)
// on loopback, against the single process on the same machine in the same run:
// blocks of 64 steps alternate between the two so drift hits both alike.
void BM_HybridDecodeVsSingle(benchmark::State& state) {
  const Checkpoint ckpt = Checkpoint::Open(tandem::bench::BenchModel());
  LocalWorkers workers(tandem::bench::BenchModel(), 4, false, 1, TANDEM_RT_BIN);
  Layout layout;
  layout.workers = workers.worker_addresses();
  std::shared_ptr<RemoteExpertExecutor> remote;
  Engine hybrid(ckpt, EngineOptions{}, [&](ThreadPool& pool) {
    remote = std::make_shared<RemoteExpertExecutor>(ckpt, PlacementPlan::Compute(ckpt.config(), layout), layout, &pool);
    return remote;
  });
  Engine single(ckpt, EngineOptions{});
  DecodeLoop hybrid_loop(hybrid), single_loop(single);
  const CoordinatorTimes before = remote->Times();
  std::uint64_t worker_compute_before = 0, bytes_before = 0;
  for (const RankStats& r : remote->RankStatistics()) {
    worker_compute_before += r.compute_ns;
    bytes_before += r.bytes_sent + r.bytes_received;
  }
  const tandem::bench::SideBySide run = tandem::bench::Alternate(state, single_loop, hybrid_loop);
  const double single_s = run.first_s, hybrid_s = run.second_s, tokens = run.tokens;
  const CoordinatorTimes& t = remote->Times();
  std::uint64_t worker_compute = 0, bytes = 0;
  for (const RankStats& r : remote->RankStatistics()) {
    worker_compute += r.compute_ns;
    bytes += r.bytes_sent + r.bytes_received;
  }
  const auto per_token_us = [&](std::uint64_t ns) { return static_cast<double>(ns) / 1e3 / tokens; };
  state.counters["single_tok/s"] = tokens / single_s;
  state.counters["hybrid_tok/s"] = tokens / hybrid_s;
  state.counters["hybrid/single"] = single_s / hybrid_s;
  state.counters["us/tok_step"] = hybrid_s * 1e6 / tokens;
  state.counters["us/tok_serialise"] = per_token_us(t.encode_ns - before.encode_ns);
  state.counters["us/tok_own_share"] = per_token_us(t.local_ns - before.local_ns);
  state.counters["us/tok_waiting"] = per_token_us(t.wait_ns - before.wait_ns);
  state.counters["us/tok_reduce"] = per_token_us(t.reduce_ns - before.reduce_ns);
  state.counters["us/tok_worker_compute"] = per_token_us(worker_compute - worker_compute_before) / 4.0;  // per worker
  state.counters["net_KB/tok"] = static_cast<double>(bytes - bytes_before) / 1e3 / tokens;
}
BENCHMARK(BM_HybridDecodeVsSingle)->Unit(benchmark::kMillisecond)->MinTime(6.0);

}  // namespace
