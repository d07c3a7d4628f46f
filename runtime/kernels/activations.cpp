// The two kernels of a decode step that take exponentials: SwiGLU over every MLP's
// gate and the softmax over attention scores. They use ExpF, an exp whose every
// step is a plain IEEE operation, so the compiler vectorises it (libm's expf is a
// call per value, which made these loops ~4 ns a value) and every vector width gives
// the bits a scalar loop would. This file is compiled with -ffp-contract=off: a
// fused multiply-add on some CPUs and not others would break that. So the loops are
// cloned per vector width and the loader picks the widest the CPU has (attention's
// softmax over a long context ran at 4 values an instruction, a quarter of its time
// once the scores took 16).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "runtime/kernels/ops.hpp"

namespace tandem::rt {

namespace {

// exp(x) within 1 ulp as measured (the tests allow 4) for x in [kLo, kHi]
// (Cody–Waite reduction by ln 2 and Cephes' degree-6 polynomial); 0 below kLo, where
// exp would be subnormal; +inf above kHi, where it overflows; NaN for NaN.
constexpr float kLo = -87.33654022f;  // the float just above ln(FLT_MIN) = −87.3365447…
constexpr float kHi = 88.72283f;      // the float just below ln(FLT_MAX) = 88.7228391…
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kRound = 12582912.0f;  // 1.5 · 2^23: adding it rounds to an integer
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;

inline float ExpF(float x) {
  const bool underflow = x<kLo, overflow = x> kHi;
  x = overflow ? kHi : x;  // comparisons are false for NaN, so NaN stays NaN
  x = underflow ? kLo : x;
  float n = (x * kLog2e + kRound) - kRound;  // in [−126, 128]
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  // p · 2^n, with 2^n built from its exponent bits: n = 128 has none, so it is taken
  // as 2^127 · 2 (both exact). NaN takes n = 127 (p is NaN already).
  const float twice = n > 127.0f ? 2.0f : 1.0f;
  n = n < 127.0f ? n : 127.0f;
  const std::uint32_t bits = static_cast<std::uint32_t>(static_cast<std::int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  const float y = p * scale * twice;
  return underflow ? 0.0f : overflow ? std::numeric_limits<float>::infinity() : y;
}

#if defined(__x86_64__)
#define TANDEM_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TANDEM_VECTOR_CLONES
#endif

}  // namespace

TANDEM_VECTOR_CLONES void SwiGlu(float* gate, const float* up, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + ExpF(-g)) * up[i];
  }
}

TANDEM_VECTOR_CLONES void SwiGluClamped(float* gate, const float* up, std::int64_t n, float limit) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = gate[i] < limit ? gate[i] : limit;
    const float u = up[i] < -limit ? -limit : up[i] > limit ? limit : up[i];
    gate[i] = g / (1.0f + ExpF(-g)) * u;
  }
}

TANDEM_VECTOR_CLONES void Softmax(float* x, std::int64_t n) {
  if (n <= 0) return;
  // The largest value by sixteen lanes: the same maximum as one pass in order, and
  // where that pass would keep a different zero or NaN, every output is the same
  // anyway (x − ±0 is x; a NaN anywhere makes the total, so every output, NaN).
  float lanes_max[16];
  for (float& m : lanes_max) m = x[0];
  std::int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    for (int l = 0; l < 16; ++l) lanes_max[l] = x[k + l] > lanes_max[l] ? x[k + l] : lanes_max[l];
  }
  for (int width = 8; width > 0; width /= 2) {  // a tree, not a chain of sixteen dependent compares
    for (int l = 0; l < width; ++l) lanes_max[l] = lanes_max[l + width] > lanes_max[l] ? lanes_max[l + width] : lanes_max[l];
  }
  float max = lanes_max[0];
  for (; k < n; ++k) max = x[k] > max ? x[k] : max;
  for (std::int64_t i = 0; i < n; ++i) x[i] = ExpF(x[i] - max);
  // The total in eight double lanes (value i in lane i mod 8), combined pairwise.
  double lanes[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] += static_cast<double>(x[i + l]);
  }
  for (int l = 0; i < n; ++i, ++l) lanes[l] += static_cast<double>(x[i]);
  for (int width = 4; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  const float inv = static_cast<float>(1.0 / lanes[0]);
  for (std::int64_t j = 0; j < n; ++j) x[j] *= inv;
}

}  // namespace tandem::rt
