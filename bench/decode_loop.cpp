#include "bench/decode_loop.hpp"

#include <chrono>
#include <vector>

#include "runtime/engine/engine.hpp"
#include "runtime/engine/kv_cache.hpp"

namespace tandem::bench {

DecodeLoop::DecodeLoop(rt::DecodeEngine& engine) : engine_(engine), out_(std::make_unique<rt::ForwardOutput>()) {
  engine_.kv().Open(1, kPrompt + kWindow);
  std::vector<rt::Row> rows;
  for (int i = 0; i < kPrompt; ++i) rows.push_back({1, i, Token(i), i + 1 == kPrompt});
  engine_.Forward(rows, *out_);
}

DecodeLoop::~DecodeLoop() = default;

void DecodeLoop::Step() {
  if (position_ == kPrompt + kWindow) {
    engine_.kv().Get(1).Truncate(kPrompt);
    position_ = kPrompt;
  }
  const rt::Row row{1, position_, Token(position_), true};
  engine_.Forward(std::span<const rt::Row>(&row, 1), *out_);
  ++position_;
}

// Ids spread over the vocabulary (any model's), the same for every run.
rt::TokenId DecodeLoop::Token(int position) const { return static_cast<rt::TokenId>((100 + 7 * position) % engine_.vocab_size()); }

namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

SideBySide Alternate(benchmark::State& state, DecodeLoop& first, DecodeLoop& second, int block) {
  SideBySide out;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < block; ++i) first.Step();
    out.first_s += Seconds(t0);
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < block; ++i) second.Step();
    out.second_s += Seconds(t0);
  }
  out.tokens = static_cast<double>(state.iterations()) * block;
  return out;
}

}  // namespace tandem::bench
