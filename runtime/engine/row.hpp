#pragma once

#include <cstdint>

#include "runtime/engine/kv_cache.hpp"
#include "runtime/model/tokenizer.hpp"

namespace tandem::rt {

// One token to compute: a row of the batch. Rows of one batch may come from
// different sequences; rows of one sequence must be consecutive positions
// starting at that sequence's cache length (its KV is written at `position`).
struct Row {
  SequenceId sequence = 0;
  std::int32_t position = 0;
  TokenId token = 0;
  bool logits = true;  // whether the LM head runs for this row
};

}  // namespace tandem::rt
