// The AVX + FMA (+ F16C) row kernels, for CPUs without AVX2 (see dense_rows.hpp for
// the order they share): bf16 by hand, the other formats as plain_rows.hpp's loops
// compiled for this target. Compiled for it only through the pragma; nothing here may
// be reached unless DetectedIsa() says the CPU has it. No standard-library templates
// in this file (see matmul_avx2.cpp).
#if !defined(__clang__)
#pragma GCC target("avx,fma,f16c")
#endif

#include <cstdint>

#include <immintrin.h>

#include "runtime/kernels/dense_rows.hpp"
#include "runtime/kernels/plain_rows.hpp"

// Clang applies `#pragma GCC target` to plain functions only, not to template
// instantiations: give every function from here on the target instead.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx,fma,f16c"))), apply_to = function)
#endif

namespace tandem::rt::kernels {

namespace {

// bf16 · fp32 dot for AVX+FMA (no AVX2 needed): widen bf16 by interleaving zero
// halfwords below each value, multiply-add into two 8-lane accumulators (lanes
// 0–7 and 8–15 of Dot's sixteen), then the same tail and reduction tree as Dot.
float DotBf16Avx(const std::uint16_t* w, const float* x, std::int64_t n) {
  const __m128i zero = _mm_setzero_si128();
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + kPlainLanes <= n; i += kPlainLanes) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i + 8));
    const __m256 wa =
        _mm256_castsi256_ps(_mm256_insertf128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi16(zero, a)), _mm_unpackhi_epi16(zero, a), 1));
    const __m256 wb =
        _mm256_castsi256_ps(_mm256_insertf128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi16(zero, b)), _mm_unpackhi_epi16(zero, b), 1));
    acc0 = _mm256_fmadd_ps(wa, _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(wb, _mm256_loadu_ps(x + i + 8), acc1);
  }
  alignas(32) float acc[kPlainLanes];
  _mm256_store_ps(acc, acc0);
  _mm256_store_ps(acc + 8, acc1);
  for (int l = 0; i < n; ++i, ++l) acc[l] += Load(w, i) * x[i];
  for (int width = kPlainLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

// DotBf16Avx for four input rows at once: each chunk of weights is widened once and
// used four times. Every row keeps its own two accumulators and the exact operation
// sequence of DotBf16Avx, so its result is bit-identical to computing it alone.
void DotBf16Avx4Rows(const std::uint16_t* w, const float* x, std::int64_t x_stride, std::int64_t n, float* out, std::int64_t out_stride) {
  const __m128i zero = _mm_setzero_si128();
  __m256 acc0[4], acc1[4];
  for (int r = 0; r < 4; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + kPlainLanes <= n; i += kPlainLanes) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i + 8));
    const __m256 wa =
        _mm256_castsi256_ps(_mm256_insertf128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi16(zero, a)), _mm_unpackhi_epi16(zero, a), 1));
    const __m256 wb =
        _mm256_castsi256_ps(_mm256_insertf128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi16(zero, b)), _mm_unpackhi_epi16(zero, b), 1));
    for (int r = 0; r < 4; ++r) {
      const float* xr = x + r * x_stride + i;
      acc0[r] = _mm256_fmadd_ps(wa, _mm256_loadu_ps(xr), acc0[r]);
      acc1[r] = _mm256_fmadd_ps(wb, _mm256_loadu_ps(xr + 8), acc1[r]);
    }
  }
  for (int r = 0; r < 4; ++r) {
    alignas(32) float acc[kPlainLanes];
    _mm256_store_ps(acc, acc0[r]);
    _mm256_store_ps(acc + 8, acc1[r]);
    const float* xr = x + r * x_stride;
    std::int64_t j = i;
    for (int l = 0; j < n; ++j, ++l) acc[l] += Load(w, j) * xr[j];
    for (int width = kPlainLanes / 2; width > 0; width /= 2) {
      for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
    }
    out[r * out_stride] = acc[0];
  }
}

// DotF64 for AVX+FMA: the same sixteen double lanes as four 4-wide accumulators.
double DotBf16F64Avx(const std::uint16_t* w, const float* x, std::int64_t n) {
  const __m128i zero = _mm_setzero_si128();
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  std::int64_t i = 0;
  for (; i + kPlainLanes <= n; i += kPlainLanes) {
    for (int half = 0; half < 2; ++half) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i + 8 * half));
      const __m128 lo = _mm_castsi128_ps(_mm_unpacklo_epi16(zero, v));  // w[0..3]
      const __m128 hi = _mm_castsi128_ps(_mm_unpackhi_epi16(zero, v));  // w[4..7]
      const __m128 xlo = _mm_loadu_ps(x + i + 8 * half);
      const __m128 xhi = _mm_loadu_ps(x + i + 8 * half + 4);
      acc[2 * half] = _mm256_fmadd_pd(_mm256_cvtps_pd(lo), _mm256_cvtps_pd(xlo), acc[2 * half]);
      acc[2 * half + 1] = _mm256_fmadd_pd(_mm256_cvtps_pd(hi), _mm256_cvtps_pd(xhi), acc[2 * half + 1]);
    }
  }
  alignas(32) double lanes[kPlainLanes];
  for (int a = 0; a < 4; ++a) _mm256_store_pd(lanes + 4 * a, acc[a]);
  for (int l = 0; i < n; ++i, ++l) lanes[l] += static_cast<double>(Load(w, i)) * static_cast<double>(x[i]);
  for (int width = kPlainLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0];
}

