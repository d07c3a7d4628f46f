// Single-process decode speed on a synthetic checkpoint, against the machine's
// measured read bandwidth. Decode is memory-bound: each token reads every active
// weight once, so tok/s × bytes per token ÷ bandwidth says how close we are.
//
// The checkpoint is $TANDEM_BENCH_MODEL, or the "small" preset (seed 1).
#include <cstdlib>
#include <unistd.h>
#include <filesystem>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench/memory_bandwidth.hpp"
#include "runtime/engine/engine.hpp"
#include "runtime/kernels/thread_pool.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/synthetic_checkpoint.hpp"
#include "runtime/model/synthetic_tokenizer.hpp"

namespace {

using namespace tandem::rt;

// Written fresh (about a second) rather than cached, so it always matches this build's
// init-model; removed when the benchmark exits.
std::filesystem::path BenchModel() {
  if (const char* dir = std::getenv("TANDEM_BENCH_MODEL"); dir != nullptr && *dir != '\0') return dir;
  // Never destroyed: the exit handler that removes the directory still needs it.
  static const auto* dir = [] {
    auto* d = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                        fmt::format("tandem-bench-small-{}", ::getpid()));
    WriteSyntheticCheckpoint(FindPreset("small"), 1, *d, DefaultTokenizerSource());
    return d;
  }();
  static const bool cleanup = [] {
    return std::atexit([] {
             std::error_code ec;
             std::filesystem::remove_all(*dir, ec);
           }) == 0;
  }();
  (void)cleanup;
  return *dir;
}

// Bytes one decode step reads: every weight of the main model except the routed
// experts, num_experts_per_tok experts per MoE layer, the whole LM head, one
// embedding row, and the KV cache up to `context`.
double BytesPerToken(const Checkpoint& ckpt, int context) {
  const ModelConfig& c = ckpt.config();
  double bytes = 0;
  const std::string mtp = fmt::format("model.layers.{}.", c.num_hidden_layers);
  for (const std::string& name : ckpt.TensorNames()) {
    if (c.num_nextn_predict_layers > 0 && name.starts_with(mtp)) continue;
    if (name.find(".mlp.experts.") != std::string::npos) continue;
    const TensorInfo& info = ckpt.Info(name);
    double size = static_cast<double>(info.end - info.begin);
    if (name == "model.embed_tokens.weight") size /= static_cast<double>(c.vocab_size);  // one row
    bytes += size;
  }
  int moe_layers = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) moe_layers += c.IsMoeLayer(l) ? 1 : 0;
  const double expert = 3.0 * c.hidden_size * c.moe_intermediate_size * 2.0;  // bf16
  bytes += moe_layers * c.num_experts_per_tok * expert;
  bytes += static_cast<double>(context) * c.num_hidden_layers * (c.kv_lora_rank + c.qk_rope_head_dim) * 4.0;
  return bytes;
}

void BM_Decode(benchmark::State& state) {
  const Checkpoint ckpt = Checkpoint::Open(BenchModel());
  Engine engine(ckpt, EngineOptions{.threads = static_cast<int>(state.range(0))});
  const int prompt = 32, window = 128;
  engine.kv().Open(1, prompt + window);
  std::vector<Row> rows;
  for (int i = 0; i < prompt; ++i) rows.push_back({1, i, static_cast<TokenId>(100 + i), i + 1 == prompt});
  ForwardOutput out;
  engine.Forward(rows, out);
  int position = prompt;
  for (auto _ : state) {
    if (position == prompt + window) {  // keep the context between 32 and 160 tokens
      engine.kv().Get(1).Truncate(prompt);
      position = prompt;
    }
    const Row row{1, position, static_cast<TokenId>(position % 1000), true};
    engine.Forward(std::span<const Row>(&row, 1), out);
    ++position;
  }
  const double bytes = BytesPerToken(ckpt, prompt + window / 2);
  const double bandwidth = tandem::bench::MeasureReadBandwidth(engine.pool());
  state.SetItemsProcessed(state.iterations());
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["MB/token"] = bytes / 1e6;
  state.counters["read_GB/s"] = bandwidth / 1e9;
  state.counters["bw_fraction"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * bytes / bandwidth, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Decode)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->MinTime(3.0);

}  // namespace
