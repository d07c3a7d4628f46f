#pragma once

#include <cstdint>
#include <span>

#include "runtime/model/tokenizer.hpp"

namespace tandem::rt {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  std::uint64_t seed = 0;
};

// SplitMix64: a stateless 64-bit mix, the basis of every random draw.
std::uint64_t SplitMix64(std::uint64_t x);

// The uniform draw in (0, 1) for token `token` at a request's absolute position: a
// function of (seed, position, token) only, so a seeded request samples the same
// tokens however it is batched, drafted or resumed.
double TokenDraw(std::uint64_t seed, std::int64_t position, TokenId token);

// softmax(logits)[token]: a drafter's confidence in the token it proposes.
float Probability(std::span<const float> logits, TokenId token);

// Greedy: the largest logit, lowest id on ties.
TokenId ArgMax(std::span<const float> logits);

// Picks the token at `position` from `logits`. Order (documented in
// docs/engine.md, "Sampling order"): temperature 0 → greedy; otherwise logits / T; keep the
// top_k largest; softmax; keep the smallest prefix (by probability, ties by id)
// whose mass reaches top_p; drop tokens below min_p × the largest probability; then
// the survivor with the smallest −log(TokenDraw(seed, position, token)) / p (an
// exponential race: exactly a draw from the renormalised survivors; ties: the
// earlier survivor). Without top-k nothing is sorted, or with top-p only the prefix
// its mass needs (the same survivors and race; the normalising sum in token order,
// see sampler.cpp).
TokenId Sample(std::span<const float> logits, const SamplingParams& params, std::int64_t position);

}  // namespace tandem::rt
