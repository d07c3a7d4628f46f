#pragma once

// Device helpers shared by the kernels: widening 8 weights at a time and the
// fixed-order warp reduction every dot product ends with.

#include <cstdint>

namespace tandem::rt::cuda {

constexpr int kWarp = 32;

__device__ __forceinline__ float Bf16ToFloat(std::uint16_t bits) { return __uint_as_float(static_cast<unsigned>(bits) << 16); }

// 8 consecutive weights (16-byte aligned for bf16, 32-byte for fp32) as floats.
__device__ __forceinline__ void Load8(const std::uint16_t* p, float out[8]) {
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(words[i] << 16);
    out[2 * i + 1] = __uint_as_float(words[i] & 0xFFFF0000u);
  }
}
__device__ __forceinline__ void Load8(const float* p, float out[8]) {
  const float4 a = *reinterpret_cast<const float4*>(p);
  const float4 b = *reinterpret_cast<const float4*>(p + 4);
  out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w, out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
}

__device__ __forceinline__ float Load1(const std::uint16_t* p) { return Bf16ToFloat(*p); }
__device__ __forceinline__ float Load1(const float* p) { return *p; }

// The sum of one value per lane, the same butterfly for every call (all lanes get it).
__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, offset);
  return v;
}

// out[r][j] = Σ_c w[r][c] · x[j][c] for kRows weight rows and up to kTile input
// vectors (x[j] null: skipped). The warp's lanes take 8-value chunks (Vec) or single
// values, c ascending per lane, then WarpSum. Each weight row is read once for all
// inputs and each input chunk once for all rows (registers, not L1, carry the reuse).
// Every (r, j) sum runs in the same order whatever the other rows and inputs are:
// batch invariance.
template <int kRows, int kTile, bool Vec, typename T>
__device__ __forceinline__ void WarpDots(const T* const w[kRows], std::int64_t n, const float* const x[kTile], int lane,
                                         float out[kRows][kTile]) {
  float acc[kRows][kTile];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int j = 0; j < kTile; ++j) acc[r][j] = 0.0f;
  }
  if constexpr (Vec) {
#pragma unroll 2
    for (std::int64_t c = static_cast<std::int64_t>(lane) * 8; c < n; c += kWarp * 8) {
      float wv[kRows][8];
#pragma unroll
      for (int r = 0; r < kRows; ++r) Load8(w[r] + c, wv[r]);
#pragma unroll
      for (int j = 0; j < kTile; ++j) {
        if (x[j] == nullptr) continue;
        float xv[8];
        Load8(x[j] + c, xv);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[r][j] += wv[r][i] * xv[i];
        }
      }
    }
  } else {
    for (std::int64_t c = lane; c < n; c += kWarp) {
      float wv[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) wv[r] = Load1(w[r] + c);
#pragma unroll
      for (int j = 0; j < kTile; ++j) {
        if (x[j] == nullptr) continue;
        const float xv = x[j][c];
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r][j] += wv[r] * xv;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int j = 0; j < kTile; ++j) out[r][j] = WarpSum(acc[r][j]);
  }
}

}  // namespace tandem::rt::cuda