// DotBf16F64Avx for two input rows at once (the same per-row operation sequence).
void DotBf16F64Avx2Rows(const std::uint16_t* w, const float* x, std::int64_t x_stride, std::int64_t n, double* out,
                        std::int64_t out_stride) {
  const __m128i zero = _mm_setzero_si128();
  __m256d acc[2][4];
  for (auto& row : acc) {
    for (auto& a : row) a = _mm256_setzero_pd();
  }
  std::int64_t i = 0;
  for (; i + kPlainLanes <= n; i += kPlainLanes) {
    for (int half = 0; half < 2; ++half) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i + 8 * half));
      const __m256d lo = _mm256_cvtps_pd(_mm_castsi128_ps(_mm_unpacklo_epi16(zero, v)));
      const __m256d hi = _mm256_cvtps_pd(_mm_castsi128_ps(_mm_unpackhi_epi16(zero, v)));
      for (int r = 0; r < 2; ++r) {
        const float* xr = x + r * x_stride + i + 8 * half;
        acc[r][2 * half] = _mm256_fmadd_pd(lo, _mm256_cvtps_pd(_mm_loadu_ps(xr)), acc[r][2 * half]);
        acc[r][2 * half + 1] = _mm256_fmadd_pd(hi, _mm256_cvtps_pd(_mm_loadu_ps(xr + 4)), acc[r][2 * half + 1]);
      }
    }
  }
  for (int r = 0; r < 2; ++r) {
    alignas(32) double lanes[kPlainLanes];
    for (int a = 0; a < 4; ++a) _mm256_store_pd(lanes + 4 * a, acc[r][a]);
    const float* xr = x + r * x_stride;
    std::int64_t j = i;
    for (int l = 0; j < n; ++j, ++l) lanes[l] += static_cast<double>(Load(w, j)) * static_cast<double>(xr[j]);
    for (int width = kPlainLanes / 2; width > 0; width /= 2) {
      for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
    }
    out[r * out_stride] = lanes[0];
  }
}

}  // namespace

void RowsBf16AvxFma(const std::uint16_t* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t rows,
                    std::int64_t begin, std::int64_t end) {
  for (std::int64_t o = begin; o < end; ++o) {
    std::int64_t b = 0;
    for (; b + 4 <= batch; b += 4) DotBf16Avx4Rows(w + o * cols, x + b * cols, cols, cols, y + b * rows + o, rows);
    for (; b < batch; ++b) y[b * rows + o] = DotBf16Avx(w + o * cols, x + b * cols, cols);
  }
}

void RowsBf16F64AvxFma(const std::uint16_t* w, std::int64_t cols, const float* x, std::int64_t batch, double* y, std::int64_t rows,
                       std::int64_t begin, std::int64_t end) {
  for (std::int64_t o = begin; o < end; ++o) {
    std::int64_t b = 0;
    for (; b + 2 <= batch; b += 2) DotBf16F64Avx2Rows(w + o * cols, x + b * cols, cols, cols, y + b * rows + o, rows);
    for (; b < batch; ++b) y[b * rows + o] = DotBf16F64Avx(w + o * cols, x + b * cols, cols);
  }
}

void RowsF32AvxFma(const float* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                   std::int64_t begin, std::int64_t end) {
  PlainRows(w, cols, x, batch, y, y_stride, begin, end);
}

void RowsFp8AvxFma(const std::uint8_t* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                   std::int64_t begin, std::int64_t end) {
  PlainRows(w, cols, x, batch, y, y_stride, begin, end);
}

void RowsF32F64AvxFma(const float* w, std::int64_t cols, const float* x, std::int64_t batch, double* y, std::int64_t y_stride,
                      std::int64_t begin, std::int64_t end) {
  PlainRowsF64(w, cols, x, batch, y, y_stride, begin, end);
}

void RowsFp8F64AvxFma(const std::uint8_t* w, std::int64_t cols, const float* x, std::int64_t batch, double* y, std::int64_t y_stride,
                      std::int64_t begin, std::int64_t end) {
  PlainRowsF64(w, cols, x, batch, y, y_stride, begin, end);
}

float DotAvxFma(const float* a, const float* b, std::int64_t n) { return PlainDot(a, b, n); }

}  // namespace tandem::rt::kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
