// The two kernels of a decode step that take exponentials: SwiGLU over every MLP's
// gate and the softmax over attention scores. They use ExpF, an exp whose every
// step is a plain IEEE operation, so the compiler vectorises it (libm's expf is a
// call per value, which made these loops ~4 ns a value) and every vector width gives
// the bits a scalar loop would. This file is compiled with -ffp-contract=off: a
// fused multiply-add on some CPUs and not others would break that.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "runtime/kernels/ops.hpp"

namespace tandem::rt {

namespace {

// exp(x) within 2 ulp for x in [kLo, kHi] (Cody–Waite reduction by ln 2 and Cephes'
// degree-6 polynomial); 0 below kLo (where exp would be subnormal), exp(88) ≈
// 1.7e38 above kHi, NaN for NaN.
constexpr float kLo = -87.3365447505531f;   // ln of the smallest normal float
constexpr float kHi = 88.0f;  // below 127.5 · ln 2, so the scale 2^n stays a normal float
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kRound = 12582912.0f;        // 1.5 · 2^23: adding it rounds to an integer
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;

inline float ExpF(float x) {
  const bool underflow = x < kLo;
  x = x > kHi ? kHi : x;  // comparisons false for NaN, so NaN stays NaN
  x = x < kLo ? kLo : x;
  const float n = (x * kLog2e + kRound) - kRound;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) * (1 << 23);
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return underflow ? 0.0f : p * scale;
}

}  // namespace

void SwiGlu(float* gate, const float* up, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + ExpF(-g)) * up[i];
  }
}

void Softmax(float* x, std::int64_t n) {
  if (n <= 0) return;
  float max = x[0];
  for (std::int64_t i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
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
