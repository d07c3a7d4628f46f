#pragma once

#include <algorithm>
#include <cstddef>

namespace tandem::rt {

// The most prompt chunks (`--prefill-chunk` tokens each) one step may take.
inline constexpr int kMaxPrefillChunks = 8;

// How many prompt tokens one scheduler step takes, over all prefilling requests:
// `chunk` (--prefill-chunk) times the prompts waiting per decoding request, from one to
// kMaxPrefillChunks chunks. A step's time is shared by everyone in it, so the prompts'
// share grows with their number: with many streams decoding, a new prompt goes in
// chunk by chunk and the streams barely slow down; when a burst of requests arrives
// while few (or none) decode, the burst is prefilled in one or a few large steps, which
// the matrix kernels run far more efficiently than many small ones (and every request
// of the burst gets its first token sooner), at the cost of one longer gap for the few
// streams already decoding.
inline int PrefillBudget(int chunk, std::size_t prefilling, std::size_t decoding) {
  if (prefilling == 0) return 0;
  const std::size_t per_decoding = decoding == 0 ? prefilling : (prefilling + decoding - 1) / decoding;
  return chunk * static_cast<int>(std::clamp<std::size_t>(per_decoding, 1, kMaxPrefillChunks));
}

}  // namespace tandem::rt
