#pragma once

#include <cstdint>
#include <span>

namespace tandem::rt {

struct EngramLayerConstants;

// The table rows one Engram layer reads for positions [begin, end) of a sequence, as
// the reference's NgramHashState: for position p, t_k is the compressed id at p − k
// (k < max_ngram), or the pad id once p − k < 0 (and for every larger k); for each n-gram
// size n = 2…max_ngram, h = ⊕_{k<n} t_k·multiplier_k, and head j reads row
// (h mod prime) + offset of (n, j). `compressed` holds the ids of positions [0, end).
// Writes (max_ngram − 1)·heads rows per position, n-gram-major.
void EngramRows(const EngramLayerConstants& layer, int max_ngram, int heads, std::int64_t pad_id, std::span<const std::int64_t> compressed,
                std::int64_t begin, std::int64_t end, std::int64_t* out);

}  // namespace tandem::rt
