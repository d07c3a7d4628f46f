#include "runtime/model/engram_layout.hpp"

#include <set>

#include "runtime/model/v41_config.hpp"

namespace tandem::rt {

namespace {

bool IsPrime(std::int64_t n) {
  if (n < 2) return false;
  if (n % 2 == 0) return n == 2;
  for (std::int64_t d = 3; d * d <= n; d += 2) {
    if (n % d == 0) return false;
  }
  return true;
}

}  // namespace

std::vector<EngramLayerLayout> EngramLayout(const V41Config& c) {
  std::vector<EngramLayerLayout> layers;
  std::set<std::int64_t> used;
  for (int layer : c.engram_layer_ids) {
    EngramLayerLayout l;
    l.layer = layer;
    for (int n = 2; n <= c.engram_max_ngram_size; ++n) {
      std::int64_t current = c.engram_vocab_size - 1;
      for (int head = 0; head < c.engram_n_heads; ++head) {
        std::int64_t p = current + 1;
        while (!IsPrime(p) || used.contains(p)) ++p;
        used.insert(p);
        l.offsets.push_back(l.rows);
        l.primes.push_back(p);
        l.rows += p;
        current = p;
      }
    }
    layers.push_back(std::move(l));
  }
  return layers;
}

}  // namespace tandem::rt
