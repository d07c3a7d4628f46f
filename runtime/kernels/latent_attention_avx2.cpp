// The AVX2 + FMA forms of attention's three small loops (attention_rows.hpp says
// what each computes). Compiled with -ffp-contract=off, as latent_attention.cpp is:
// the weighted sum and the absorbed key product round each product before adding
// it, exactly as their portable loops do, and only the scores use explicit fused
// multiply-adds, as Dot does on every CPU with FMA. So these give the same bits as
// the loops they replace; they are faster because they keep their sums in
// registers and work on four cache entries (or 64 outputs) at a time.
#if !defined(__clang__)
#pragma GCC target("avx2,fma")
#endif

#include <cstdint>

#include <immintrin.h>

#include "runtime/kernels/attention_rows.hpp"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#endif

namespace tandem::rt::kernels {

namespace {

// Dot's lanes (0–7 in a, 8–15 in b) over n values, its tail (fused, into lanes 0, 1,
// …) and its tree: l + 8, then + 4, + 2, + 1.
inline float FinishDot(__m256 a, __m256 b, const float* w, const float* x, std::int64_t from, std::int64_t n) {
  if (from == n) {
    const __m256 s8 = _mm256_add_ps(a, b);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
  }
  alignas(32) float lanes[16];
  _mm256_store_ps(lanes, a);
  _mm256_store_ps(lanes + 8, b);
  for (std::int64_t i = from, l = 0; i < n; ++i, ++l) lanes[l] = __builtin_fmaf(w[i], x[i], lanes[l]);
  for (int width = 8; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0];
}

// Dot(q, entry_j, n) for E entries `stride` floats apart: E independent pairs of
// accumulator chains instead of one.
template <int E>
inline void Dots(const float* q, const float* entry, std::int64_t stride, std::int64_t n, float* out) {
  __m256 a[E], b[E];
  for (int j = 0; j < E; ++j) a[j] = b[j] = _mm256_setzero_ps();
  const std::int64_t full = n - n % 16;
  for (std::int64_t i = 0; i < full; i += 16) {
    const __m256 qa = _mm256_loadu_ps(q + i), qb = _mm256_loadu_ps(q + i + 8);
    for (int j = 0; j < E; ++j) {
      a[j] = _mm256_fmadd_ps(_mm256_loadu_ps(entry + j * stride + i), qa, a[j]);
      b[j] = _mm256_fmadd_ps(_mm256_loadu_ps(entry + j * stride + i + 8), qb, b[j]);
    }
  }
  for (int j = 0; j < E; ++j) out[j] = FinishDot(a[j], b[j], entry + j * stride, q, full, n);
}

template <int E>
inline void Scores(const float* q_latent, const float* q_rope, const float* entry, std::int64_t stride, std::int64_t latent,
                   std::int64_t rope, float scale, float* scores) {
  float l[E], r[E];
  Dots<E>(q_latent, entry, stride, latent, l);
  Dots<E>(q_rope, entry + latent, stride, rope, r);
  for (int j = 0; j < E; ++j) scores[j] = (l[j] + r[j]) * scale;
}

}  // namespace

void LatentScoresAvx2(const float* q_latent, const float* q_rope, const float* cache, std::int64_t stride, std::int64_t len,
                      std::int64_t latent, std::int64_t rope, float scale, float* scores) {
  std::int64_t t = 0;
  for (; t + 4 <= len; t += 4) Scores<4>(q_latent, q_rope, cache + t * stride, stride, latent, rope, scale, scores + t);
  for (; t < len; ++t) Scores<1>(q_latent, q_rope, cache + t * stride, stride, latent, rope, scale, scores + t);
}

void AddWeightedSumAvx2(const float* p, const float* cache, std::int64_t stride, std::int64_t len, std::int64_t latent, float* out) {
  std::int64_t c = 0;
  for (; c + 64 <= latent; c += 64) {
    __m256 acc[8];
    for (int j = 0; j < 8; ++j) acc[j] = _mm256_loadu_ps(out + c + 8 * j);
    for (std::int64_t t = 0; t < len; ++t) {
      const __m256 pt = _mm256_set1_ps(p[t]);
      const float* e = cache + t * stride + c;
      for (int j = 0; j < 8; ++j) acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(pt, _mm256_loadu_ps(e + 8 * j)));
    }
    for (int j = 0; j < 8; ++j) _mm256_storeu_ps(out + c + 8 * j, acc[j]);
  }
  for (; c + 8 <= latent; c += 8) {
    __m256 acc = _mm256_loadu_ps(out + c);
    for (std::int64_t t = 0; t < len; ++t)
      acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(p[t]), _mm256_loadu_ps(cache + t * stride + c)));
    _mm256_storeu_ps(out + c, acc);
  }
  for (; c < latent; ++c) {
    float acc = out[c];
    for (std::int64_t t = 0; t < len; ++t) acc += p[t] * cache[t * stride + c];
    out[c] = acc;
  }
}

namespace {

struct Bf16Cols {
  using T = std::uint16_t;
  static __m256 Load(const T* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  }
  static float Scalar(const T* p) {
    const std::uint32_t bits = static_cast<std::uint32_t>(*p) << 16;
    float f;
    __builtin_memcpy(&f, &bits, sizeof f);
    return f;
  }
};
struct F32Cols {
  using T = float;
  static __m256 Load(const T* p) { return _mm256_loadu_ps(p); }
  static float Scalar(const T* p) { return *p; }
};

template <class F>
void Transposed(const typename F::T* w, std::int64_t rows, std::int64_t cols, const float* x, std::int64_t batch, float* y,
                std::int64_t begin, std::int64_t end) {
  for (std::int64_t b = 0; b < batch; ++b) {
    const float* xb = x + b * rows;
    float* out = y + b * cols;
    std::int64_t c = begin;
    for (; c + 64 <= end; c += 64) {
      __m256 acc[8];
      for (auto& a : acc) a = _mm256_setzero_ps();
      for (std::int64_t r = 0; r < rows; ++r) {
        const __m256 xr = _mm256_set1_ps(xb[r]);
        const typename F::T* wr = w + r * cols + c;
        for (int j = 0; j < 8; ++j) acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(F::Load(wr + 8 * j), xr));
      }
      for (int j = 0; j < 8; ++j) _mm256_storeu_ps(out + c + 8 * j, acc[j]);
    }
    for (; c + 8 <= end; c += 8) {
      __m256 acc = _mm256_setzero_ps();
      for (std::int64_t r = 0; r < rows; ++r) acc = _mm256_add_ps(acc, _mm256_mul_ps(F::Load(w + r * cols + c), _mm256_set1_ps(xb[r])));
      _mm256_storeu_ps(out + c, acc);
    }
    for (; c < end; ++c) {
      float acc = 0.0f;
      for (std::int64_t r = 0; r < rows; ++r) acc += F::Scalar(w + r * cols + c) * xb[r];
      out[c] = acc;
    }
  }
}

}  // namespace

void TransposedBf16Avx2(const std::uint16_t* w, std::int64_t rows, std::int64_t cols, const float* x, std::int64_t batch, float* y,
                        std::int64_t begin, std::int64_t end) {
  Transposed<Bf16Cols>(w, rows, cols, x, batch, y, begin, end);
}

void TransposedF32Avx2(const float* w, std::int64_t rows, std::int64_t cols, const float* x, std::int64_t batch, float* y,
                       std::int64_t begin, std::int64_t end) {
  Transposed<F32Cols>(w, rows, cols, x, batch, y, begin, end);
}

}  // namespace tandem::rt::kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
