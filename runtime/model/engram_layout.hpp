#pragma once

#include <cstdint>
#include <vector>

namespace tandem::rt {

struct V41Config;

// The table layout of DeepSeek V4.1's Engram layers, as the reference's EngramLayout
// builds it: for each Engram layer in order, for each n-gram size 2…max, for each head,
// the smallest prime above engram_vocab_size − 1 not handed out before (the search starts
// again at every layer and n-gram size; no prime is handed out twice). A head's rows
// start at the sum of the primes before it in its layer (n-gram-major, head-minor).
struct EngramLayerLayout {
  int layer = 0;
  std::vector<std::int64_t> primes;   // [(max_ngram − 1) · n_heads]
  std::vector<std::int64_t> offsets;  // the same length: where each head's rows start
  std::int64_t rows = 0;              // the sum of the primes: the layer's table rows
};

std::vector<EngramLayerLayout> EngramLayout(const V41Config& config);

}  // namespace tandem::rt
