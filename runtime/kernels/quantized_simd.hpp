#pragma once

// The SIMD body of the quantized kernels, included by quantized_avx2.cpp and
// quantized_vnni.cpp, each compiling it for its own target (everything here has
// internal linkage, so the two instantiations never mix). See quantized_rows.hpp
// for the order computed and quantized_matrix.hpp for the tile layout.
#include <cstdint>

#include <immintrin.h>

#include "runtime/kernels/prefetch.hpp"
#include "runtime/kernels/quantized_rows.hpp"

namespace tandem::rt::kernels {

namespace {

// A tile's bytes per block of 32 columns: 16 rows × 32 bytes (int8) or 16 (int4),
// in 64-byte chunks of the 16 rows' 4 bytes.
template <bool kInt4>
constexpr std::int64_t kBlockBytes = kTileRows*(kInt4 ? kInputBlock / 2 : kInputBlock);
// What the stored values are offset by (w + 128 as unsigned bytes, w + 8 as nibbles).
template <bool kInt4>
constexpr std::int32_t kStoredOffset = kInt4 ? 8 : 128;

inline std::int32_t LoadInputChunk(const std::int8_t* x) {
  std::int32_t v;
  __builtin_memcpy(&v, x, 4);
  return v;
}

// AVX2: one tile of 16 rows against NB inputs, block after block, into rows[b]
// (acc[b][h] holds rows 8h … 8h + 7 for input b). int8: |w| against the inputs with w's signs
// (vpmaddubsw pairs, at most 2 · 127 · 127, never saturated). int4: the nibbles
// (w + 8, unsigned) against the inputs, started from −8 × the block's input sum
// (a pair of nibble products at most 2 · 15 · 127, two pairs' sum still an int16).
template <bool kInt4, int NB>
inline void TileYmm(const std::uint8_t* w, const float* ws, std::int64_t groups, int group, const QuantizedInput* in,
                    float (&rows)[NB][kTileRows], const char* stop) {
  constexpr std::int64_t kBytes = kBlockBytes<kInt4>;
  __m256 acc[NB][2];
  for (int b = 0; b < NB; ++b) acc[b][0] = acc[b][1] = _mm256_setzero_ps();
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80)), low = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  const std::int64_t per_group = group / kInputBlock;
  const char* ahead = reinterpret_cast<const char*>(w) + kAheadBytes;
  const std::int64_t room = stop - ahead;
  for (std::int64_t g = 0; g < groups; ++g) {
    const __m256 scale[2] = {_mm256_loadu_ps(ws + g * kTileRows), _mm256_loadu_ps(ws + g * kTileRows + 8)};
    for (std::int64_t k = g * per_group; k < (g + 1) * per_group; ++k) {
      if (k * kBytes < room) PrefetchRange(ahead + k * kBytes, kBytes);
      const std::uint8_t* wk = w + k * kBytes;
      __m256i sum[NB][2];
      for (int b = 0; b < NB; ++b) {
        if constexpr (kInt4) {
          sum[b][0] = sum[b][1] = _mm256_set1_epi32(-kStoredOffset<kInt4> * in[b].sums[k]);
        } else {
          sum[b][0] = sum[b][1] = _mm256_setzero_si256();
        }
      }
      for (int j = 0; j < kBytes / 64; ++j) {
        __m256i x[NB][2];  // int8: chunk j's 4 inputs; int4: chunk j's low and high nibbles' 4 each
        for (int b = 0; b < NB; ++b) {
          const std::int8_t* xk = in[b].q + k * kInputBlock;
          if constexpr (kInt4) {
            x[b][0] = _mm256_set1_epi32(LoadInputChunk(xk + 8 * j));
            x[b][1] = _mm256_set1_epi32(LoadInputChunk(xk + 8 * j + 4));
          } else {
            x[b][0] = _mm256_set1_epi32(LoadInputChunk(xk + 4 * j));
          }
        }
        for (int h = 0; h < 2; ++h) {
          const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wk + j * 64 + h * 32));
          if constexpr (kInt4) {
            const __m256i lo = _mm256_and_si256(raw, low), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
            for (int b = 0; b < NB; ++b) {
              const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, x[b][0]), _mm256_maddubs_epi16(hi, x[b][1]));
              sum[b][h] = _mm256_add_epi32(sum[b][h], _mm256_madd_epi16(pairs, ones));
            }
          } else {
            const __m256i v = _mm256_xor_si256(raw, flip);  // w
            const __m256i magnitude = _mm256_abs_epi8(v);
            for (int b = 0; b < NB; ++b) {
              const __m256i pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(x[b][0], v));
              sum[b][h] = _mm256_add_epi32(sum[b][h], _mm256_madd_epi16(pairs, ones));
            }
          }
        }
      }
      for (int b = 0; b < NB; ++b) {
        const __m256 d = _mm256_set1_ps(in[b].d[k]);
        for (int h = 0; h < 2; ++h) acc[b][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[b][h]), _mm256_mul_ps(scale[h], d), acc[b][h]);
      }
    }
  }
  for (int b = 0; b < NB; ++b) {
    _mm256_store_ps(rows[b], acc[b][0]);
    _mm256_store_ps(rows[b] + 8, acc[b][1]);
  }
}

