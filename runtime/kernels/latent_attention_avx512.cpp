// The AVX-512 forms of attention's two passes over a block of cache entries for
// several query heads at once (attention_rows.hpp says what each computes). Each
// (head, entry) score is Dot's sixteen fused lanes and tree over the whole entry
// (latent and rope parts as one vector), and each weighted sum fuses every product
// into its output over t ascending, exactly as the AVX2 and portable loops do: one
// 512-bit register holds the two 256-bit halves the AVX2 form keeps apart, lane for
// lane. So these give the same bits; they are faster because a
// tile of 4 heads × 4 entries loads each query and each entry once for four products
// (the AVX2 form loads the query again for every head's pass), and the weighted sum
// loads each entry once for four heads. Also the AVX-512 forms of the absorbed key
// product (bf16 inputs in fours; a group-quantized matrix tile after tile), each
// lane doing what the AVX2 loop's lane does. Compiled with -ffp-contract=off, as the
// other attention files are. No standard-library templates in this file (see
// matmul_avx2.cpp).
#if !defined(__clang__)
#pragma GCC target("avx512f,avx512vl,avx2,fma")
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <cstdint>

#include <immintrin.h>

#include "runtime/kernels/attention_rows.hpp"
#include "runtime/kernels/prefetch.hpp"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512vl,avx2,fma"))), apply_to = function)
#endif

#include "runtime/kernels/reduce_avx512.hpp"
#include "runtime/kernels/transposed_quantized.hpp"

