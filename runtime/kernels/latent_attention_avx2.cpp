// The AVX2 + FMA forms of attention's small loops (attention_rows.hpp says what each
// computes). Compiled with -ffp-contract=off, as latent_attention.cpp is: the
// absorbed key product (bf16, fp32 or group-quantized) rounds each product before
// adding it, exactly as its portable loop does, and the scores and the weighted sum
// use explicit fused multiply-adds, as Dot and the portable weighted sum (std::fma) do.
// So these give the same bits as the loops they replace; they are faster because they
// keep their sums in registers and work on four cache entries (or 32–64 outputs) at
// a time.
#if !defined(__clang__)
#pragma GCC target("avx2,fma")
#endif

#include <cstdint>

#include <immintrin.h>

#include "runtime/kernels/attention_rows.hpp"
#include "runtime/kernels/prefetch.hpp"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#endif

// After the clang target: its inline functions are AVX2 code.
#include "runtime/kernels/transposed_quantized.hpp"

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

}  // namespace

void LatentScoresAvx2(const float* q, const float* cache, std::int64_t stride, std::int64_t len, std::int64_t dims, float scale,
                      float* scores) {
  float d[4];
  std::int64_t t = 0;
  for (; t + 4 <= len; t += 4) {
    Dots<4>(q, cache + t * stride, stride, dims, d);
    for (int j = 0; j < 4; ++j) scores[t + j] = d[j] * scale;
  }
  for (; t < len; ++t) {
    Dots<1>(q, cache + t * stride, stride, dims, d);
    scores[t] = d[0] * scale;
  }
}