// VNNI: a tile's 16 rows per 512-bit register. Each 64-byte chunk (int4: its low and
// its high nibbles) against the input's 4 bytes broadcast, the block's sum started
// from −offset × its input sum, in two chains added at the end: exact integers.
// Both prefetch kAheadBytes on, as the AVX2 tile does. A tile is one contiguous
// stream, which the hardware prefetcher follows within a large product; a decode
// step is hundreds of small ones (an int8 expert projection is 64 KiB), where it
// keeps restarting. Zen 5, one input: int8 decode 1.15× faster with the prefetch on
// one thread and 1.07× on two, a 64 MiB product as fast, a 4 MiB one (L3) 0.75–0.9×
// (docs/performance.md; on Zen 4 the 64 MiB product had been 1.25× slower with it).
// Into L1 rather than L2: a block's eight byte dot products are little work beside
// an L2 hit per load (Zen 5, one thread, against prefetcht1: seven int8 experts'
// products 1.06–1.09× in three rounds of four; int8 decode 1.01–1.05×; prompts as fast).
// (A template so that only the VNNI build instantiates it.)
template <bool kVnni, bool kInt4, int NB>
inline void TileZmm(const std::uint8_t* w, const float* ws, std::int64_t groups, int group, const QuantizedInput* in,
                    float (&rows)[NB][kTileRows], const char* stop) {
  static_assert(kVnni);
  constexpr std::int64_t kBytes = kBlockBytes<kInt4>;
  const char* ahead = reinterpret_cast<const char*>(w) + kAheadBytes;
  const std::int64_t room = stop - ahead;
  __m512 acc[NB];
  for (int b = 0; b < NB; ++b) acc[b] = _mm512_setzero_ps();
  const __m512i low = _mm512_set1_epi8(0x0F);
  const std::int64_t per_group = group / kInputBlock;
  for (std::int64_t g = 0; g < groups; ++g) {
    const __m512 scale = _mm512_loadu_ps(ws + g * kTileRows);
    for (std::int64_t k = g * per_group; k < (g + 1) * per_group; ++k) {
      if (k * kBytes < room) PrefetchRange<_MM_HINT_T0>(ahead + k * kBytes, kBytes);
      const std::uint8_t* wk = w + k * kBytes;
      __m512i v[8];  // v[m] multiplies the block's inputs 4m … 4m + 3
      if constexpr (kInt4) {
        for (int j = 0; j < 4; ++j) {
          const __m512i raw = _mm512_loadu_si512(wk + 64 * j);
          v[2 * j] = _mm512_and_si512(raw, low);
          v[2 * j + 1] = _mm512_and_si512(_mm512_srli_epi32(raw, 4), low);  // the mask drops what came from the byte above
        }
      } else {
        for (int j = 0; j < 8; ++j) v[j] = _mm512_loadu_si512(wk + 64 * j);
      }
      for (int b = 0; b < NB; ++b) {
        const std::int8_t* x = in[b].q + k * kInputBlock;
        __m512i even = _mm512_set1_epi32(-kStoredOffset<kInt4> * in[b].sums[k]), odd = _mm512_setzero_si512();
        for (int m = 0; m < 8; m += 2) {
          even = _mm512_dpbusd_epi32(even, v[m], _mm512_set1_epi32(LoadInputChunk(x + 4 * m)));
          odd = _mm512_dpbusd_epi32(odd, v[m + 1], _mm512_set1_epi32(LoadInputChunk(x + 4 * m + 4)));
        }
        const __m512 sum = _mm512_cvtepi32_ps(_mm512_add_epi32(even, odd));
        acc[b] = _mm512_fmadd_ps(sum, _mm512_mul_ps(scale, _mm512_set1_ps(in[b].d[k])), acc[b]);
      }
    }
  }
  for (int b = 0; b < NB; ++b) _mm512_store_ps(rows[b], acc[b]);
}

