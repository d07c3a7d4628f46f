#pragma once

#include <memory>

#include <benchmark/benchmark.h>

#include "runtime/engine/decode_engine.hpp"

namespace tandem::bench {

// One sequence decoding a token a step on any engine, its context cycling from kPrompt to
// kPrompt + kWindow tokens (truncated back when full), so a long run measures a steady mix
// of context lengths.
class DecodeLoop {
 public:
  explicit DecodeLoop(rt::DecodeEngine& engine);
  ~DecodeLoop();
  void Step();
  static constexpr int kPrompt = 32, kWindow = 128;

 private:
  rt::TokenId Token(int position) const;

  rt::DecodeEngine& engine_;
  std::unique_ptr<rt::ForwardOutput> out_;  // defined beside the V3 engine
  int position_ = kPrompt;
};

// Blocks of `block` steps of `first`, then of `second`, alternating once per benchmark
// iteration, so that a shared host's drift hits both alike: their seconds and tokens each.
struct SideBySide {
  double first_s = 0, second_s = 0, tokens = 0;
};
SideBySide Alternate(benchmark::State& state, DecodeLoop& first, DecodeLoop& second, int block = 64);

}  // namespace tandem::bench