namespace tandem::rt::kernels {

namespace {

constexpr std::int64_t kLanes = 16;
constexpr int kHeads = 4, kEntries = 4;

inline __mmask16 Tail(std::int64_t n) { return static_cast<__mmask16>((1u << n) - 1); }

// acc[e][h] = Dot's sixteen lanes of (q_h, entry_e, n) for H heads (`qs` floats apart)
// and E entries (`stride` floats apart), its tail fused into lanes 0, 1, …; not yet
// reduced. Lanes past the tail keep their sums (mask3), so no zero product touches a -0.
template <int H, int E>
inline void DotLanes(const float* q, std::int64_t qs, const float* entry, std::int64_t stride, std::int64_t n, __m512 acc[E][H]) {
  for (int e = 0; e < E; ++e) {
    for (int h = 0; h < H; ++h) acc[e][h] = _mm512_setzero_ps();
  }
  const std::int64_t full = n - n % kLanes;
  for (std::int64_t i = 0; i < full; i += kLanes) {
    __m512 ev[E];
    for (int e = 0; e < E; ++e) ev[e] = _mm512_loadu_ps(entry + e * stride + i);
    for (int h = 0; h < H; ++h) {
      const __m512 qv = _mm512_loadu_ps(q + h * qs + i);
      for (int e = 0; e < E; ++e) acc[e][h] = _mm512_fmadd_ps(ev[e], qv, acc[e][h]);
    }
  }
  if (full < n) {
    const __mmask16 mask = Tail(n - full);
    __m512 ev[E];
    for (int e = 0; e < E; ++e) ev[e] = _mm512_maskz_loadu_ps(mask, entry + e * stride + full);
    for (int h = 0; h < H; ++h) {
      const __m512 qv = _mm512_maskz_loadu_ps(mask, q + h * qs + full);
      for (int e = 0; e < E; ++e) acc[e][h] = _mm512_mask3_fmadd_ps(ev[e], qv, acc[e][h], mask);
    }
  }
}

// out[h][e] = Dot(q_h, entry_e, n), each sum reduced by Dot's tree.
template <int H, int E>
inline void Dots(const float* q, std::int64_t qs, const float* entry, std::int64_t stride, std::int64_t n, float out[][kEntries]) {
  __m512 acc[E][H];
  DotLanes<H, E>(q, qs, entry, stride, n, acc);
  for (int h = 0; h < H; ++h) {
    for (int e = 0; e < E; ++e) out[h][e] = ReduceAvx512(acc[e][h]);
  }
}

// Dots of a whole 4 × 4 tile, its sixteen sums reduced together: lane 4h + e of the
// result is head h's score of entry e (ReduceSixteen, from acc[e][h]).
inline __m512 DotsTile(const float* q, std::int64_t qs, const float* entry, std::int64_t stride, std::int64_t n) {
  // Written out rather than through DotLanes: GCC keeps these sums in registers only
  // while no pointer to them is taken, and then reduces them in registers too.
  __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00, a13 = a00, a20 = a00, a21 = a00,
         a22 = a00, a23 = a00, a30 = a00, a31 = a00, a32 = a00, a33 = a00;
  std::int64_t i = 0;
  const auto step = [&](__mmask16 m, bool whole) {  // 16 values of each row, or the masked tail
    const auto load = [&](const float* p) { return whole ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p); };
    const auto fma = [&](__m512 x, __m512 y, __m512 acc) {
      return whole ? _mm512_fmadd_ps(x, y, acc) : _mm512_mask3_fmadd_ps(x, y, acc, m);
    };
    const __m512 e0 = load(entry + i), e1 = load(entry + stride + i), e2 = load(entry + 2 * stride + i), e3 = load(entry + 3 * stride + i);
    __m512 qv = load(q + i);
    a00 = fma(e0, qv, a00), a10 = fma(e1, qv, a10), a20 = fma(e2, qv, a20), a30 = fma(e3, qv, a30);
    qv = load(q + qs + i);
    a01 = fma(e0, qv, a01), a11 = fma(e1, qv, a11), a21 = fma(e2, qv, a21), a31 = fma(e3, qv, a31);
    qv = load(q + 2 * qs + i);
    a02 = fma(e0, qv, a02), a12 = fma(e1, qv, a12), a22 = fma(e2, qv, a22), a32 = fma(e3, qv, a32);
    qv = load(q + 3 * qs + i);
    a03 = fma(e0, qv, a03), a13 = fma(e1, qv, a13), a23 = fma(e2, qv, a23), a33 = fma(e3, qv, a33);
  };
  for (; i + kLanes <= n; i += kLanes) step(static_cast<__mmask16>(0xFFFF), true);
  if (i < n) step(Tail(n - i), false);
  const __m512 acc[16] = {a00, a01, a02, a03, a10, a11, a12, a13, a20, a21, a22, a23, a30, a31, a32, a33};  // acc[e][h], as DotLanes
  return ReduceSixteen(acc);
}

template <int H, int E>
inline void ScoresTile(const float* q, std::int64_t qs, const float* entry, std::int64_t stride, std::int64_t dims, float scale,
                       float* scores, std::int64_t ss) {
  float d[kHeads][kEntries];
  Dots<H, E>(q, qs, entry, stride, dims, d);
  for (int h = 0; h < H; ++h) {
    for (int e = 0; e < E; ++e) scores[h * ss + e] = d[h][e] * scale;
  }
}

template <int H>
inline void ScoresHeads(const float* q, std::int64_t qs, const float* cache, std::int64_t stride, std::int64_t len, std::int64_t dims,
                        float scale, float* scores, std::int64_t ss) {
  std::int64_t t = 0;
  if constexpr (H == kHeads) {
    for (; t + kEntries <= len; t += kEntries) {
      const __m512 s = _mm512_mul_ps(DotsTile(q, qs, cache + t * stride, stride, dims), _mm512_set1_ps(scale));
      StoreQuarters(s, scores + t, ss);
    }
  }
  for (; t + kEntries <= len; t += kEntries) ScoresTile<H, kEntries>(q, qs, cache + t * stride, stride, dims, scale, scores + t, ss);
  for (; t < len; ++t) ScoresTile<H, 1>(q, qs, cache + t * stride, stride, dims, scale, scores + t, ss);
}

// Columns [c, c + 16·C) of H heads' sums (the last register masked to `last`).
template <int H, int C>
inline void WeightedSumTile(const float* p, std::int64_t ps, const float* cache, std::int64_t stride, std::int64_t len, float* out,
                            std::int64_t os, __mmask16 last) {
  // Every loop over the tile's registers is unrolled, so GCC keeps the sums in
  // registers: left rolled, it wrote all sixteen back to the stack on every entry.
  __m512 acc[H][C];
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h) {
#pragma GCC unroll 4
    for (int k = 0; k < C; ++k)
      acc[h][k] = _mm512_maskz_loadu_ps(k == C - 1 ? last : static_cast<__mmask16>(0xFFFF), out + h * os + k * kLanes);
  }
  for (std::int64_t t = 0; t < len; ++t) {
    const float* e = cache + t * stride;
    __m512 ev[C];
#pragma GCC unroll 4
    for (int k = 0; k < C; ++k) ev[k] = _mm512_maskz_loadu_ps(k == C - 1 ? last : static_cast<__mmask16>(0xFFFF), e + k * kLanes);
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
      const __m512 pt = _mm512_set1_ps(p[h * ps + t]);
#pragma GCC unroll 4
      for (int k = 0; k < C; ++k) acc[h][k] = _mm512_fmadd_ps(pt, ev[k], acc[h][k]);
    }
  }
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h) {
#pragma GCC unroll 4
    for (int k = 0; k < C; ++k)
      _mm512_mask_storeu_ps(out + h * os + k * kLanes, k == C - 1 ? last : static_cast<__mmask16>(0xFFFF), acc[h][k]);
  }
}

