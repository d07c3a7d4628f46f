#include "tests/runtime/engine_rows.hpp"

#include "runtime/sampling/sampler.hpp"

namespace tandem::testing {

std::vector<rt::TokenId> Tokens(int n, std::uint64_t seed, int vocab) {
  std::vector<rt::TokenId> t;
  for (int i = 0; i < n; ++i) {
    t.push_back(static_cast<rt::TokenId>(rt::SplitMix64(seed * 1000 + static_cast<std::uint64_t>(i)) % static_cast<std::uint64_t>(vocab)));
  }
  return t;
}

std::vector<float> Prefill(rt::Engine& engine, rt::SequenceId seq, const std::vector<rt::TokenId>& tokens) {
  std::vector<rt::Row> rows;
  const int start = engine.kv().Get(seq).length();
  for (std::size_t i = 0; i < tokens.size(); ++i) rows.push_back({seq, start + static_cast<std::int32_t>(i), tokens[i], true});
  rt::ForwardOutput out;
  engine.Forward(rows, out);
  return out.logits;
}

}  // namespace tandem::testing
