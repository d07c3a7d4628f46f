#pragma once

// The canonical reduction of sixteen fp32 lanes in one register (lanes l + 8, then
// + 4, + 2, + 1, as ReduceLanes), for the AVX-512 kernel files (private to
// runtime/kernels; internal linkage). Include it after the file's target pragmas:
// clang gives `pragma clang attribute` targets only to what follows it.
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

}  // namespace
}  // namespace tandem::rt::kernels
