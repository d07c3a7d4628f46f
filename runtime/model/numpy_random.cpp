#include "runtime/model/numpy_random.hpp"

#include <limits>
#include <stdexcept>

namespace tandem::rt {

namespace {

using u32 = std::uint32_t;
using u64 = std::uint64_t;
// 128-bit arithmetic as PCG64 is defined (a GCC/Clang extension).
__extension__ typedef unsigned __int128 u128;

// SeedSequence's hashing constants (numpy/random/bit_generator.pyx).
constexpr u32 kInitA = 0x43b0d7e5, kMultA = 0x931e8875, kInitB = 0x8b51f9dd, kMultB = 0x58f38ded;
constexpr u32 kMixL = 0xca01f9dd, kMixR = 0x4973f715;

u32 HashMix(u32 value, u32& hash) {
  value ^= hash;
  hash *= kMultA;
  value *= hash;
  return value ^ (value >> 16);
}

u32 Mix(u32 x, u32 y) {
  const u32 r = kMixL * x - kMixR * y;
  return r ^ (r >> 16);
}

// SeedSequence(seed).generate_state(4, uint64): a pool of 4 words mixed from the seed's
// 32-bit words, then 8 words drawn from it, paired little-endian.
void SeedState(u64 seed, u64 out[4]) {
  std::vector<u32> entropy;
  if (seed == 0) entropy.push_back(0);
  for (; seed > 0; seed >>= 32) entropy.push_back(static_cast<u32>(seed));
  u32 pool[4];
  u32 hash = kInitA;
  for (std::size_t i = 0; i < 4; ++i) pool[i] = HashMix(i < entropy.size() ? entropy[i] : 0, hash);
  for (int src = 0; src < 4; ++src) {
    for (int dst = 0; dst < 4; ++dst) {
      if (src != dst) pool[dst] = Mix(pool[dst], HashMix(pool[src], hash));
    }
  }
  for (std::size_t src = 4; src < entropy.size(); ++src) {
    for (u32& p : pool) p = Mix(p, HashMix(entropy[src], hash));
  }
  u32 words[8];
  u32 hash_b = kInitB;
  for (int i = 0; i < 8; ++i) {
    u32 v = pool[i % 4] ^ hash_b;
    hash_b *= kMultB;
    v *= hash_b;
    words[i] = v ^ (v >> 16);
  }
  for (int i = 0; i < 4; ++i) out[i] = static_cast<u64>(words[2 * i]) | (static_cast<u64>(words[2 * i + 1]) << 32);
}

class Pcg64 {
 public:
  explicit Pcg64(u64 seed) {
    u64 s[4];
    SeedState(seed, s);
    const u128 initstate = (static_cast<u128>(s[0]) << 64) | s[1];
    const u128 initseq = (static_cast<u128>(s[2]) << 64) | s[3];
    inc_ = (initseq << 1) | 1;
    Step();
    state_ += initstate;
    Step();
  }
  u64 Next() {
    Step();
    const u64 x = static_cast<u64>(state_ >> 64) ^ static_cast<u64>(state_);
    const auto r = static_cast<unsigned>(state_ >> 122);
    return (x >> r) | (x << ((64 - r) & 63));
  }

 private:
  static constexpr u128 kMultiplier = (static_cast<u128>(0x2360ED051FC65DA4ULL) << 64) | 0x4385DF649FCCF645ULL;
  void Step() { state_ = state_ * kMultiplier + inc_; }
  u128 state_ = 0, inc_ = 0;
};

}  // namespace

std::vector<std::int64_t> NumpyIntegers(std::uint64_t seed, std::int64_t high, int count) {
  if (high <= (std::int64_t{1} << 32) + 1) throw std::invalid_argument("NumpyIntegers: the bound must exceed 2^32 + 1");
  Pcg64 g(seed);
  const u64 range = static_cast<u64>(high) - 1, exclusive = range + 1;
  std::vector<std::int64_t> out;
  for (int i = 0; i < count; ++i) {
    u128 m = static_cast<u128>(g.Next()) * exclusive;
    u64 leftover = static_cast<u64>(m);
    if (leftover < exclusive) {
      const u64 threshold = (std::numeric_limits<u64>::max() - range) % exclusive;
      while (leftover < threshold) {
        m = static_cast<u128>(g.Next()) * exclusive;
        leftover = static_cast<u64>(m);
      }
    }
    out.push_back(static_cast<std::int64_t>(m >> 64));
  }
  return out;
}

}  // namespace tandem::rt