template <int H>
inline void WeightedSumHeads(const float* p, std::int64_t ps, const float* cache, std::int64_t stride, std::int64_t len,
                             std::int64_t latent, float* out, std::int64_t os) {
  constexpr int kRegisters = 4;  // 4 heads × 4 registers of sums
  const std::int64_t registers = (latent + kLanes - 1) / kLanes;
  const std::int64_t rest = latent % kLanes;
  const __mmask16 full_mask = static_cast<__mmask16>(0xFFFF);
  std::int64_t k = 0;
  for (; k + kRegisters <= registers; k += kRegisters) {
    const __mmask16 last = k + kRegisters == registers && rest != 0 ? Tail(rest) : full_mask;
    WeightedSumTile<H, kRegisters>(p, ps, cache + k * kLanes, stride, len, out + k * kLanes, os, last);
  }
  for (; k < registers; ++k) {
    const __mmask16 last = k + 1 == registers && rest != 0 ? Tail(rest) : full_mask;
    WeightedSumTile<H, 1>(p, ps, cache + k * kLanes, stride, len, out + k * kLanes, os, last);
  }
}

}  // namespace

void LatentScoresHeadsAvx512(const float* q, std::int64_t q_stride, std::int64_t heads, const float* cache, std::int64_t stride,
                             std::int64_t len, std::int64_t dims, float scale, float* scores, std::int64_t scores_stride) {
  std::int64_t h = 0;
  for (; h + kHeads <= heads; h += kHeads) {
    ScoresHeads<kHeads>(q + h * q_stride, q_stride, cache, stride, len, dims, scale, scores + h * scores_stride, scores_stride);
  }
  const float* qh = q + h * q_stride;
  float* s = scores + h * scores_stride;
  switch (heads - h) {
    case 3:
      return ScoresHeads<3>(qh, q_stride, cache, stride, len, dims, scale, s, scores_stride);
    case 2:
      return ScoresHeads<2>(qh, q_stride, cache, stride, len, dims, scale, s, scores_stride);
    case 1:
      return ScoresHeads<1>(qh, q_stride, cache, stride, len, dims, scale, s, scores_stride);
    default:
      return;
  }
}

void AddWeightedSumHeadsAvx512(const float* p, std::int64_t p_stride, std::int64_t heads, const float* cache, std::int64_t stride,
                               std::int64_t len, std::int64_t latent, float* out, std::int64_t out_stride) {
  std::int64_t h = 0;
  for (; h + kHeads <= heads; h += kHeads) {
    WeightedSumHeads<kHeads>(p + h * p_stride, p_stride, cache, stride, len, latent, out + h * out_stride, out_stride);
  }
  const float* ph = p + h * p_stride;
  float* o = out + h * out_stride;
  switch (heads - h) {
    case 3:
      return WeightedSumHeads<3>(ph, p_stride, cache, stride, len, latent, o, out_stride);
    case 2:
      return WeightedSumHeads<2>(ph, p_stride, cache, stride, len, latent, o, out_stride);
    case 1:
      return WeightedSumHeads<1>(ph, p_stride, cache, stride, len, latent, o, out_stride);
    default:
      return;
  }
}

namespace {

// The 16 bf16 values at row + at, widened to floats.
inline __m512 Bf16Vector(const std::uint16_t* row, std::int64_t at) {
  const __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + at));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
}

// NI inputs over V × 16 columns from c on, rows ascending: each weight vector is
// widened once for all the inputs.
template <int NI, int V>
inline void TransposedBf16Columns(const std::uint16_t* w, std::int64_t rows, std::int64_t cols, const float* x, float* y, std::int64_t c) {
  __m512 acc[NI][V];
  for (int i = 0; i < NI; ++i) {
    for (int j = 0; j < V; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::uint16_t* wr = w + r * cols + c;
    __m512 wv[V];
    for (int j = 0; j < V; ++j) wv[j] = Bf16Vector(wr, 16 * j);
    for (int i = 0; i < NI; ++i) {
      const __m512 xr = _mm512_set1_ps(x[i * rows + r]);
      for (int j = 0; j < V; ++j) acc[i][j] = _mm512_add_ps(acc[i][j], _mm512_mul_ps(wv[j], xr));
    }
  }
  for (int i = 0; i < NI; ++i) {
    for (int j = 0; j < V; ++j) _mm512_storeu_ps(y + i * cols + c + 16 * j, acc[i][j]);
  }
}

}  // namespace

