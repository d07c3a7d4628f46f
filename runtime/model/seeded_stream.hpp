#pragma once

// The random streams synthetic checkpoints draw their tensors from: one per (seed,
// tensor name), so a tensor's values never depend on which others a preset has.
#include <cstdint>
#include <string>

namespace tandem::rt {

// SplitMix64's finaliser.
inline std::uint64_t Mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline std::uint64_t Fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// The state a tensor's stream starts from.
inline std::uint64_t StreamSeed(std::uint64_t seed, const std::string& name) { return Mix(seed) ^ Fnv1a(name); }

// The stream's next value, uniform in [−1, 1).
inline double NextSymmetric(std::uint64_t& state) {
  return static_cast<double>(Mix(state += 0x9E3779B97F4A7C15ull) >> 11) * 0x1.0p-53 * 2.0 - 1.0;
}

}  // namespace tandem::rt
