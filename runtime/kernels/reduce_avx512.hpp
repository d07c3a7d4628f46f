#pragma once

// The canonical reduction of sixteen fp32 lanes in one register (lanes l + 8, then
// + 4, + 2, + 1, as ReduceLanes), for the AVX-512 kernel files (private to
// runtime/kernels; internal linkage). Include it after the file's target pragmas:
// clang gives `pragma clang attribute` targets only to what follows it.
#include <cstdint>

#include <immintrin.h>

namespace tandem::rt::kernels {
namespace {

inline float ReduceAvx512(__m512 acc) {
  const __m256 s8 =
      _mm256_add_ps(_mm512_castps512_ps256(acc), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1)));  // lanes 0–7
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));                                     // 0–3
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));                                                                              // 0–1
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}

// Sixteen registers' sums at once, each by ReduceAvx512's tree (additions commute bit
// for bit, so only the pairs matter): lane 4j + k of the result is a[4k + j]'s sum.
// 45 instructions for sixteen sums instead of 8 for each.
inline __m512 ReduceSixteen(const __m512* a) {
  __m512 z[8];
  for (int i = 0; i < 8; ++i) {
    // Quarters [a0 a1 b0 b1] + [a2 a3 b2 b3]: lane l of each half + lane l + 8.
    z[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44), _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
  }
  __m512 w[4];
  for (int i = 0; i < 4; ++i) {
    // Quarters [z0.0 z0.2 z1.0 z1.2] + [z0.1 z0.3 z1.1 z1.3]: + 4.
    w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(z[2 * i], z[2 * i + 1], 0x88), _mm512_shuffle_f32x4(z[2 * i], z[2 * i + 1], 0xDD));
  }
  __m512 v[2];
  for (int i = 0; i < 2; ++i) {
    // In each quarter [w0.0 w0.1 w1.0 w1.1] + [w0.2 w0.3 w1.2 w1.3]: + 2.
    v[i] = _mm512_add_ps(_mm512_shuffle_ps(w[2 * i], w[2 * i + 1], 0x44), _mm512_shuffle_ps(w[2 * i], w[2 * i + 1], 0xEE));
  }
  // In each quarter [v0.0 v0.2 v1.0 v1.2] + [v0.1 v0.3 v1.1 v1.3]: + 1.
  return _mm512_add_ps(_mm512_shuffle_ps(v[0], v[1], 0x88), _mm512_shuffle_ps(v[0], v[1], 0xDD));
}

// Quarters q < N of v (lanes 4q to 4q + 3) to p + q · stride. (The quarter's index must
// be a constant for clang, so the stores are written out.)
template <int N = 4>
inline void StoreQuarters(__m512 v, float* p, std::int64_t stride) {
  _mm_storeu_ps(p, _mm512_castps512_ps128(v));
  if constexpr (N > 1) _mm_storeu_ps(p + stride, _mm512_extractf32x4_ps(v, 1));
  if constexpr (N > 2) _mm_storeu_ps(p + 2 * stride, _mm512_extractf32x4_ps(v, 2));
  if constexpr (N > 3) _mm_storeu_ps(p + 3 * stride, _mm512_extractf32x4_ps(v, 3));
}

}  // namespace
}  // namespace tandem::rt::kernels
