// The AVX2 kernels for group-quantized weights (see quantized_rows.hpp). Compiled
// for that target through the pragma; only reached when DetectedIsa() allows. No
// standard-library templates here (see matmul_avx2.cpp).
#if !defined(__clang__)
#pragma GCC target("avx2,fma,f16c")
#endif

#include <immintrin.h>

#include "runtime/kernels/quantized_rows.hpp"

// Clang applies `#pragma GCC target` to plain functions only, not to template
// instantiations: give every function from here on the target instead.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#endif

#include "runtime/kernels/quantized_simd.hpp"

namespace tandem::rt::kernels {

void QuantizeInputAvx2(const float* x, std::int64_t batch, std::int64_t cols, std::int8_t* q, float* d) {
  const std::int64_t blocks = cols / kInputBlock;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t k = 0; k < blocks; ++k) {
      const float* in = x + b * cols + k * kInputBlock;
      __m256 v[4];
      for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(in + 8 * i);
      __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                               _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1)));
      // Below the smallest normal float, 127 / amax overflows: such a block counts as zero.
      const bool zero = !(amax >= 1.17549435e-38f);  // FLT_MIN (no <limits> here: see above)
      const float inv = zero ? 0.0f : 127.0f / amax;
      d[b * blocks + k] = zero ? 0.0f : amax / 127.0f;
      const __m256 scale = _mm256_set1_ps(inv);
      __m256i r[4];
      for (int i = 0; i < 4; ++i) r[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], scale));  // round half to even
      // |x · inv| <= 127 (up to rounding, which still rounds to 127): no clamping needed.
      const __m256i packed = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3])),
                                                         _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * cols + k * kInputBlock), packed);
    }
  }
}

void RowsInt8Avx2(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                  std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end) {
  QuantizedTileRows<false, false>(values, scales, cols, group, inputs, batch, y, y_stride, begin, end);
}

void RowsInt4Avx2(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                  std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end) {
  QuantizedTileRows<false, true>(values, scales, cols, group, inputs, batch, y, y_stride, begin, end);
}

}  // namespace tandem::rt::kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
