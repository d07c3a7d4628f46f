// DeepSeek V4.1 decode in the engine (runtime/engine/v41_engine): one sequence, one token a
// step with the context cycling 32–160 (as BM_Decode for V3), on a synthetic preset written
// fresh: its FP8 attention and FP4 experts read as stored. Beside BM_Decode/threads:T/
// experts:16 (V3's `small` preset, bf16), what V4.1's pieces cost at a similar size.
//
// BM_V41Decode/threads:T/preset:P — P 0 v41-tiny, 1 v41-small. Counters: tok/s.
#include <filesystem>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "runtime/engine/v41_engine.hpp"
#include "runtime/model/engram_layout.hpp"
#include "runtime/model/text_file.hpp"
#include "runtime/model/v41_checkpoint.hpp"
#include "runtime/model/v41_synthetic.hpp"

namespace tandem::rt {
namespace {

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
  constexpr int kPrompt = 32, kWindow = 128;
  engine.kv().Open(1, kPrompt + kWindow);
  std::vector<Row> prompt;
  for (int i = 0; i < kPrompt; ++i) prompt.push_back({1, i, static_cast<TokenId>(i * 7 % 500), i + 1 == kPrompt});
  ForwardOutput out;
  engine.Forward(prompt, out);
  int position = kPrompt;
  for (auto _ : state) {
    if (position == kPrompt + kWindow) {
      engine.kv().Get(1).Truncate(kPrompt);
      position = kPrompt;
    }
    const Row row{1, position, static_cast<TokenId>(position % 500), true};
    engine.Forward(std::span<const Row>(&row, 1), out);
    ++position;
  }
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(preset);
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_V41Decode)->ArgsProduct({{1, 0}, {0, 1}})->ArgNames({"threads", "preset"})->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace
}  // namespace tandem::rt
