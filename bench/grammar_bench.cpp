// What constrained decoding adds per token: the logits mask of a JsonMatcher state,
// computed over the whole vocabulary (the small preset's 16k tokens and the full
// DeepSeek-V3 tokenizer's 129k), in a structural position (after `{"name": "Ann", `)
// and inside a string. Compare with a decode step (BM_Decode) in the same run.
#include <limits>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "bench/bench_model.hpp"
#include "runtime/grammar/json_matcher.hpp"
#include "runtime/grammar/token_mask.hpp"
#include "runtime/model/synthetic_tokenizer.hpp"
#include "runtime/model/tokenizer.hpp"

namespace tandem::rt {
namespace {

const char* kSchema = R"({"type": "object", "additionalProperties": false, "required": ["name", "age", "tags"],
  "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                 "tags": {"type": "array", "items": {"type": "string", "maxLength": 16}}}})";

void BM_TokenMask(benchmark::State& state) {
  // Arg 0: the small preset's tokenizer; 1: the full DeepSeek-V3 tokenizer.
  const Tokenizer tokenizer = state.range(0) == 0 ? Tokenizer::Load(tandem::bench::BenchModel() / "tokenizer.json")
                                                  : Tokenizer::Load(DefaultTokenizerSource() / "tokenizer.json");
  const TokenTrie trie(tokenizer, tokenizer.vocab_size());
  JsonMatcher m(JsonGrammar::Compile(nlohmann::ordered_json::parse(kSchema)));
  m.Accept(state.range(1) == 0 ? R"({"name": "Ann", )" : R"({"name": "An)");
  std::vector<float> logits(static_cast<std::size_t>(tokenizer.vocab_size()), 0.0f);
  for (auto _ : state) {
    trie.Mask(m, 1, logits);
    benchmark::DoNotOptimize(logits.data());
  }
  int allowed = 0;
  for (float v : logits) allowed += v > -std::numeric_limits<float>::infinity() ? 1 : 0;
  state.counters["vocab"] = tokenizer.vocab_size();
  state.counters["allowed"] = allowed;
}
BENCHMARK(BM_TokenMask)->ArgsProduct({{0, 1}, {0, 1}})->ArgNames({"v3vocab", "in_string"})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tandem::rt
