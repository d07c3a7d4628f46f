#pragma once

#include <chrono>
#include <memory>

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

// Seconds since `t0`.
double Seconds(std::chrono::steady_clock::time_point t0);

}  // namespace tandem::bench
