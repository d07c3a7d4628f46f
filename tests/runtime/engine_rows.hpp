#pragma once

#include <cstdint>
#include <vector>

#include "runtime/engine/engine.hpp"

namespace tandem::testing {

// n pseudo-random token ids below `vocab`, a function of `seed` only.
std::vector<rt::TokenId> Tokens(int n, std::uint64_t seed, int vocab);

// Feeds `tokens` to sequence `seq` (from its cache length on) in one forward and
// returns the logits of every row.
std::vector<float> Prefill(rt::Engine& engine, rt::SequenceId seq, const std::vector<rt::TokenId>& tokens);

}  // namespace tandem::testing
