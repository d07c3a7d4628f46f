#include "runtime/engine/engram_hash.hpp"

#include <vector>

#include "runtime/model/engram_constants.hpp"

namespace tandem::rt {

void EngramRows(const EngramLayerConstants& layer, int max_ngram, int heads, std::int64_t pad_id, std::span<const std::int64_t> compressed,
                std::int64_t begin, std::int64_t end, std::int64_t* out) {
  std::vector<std::int64_t> product(static_cast<std::size_t>(max_ngram));
  for (std::int64_t p = begin; p < end; ++p) {
    for (int k = 0; k < max_ngram; ++k) {
      const std::int64_t t = p - k >= 0 ? compressed[static_cast<std::size_t>(p - k)] : pad_id;
      product[static_cast<std::size_t>(k)] = t * layer.multipliers[static_cast<std::size_t>(k)];
    }
    std::int64_t h = product[0];
    for (int n = 2; n <= max_ngram; ++n) {
      h ^= product[static_cast<std::size_t>(n - 1)];
      for (int j = 0; j < heads; ++j) {
        const auto at = static_cast<std::size_t>((n - 2) * heads + j);
        *out++ = h % layer.primes[at] + layer.offsets[at];
      }
    }
  }
}

}  // namespace tandem::rt