// Inputs in fours over 64 columns, then one at a time over 128 (a decode step's key
// absorption: one input, 8 of 16 registers of sums) and 16: each weight vector is
// widened once for a pass's inputs, twice the lanes of the AVX2 form. Lane for lane
// the same operations as the AVX2 loop (the product rounded, then added, r
// ascending), so the same bits; the columns past the last whole 16 go to the AVX2
// loop.
void TransposedBf16Avx512(const std::uint16_t* w, std::int64_t rows, std::int64_t cols, const float* x, std::int64_t batch, float* y,
                          std::int64_t begin, std::int64_t end) {
  constexpr int kInputs = 4;
  const std::int64_t whole64 = begin + (end - begin) / 64 * 64, whole16 = begin + (end - begin) / 16 * 16;
  if (whole16 == begin) return TransposedBf16Avx2(w, rows, cols, x, batch, y, begin, end);
  for (std::int64_t r = 0; r < rows; ++r) {  // into L2 up front, as the AVX2 form does (its comment says why)
    PrefetchRange(reinterpret_cast<const char*>(w + r * cols + begin), (whole16 - begin) * 2);
  }
  std::int64_t b = 0;
  for (; b + kInputs <= batch && whole64 > begin; b += kInputs) {
    for (std::int64_t c = begin; c < whole64; c += 64) TransposedBf16Columns<kInputs, 4>(w, rows, cols, x + b * rows, y + b * cols, c);
    for (std::int64_t c = whole64; c < whole16; c += 16) TransposedBf16Columns<kInputs, 1>(w, rows, cols, x + b * rows, y + b * cols, c);
  }
  for (; b < batch; ++b) {
    std::int64_t c = begin;
    for (; c + 128 <= whole16; c += 128) TransposedBf16Columns<1, 8>(w, rows, cols, x + b * rows, y + b * cols, c);
    for (; c < whole16; c += 16) TransposedBf16Columns<1, 1>(w, rows, cols, x + b * rows, y + b * cols, c);
  }
  if (whole16 < end) TransposedBf16Avx2(w, rows, cols, x, batch, y, whole16, end);
}

