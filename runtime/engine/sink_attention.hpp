#pragma once

#include <cstdint>
#include <span>

// DeepSeek V4.1's attention for one query row and head: over a list of KV rows (a
// window of the latest tokens, then the compressed KV's picks), each row used as key and
// as value, with a per-head sink — one more logit in the softmax's denominator, with no
// value. As the reference's sparse_attn: in blocks of 64 indices, an online softmax whose
// probabilities are rounded to bf16 (against the running max) before they weigh the values,
// fp32 sums, the output rounded to bf16 once.
namespace tandem::rt {

inline constexpr int kSinkAttentionBlock = 64;

// q [d], kv [rows × d]; `indices` name rows of kv, −1 for none (skipped). The logits are
// (q·kv[t])·scale; `sink` enters unscaled. A list without a valid index gives zeros.
void SinkAttention(const float* q, const float* kv, std::span<const std::int32_t> indices, std::int64_t d, float scale, float sink,
                   float* out);

// The window's indices for the query at `position` of a sequence, `window` wide, oldest
// first: at prefill (the whole sequence's rows in order, `ring` false) the positions
// position − window + 1 … position of the rows; in decode (`ring` true, rows are the
// window-slot ring, slot = position % window) the ring's slots from the oldest. Slots
// or rows not yet written are −1. `out` holds `window` entries (prefill: min(window,
// rows in the call)).
void WindowIndices(std::int64_t position, int window, bool ring, std::int64_t rows, std::int32_t* out);

}  // namespace tandem::rt
