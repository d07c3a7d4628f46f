#include "runtime/numeric/microscaling.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "runtime/numeric/dtype.hpp"

namespace tandem::rt {

namespace {

constexpr float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

float MaxAbs(const float* x, std::size_t n) {
  float m = 0.0f;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

float Bf16(float v) { return Bf16ToF32(F32ToBf16(v)); }

// x ← bf16(e2m1(clamp(x / s, ±6)) · s) over one block.
void RoundTripE2M1Block(float* x, std::size_t n, float s) {
  for (std::size_t i = 0; i < n; ++i) x[i] = Bf16(E2M1ToF32(F32ToE2M1(std::clamp(x[i] / s, -6.0f, 6.0f))) * s);
}

}  // namespace

float E8M0ToF32(std::uint8_t bits) {
  if (bits == 0xff) return std::numeric_limits<float>::quiet_NaN();
  if (bits == 0) return std::bit_cast<float>(std::uint32_t{1} << 22);  // 2^-127, a subnormal
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 23);
}

float E2M1ToF32(std::uint8_t nibble) {
  const float magnitude = kE2M1[nibble & 7u];
  return (nibble & 8u) != 0 ? -magnitude : magnitude;
}

std::uint8_t F32ToE2M1(float value) {
  const std::uint8_t sign = std::signbit(value) ? 8u : 0u;
  const float a = std::fabs(value);
  if (std::isnan(a)) return static_cast<std::uint8_t>(sign | 7u);
  // The code is the number of midpoints between neighbouring values (0.25, 0.75, 1.25, 1.75,
  // 2.5, 3.5, 5) below `a`; a midpoint itself goes to the even code, so it counts when the
  // code below it is odd (≥) and not when it is even (>). Branch-free: activations are
  // rounded to E2M1 by the thousand a step (the indexer's queries and keys).
  const int code = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
  return static_cast<std::uint8_t>(sign | code);
}

float RoundScalePow2(float amax, float inv_max) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(amax * inv_max);
  const std::uint32_t exponent = (bits >> 23) & 0xffu;
  const std::uint32_t up = (bits & 0x7fffffu) != 0 ? 1u : 0u;
  return std::bit_cast<float>((exponent + up) << 23);
}

void RoundTripFp8(float* x, std::size_t n) {
  constexpr std::size_t kBlock = 32;
  for (std::size_t b = 0; b < n; b += kBlock) {
    float* v = x + b;
    const float s = RoundScalePow2(std::max(MaxAbs(v, kBlock), 1e-4f), 1.0f / 448.0f);
    for (std::size_t i = 0; i < kBlock; ++i) v[i] = Bf16(F8E4M3ToF32(F32ToF8E4M3(std::clamp(v[i] / s, -448.0f, 448.0f))) * s);
  }
}

void RoundTripFp4Pow2(float* x, std::size_t n) {
  constexpr std::size_t kBlock = 32;
  const float floor = 6.0f * std::ldexp(1.0f, -126);
  for (std::size_t b = 0; b < n; b += kBlock) {
    RoundTripE2M1Block(x + b, kBlock, RoundScalePow2(std::max(MaxAbs(x + b, kBlock), floor), 1.0f / 6.0f));
  }
}

void RoundTripFp4E4M3(float* x, std::size_t n) {
  constexpr std::size_t kBlock = 16;
  const float floor = 6.0f * std::ldexp(1.0f, -9);
  for (std::size_t b = 0; b < n; b += kBlock) {
    const float s = F8E4M3ToF32(F32ToF8E4M3(std::max(MaxAbs(x + b, kBlock), floor) / 6.0f));
    RoundTripE2M1Block(x + b, kBlock, s);
  }
}

void DequantizeFp4Row(const std::uint8_t* packed, const std::uint8_t* scales, std::int64_t cols, float* out) {
  for (std::int64_t c = 0; c < cols; ++c) {
    const std::uint8_t byte = packed[c / 2];
    const std::uint8_t nibble = (c % 2 == 0) ? (byte & 0x0fu) : static_cast<std::uint8_t>(byte >> 4);
    out[c] = E2M1ToF32(nibble) * E8M0ToF32(scales[c / 32]);
  }
}

}  // namespace tandem::rt