// The tiles of rows [begin, end) against inputs [0, NB): a tile the range cuts is
// computed whole and stored in part.
template <bool kVnni, bool kInt4, int NB>
inline void Tiles(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs, float* y,
                  std::int64_t y_stride, std::int64_t begin, std::int64_t end) {
  constexpr std::int64_t kTile = kTileRows;
  const std::int64_t groups = cols / group, tile_bytes = cols / kInputBlock * kBlockBytes<kInt4>;
  const std::int64_t first = begin / kTile, last = (end + kTile - 1) / kTile;
  const char* stop = reinterpret_cast<const char*>(values + last * tile_bytes);
  PrefetchHead(values + first * tile_bytes, stop);
  // The scales are a stream of their own (a tile's: groups × 16 floats): two tiles ahead.
  const std::int64_t scale_bytes = kTile * groups * static_cast<std::int64_t>(sizeof(float));
  const char* scale_of = reinterpret_cast<const char*>(scales);
  PrefetchRange(scale_of + first * scale_bytes, (last - first < 2 ? last - first : 2) * scale_bytes);
  for (std::int64_t t = first; t < last; ++t) {
    if (t + 2 < last) PrefetchRange(scale_of + (t + 2) * scale_bytes, scale_bytes);
    alignas(64) float rows[NB][kTile];
    if constexpr (kVnni) {
      TileZmm<kVnni, kInt4, NB>(values + t * tile_bytes, scales + t * kTile * groups, groups, group, inputs, rows, stop);
    } else {
      TileYmm<kInt4, NB>(values + t * tile_bytes, scales + t * kTile * groups, groups, group, inputs, rows, stop);
    }
    const std::int64_t lo = t * kTile < begin ? begin : t * kTile, hi = (t + 1) * kTile > end ? end : (t + 1) * kTile;
    for (int b = 0; b < NB; ++b) {
      for (std::int64_t o = lo; o < hi; ++o) y[b * y_stride + o - begin] = rows[b][o - t * kTile];
    }
  }
}

// Rows [begin, end), as many inputs at a time as the build's registers hold beside
// a block's 8 vectors of weights (VNNI: 4; AVX2: 2), the rest in one more pass:
// every pass reads the weights once.
template <bool kVnni, bool kInt4>
void QuantizedTileRows(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                       std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end) {
  constexpr int kMany = kVnni ? 4 : 2;
  std::int64_t b = 0;
  for (; b + kMany <= batch; b += kMany) {
    Tiles<kVnni, kInt4, kMany>(values, scales, cols, group, inputs + b, y + b * y_stride, y_stride, begin, end);
  }
  switch (batch - b) {
    case 3:
      if constexpr (kMany > 3) Tiles<kVnni, kInt4, 3>(values, scales, cols, group, inputs + b, y + b * y_stride, y_stride, begin, end);
      break;
    case 2:
      if constexpr (kMany > 2) Tiles<kVnni, kInt4, 2>(values, scales, cols, group, inputs + b, y + b * y_stride, y_stride, begin, end);
      break;
    case 1:
      Tiles<kVnni, kInt4, 1>(values, scales, cols, group, inputs + b, y + b * y_stride, y_stride, begin, end);
      break;
    default:
      break;
  }
}

}  // namespace

}  // namespace tandem::rt::kernels