namespace {

// TransposedQuantizedAvx2's sums over up to kWindow blocks (128 columns) of a tile's
// rows at once, so that the matrix is read tile after tile, one contiguous stream,
// rather than block after block across all tiles; each (input, block) keeps its two
// 16-column sums in registers. Lane for lane the AVX2 loop's operations (the scale's
// product with the input rounded, then its product with the level, then the sum, rows
// ascending): the same bits.
constexpr std::int64_t kWindow = 4;

template <int NB, int KB, bool kInt8>
void TransposedQuantizedWindow(const QuantizedTiles& w, const float* x, std::int64_t first_block, float* y) {
  const TileBytes bytes(kInt8, w.cols);
  const std::int64_t groups = w.cols / w.group, tiles = (w.rows + kTile - 1) / kTile;
  const std::uint8_t* values = w.values + first_block * bytes.block;
  const std::int64_t window_bytes = KB * bytes.block;
  // One stream: two tiles ahead, into L2 (the hardware prefetcher restarts on every
  // small matrix; see prefetch.hpp).
  const std::int64_t scale_bytes = groups * kTile * static_cast<std::int64_t>(sizeof(float));
  const auto ahead = [&](std::int64_t t) {
    PrefetchRange(reinterpret_cast<const char*>(values + t * bytes.tile), window_bytes);
    PrefetchRange(reinterpret_cast<const char*>(w.scales) + t * scale_bytes, scale_bytes);
  };
  for (std::int64_t t = 0; t < tiles && t < 2; ++t) ahead(t);
  __m512 acc[NB][KB][2];
  for (auto& input : acc) {
    for (auto& block : input) block[0] = block[1] = _mm512_setzero_ps();
  }
  for (std::int64_t t = 0; t < tiles; ++t) {
    if (t + 2 < tiles) ahead(t + 2);
    const std::int64_t first = t * kTile, live = w.rows - first < kTile ? w.rows - first : kTile;
    const auto rows = static_cast<__mmask16>(live == kTile ? 0xFFFF : (1u << live) - 1);  // rows past w.rows are not read
    alignas(64) float coef[NB][KB][kTile];
    for (int b = 0; b < NB; ++b) {
      const __m512 xv = _mm512_maskz_loadu_ps(rows, x + b * w.rows + first);
      for (int k = 0; k < KB; ++k) {
        const std::int64_t g = (first_block + k) * kBlock / w.group;
        _mm512_store_ps(coef[b][k], _mm512_mul_ps(_mm512_loadu_ps(w.scales + (t * groups + g) * kTile), xv));
      }
    }
    const std::uint8_t* tile = values + t * bytes.tile;
    for (std::int64_t half = 0; half * 8 < live; ++half) {
      const std::int64_t n = live - half * 8 < 8 ? live - half * 8 : 8;
      for (int k = 0; k < KB; ++k) {
        const std::uint8_t* base = tile + k * bytes.block + half * 32;
        __m256i v[8];
        if constexpr (kInt8) {
          for (int j = 0; j < 8; ++j) v[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + j * kChunk));
          TransposeDwords8x8(v);
        } else {
          for (int j = 0; j < 4; ++j) v[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + j * kChunk));
          TransposeDwords8x4(v);
        }
        for (std::int64_t i = 0; i < n; ++i) {
          __m128i lo, hi;
          if constexpr (kInt8) {
            Int8Columns(v[i], lo, hi);
          } else {
            Int4Columns(i < 4 ? _mm256_castsi256_si128(v[i]) : _mm256_extracti128_si256(v[i - 4], 1), lo, hi);
          }
          const __m512 f0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo)), f1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi));
          for (int b = 0; b < NB; ++b) {
            const __m512 c = _mm512_set1_ps(coef[b][k][half * 8 + i]);
            acc[b][k][0] = _mm512_add_ps(acc[b][k][0], _mm512_mul_ps(f0, c));
            acc[b][k][1] = _mm512_add_ps(acc[b][k][1], _mm512_mul_ps(f1, c));
          }
        }
      }
    }
  }
  for (int b = 0; b < NB; ++b) {
    for (int k = 0; k < KB; ++k) {
      _mm512_storeu_ps(y + b * w.cols + k * kBlock, acc[b][k][0]);
      _mm512_storeu_ps(y + b * w.cols + k * kBlock + 16, acc[b][k][1]);
    }
  }
}

template <int NB, bool kInt8>
void TransposedQuantizedBlocks(const QuantizedTiles& w, const float* x, std::int64_t first_block, std::int64_t blocks, float* y) {
  switch (blocks) {
    case 4:
      return TransposedQuantizedWindow<NB, 4, kInt8>(w, x, first_block, y);
    case 3:
      return TransposedQuantizedWindow<NB, 3, kInt8>(w, x, first_block, y);
    case 2:
      return TransposedQuantizedWindow<NB, 2, kInt8>(w, x, first_block, y);
    default:
      return TransposedQuantizedWindow<NB, 1, kInt8>(w, x, first_block, y);
  }
}

}  // namespace

void TransposedQuantizedBlocksAvx512(const QuantizedTiles& w, const float* x, std::int64_t batch, float* y, std::int64_t first_block,
                                     std::int64_t last_block) {
  for (std::int64_t block = first_block; block < last_block; block += kWindow) {
    const std::int64_t blocks = last_block - block < kWindow ? last_block - block : kWindow;
    float* out = y + block * kBlock;
    // Inputs in pairs (a prompt chunk's or a batch's rows): each tile's levels widened
    // once for two.
    std::int64_t b = 0;
    for (; b + 2 <= batch; b += 2) {
      if (w.int8) {
        TransposedQuantizedBlocks<2, true>(w, x + b * w.rows, block, blocks, out + b * w.cols);
      } else {
        TransposedQuantizedBlocks<2, false>(w, x + b * w.rows, block, blocks, out + b * w.cols);
      }
    }
    if (b < batch) {
      if (w.int8) {
        TransposedQuantizedBlocks<1, true>(w, x + b * w.rows, block, blocks, out + b * w.cols);
      } else {
        TransposedQuantizedBlocks<1, false>(w, x + b * w.rows, block, blocks, out + b * w.cols);
      }
    }
  }
}

}  // namespace tandem::rt::kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