void AddWeightedSumAvx2(const float* p, const float* cache, std::int64_t stride, std::int64_t len, std::int64_t latent, float* out) {
  std::int64_t c = 0;
  for (; c + 64 <= latent; c += 64) {
    __m256 acc[8];
    for (int j = 0; j < 8; ++j) acc[j] = _mm256_loadu_ps(out + c + 8 * j);
    for (std::int64_t t = 0; t < len; ++t) {
      const __m256 pt = _mm256_set1_ps(p[t]);
      const float* e = cache + t * stride + c;
      for (int j = 0; j < 8; ++j) acc[j] = _mm256_fmadd_ps(pt, _mm256_loadu_ps(e + 8 * j), acc[j]);
    }
    for (int j = 0; j < 8; ++j) _mm256_storeu_ps(out + c + 8 * j, acc[j]);
  }
  for (; c + 8 <= latent; c += 8) {
    __m256 acc = _mm256_loadu_ps(out + c);
    for (std::int64_t t = 0; t < len; ++t) acc = _mm256_fmadd_ps(_mm256_set1_ps(p[t]), _mm256_loadu_ps(cache + t * stride + c), acc);
    _mm256_storeu_ps(out + c, acc);
  }
  for (; c < latent; ++c) {
    float acc = out[c];
    for (std::int64_t t = 0; t < len; ++t) acc = __builtin_fmaf(p[t], cache[t * stride + c], acc);
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

// The transposed products below ask for every line of their columns into L2 up front
// (PrefetchRange): they do too little work between their loads for the core to keep
// many lines in flight, and prefetches into L1 queue behind its few fill buffers;
// L2's are many (BM_AttentionHeadProducts: the key products read from memory ~1.8x
// as fast).
template <class F>
void Transposed(const typename F::T* w, std::int64_t rows, std::int64_t cols, const float* x, std::int64_t batch, float* y,
                std::int64_t begin, std::int64_t end) {
  const auto bytes = static_cast<std::int64_t>(sizeof(typename F::T));
  if (begin == 0 && end == cols) {
    PrefetchRange(reinterpret_cast<const char*>(w), rows * cols * bytes);
  } else {
    for (std::int64_t r = 0; r < rows; ++r) PrefetchRange(reinterpret_cast<const char*>(w + r * cols + begin), (end - begin) * bytes);
  }
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

namespace {

// 32 signed bytes (columns in order) as 4 × 8 floats.
inline void ToFloats(__m128i lo, __m128i hi, __m256 f[4]) {
  f[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
  f[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)));
  f[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
  f[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)));
}

// A row's levels of an int8 or int4 block (transposed_quantized.hpp) as floats.
inline void Int8Levels(__m256i row, __m256 f[4]) {
  __m128i lo, hi;
  Int8Columns(row, lo, hi);
  ToFloats(lo, hi, f);
}
inline void Int4Levels(__m128i row, __m256 f[4]) {
  __m128i lo, hi;
  Int4Columns(row, lo, hi);
  ToFloats(lo, hi, f);
}

inline void AddRow(const __m256 f[4], float coef, __m256 acc[4]) {
  const __m256 c = _mm256_set1_ps(coef);
  for (int k = 0; k < 4; ++k) acc[k] = _mm256_add_ps(acc[k], _mm256_mul_ps(f[k], c));
}

// Columns [32·block, 32·block + 32) of NB input rows (`x_stride` floats apart; their
// outputs `out_stride` apart), rows ascending. The levels are transposed and widened
// once for the NB inputs, then each input's products added as it would be alone.
template <int NB>
void TransposedQuantizedBlock(const QuantizedTiles& w, const float* xb, std::int64_t x_stride, std::int64_t block, float* out,
                              std::int64_t out_stride) {
  const TileBytes bytes(w.int8, w.cols);
  const std::int64_t groups = w.cols / w.group, g = block * kBlock / w.group;
  __m256 acc[NB][4];
  for (auto& input : acc) {
    for (auto& a : input) a = _mm256_setzero_ps();
  }
  for (std::int64_t first = 0; first < w.rows; first += kTile) {
    const std::uint8_t* base = w.values + first / kTile * bytes.tile + block * bytes.block;
    const float* scale = w.scales + (first / kTile * groups + g) * kTile;
    const std::int64_t live = w.rows - first < kTile ? w.rows - first : kTile;
    float coef[NB][kTile];
    for (int b = 0; b < NB; ++b) {
      for (std::int64_t i = 0; i < live; ++i) coef[b][i] = scale[i] * xb[b * x_stride + first + i];
    }
    for (std::int64_t half = 0; half * 8 < live; ++half) {
      const std::int64_t n = live - half * 8 < 8 ? live - half * 8 : 8;
      __m256i v[8];
      __m256 f[4];
      if (w.int8) {
        for (int j = 0; j < 8; ++j) v[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + j * kChunk + half * 32));
        TransposeDwords8x8(v);
        for (std::int64_t i = 0; i < n; ++i) {
          Int8Levels(v[i], f);
          for (int b = 0; b < NB; ++b) AddRow(f, coef[b][half * 8 + i], acc[b]);
        }
      } else {
        for (int j = 0; j < 4; ++j) v[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + j * kChunk + half * 32));
        TransposeDwords8x4(v);
        for (std::int64_t i = 0; i < n; ++i) {
          Int4Levels(i < 4 ? _mm256_castsi256_si128(v[i]) : _mm256_extracti128_si256(v[i - 4], 1), f);
          for (int b = 0; b < NB; ++b) AddRow(f, coef[b][half * 8 + i], acc[b]);
        }
      }
    }
  }
  for (int b = 0; b < NB; ++b) {
    for (int k = 0; k < 4; ++k) _mm256_storeu_ps(out + b * out_stride + 8 * k, acc[b][k]);
  }
}

}  // namespace

void TransposedQuantizedBlocksAvx2(const QuantizedTiles& w, const float* x, std::int64_t batch, float* y, std::int64_t first_block,
                                   std::int64_t last_block) {
  // Every tile's bytes of these blocks into L2 up front (Transposed above says why).
  const TileBytes bytes(w.int8, w.cols);
  const std::int64_t tiles = (w.rows + kTile - 1) / kTile;
  for (std::int64_t t = 0; t < tiles; ++t) {
    PrefetchRange(reinterpret_cast<const char*>(w.values + t * bytes.tile + first_block * bytes.block),
                  (last_block - first_block) * bytes.block);
  }
  PrefetchRange(reinterpret_cast<const char*>(w.scales), tiles * (w.cols / w.group) * kTile * static_cast<std::int64_t>(sizeof(float)));
  // Inputs in pairs (a prompt chunk's or a batch's rows): each block's levels widened
  // once for two. (Four would spill AVX2's sixteen registers.)
  std::int64_t b = 0;
  for (; b + 2 <= batch; b += 2) {
    for (std::int64_t block = first_block; block < last_block; ++block)
      TransposedQuantizedBlock<2>(w, x + b * w.rows, w.rows, block, y + b * w.cols + block * kBlock, w.cols);
  }
  for (; b < batch; ++b) {
    for (std::int64_t block = first_block; block < last_block; ++block)
      TransposedQuantizedBlock<1>(w, x + b * w.rows, w.rows, block, y + b * w.cols + block * kBlock, w.cols);
  }
}

}  // namespace tandem::rt::kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
