#pragma once

// The SIMD body of the quantized kernels, included by quantized_avx2.cpp and
// quantized_vnni.cpp, each compiling it for its own target (everything here has
// internal linkage, so the two instantiations never mix). See quantized_rows.hpp
// for the order computed.
#include <cstdint>
#include <type_traits>

#include <immintrin.h>

#include "runtime/kernels/prefetch.hpp"
#include "runtime/kernels/quantized_rows.hpp"

namespace tandem::rt::kernels {

namespace {

// int8, one tile of 16 rows (the tile layout of quantized_matrix.hpp) against NB
// inputs, block after block; acc[b] holds the tile's rows for input b (rows 0–7 in
// acc[b][0], 8–15 in acc[b][1]; one 512-bit register in the VNNI build).
inline std::int32_t LoadInputChunk(const std::int8_t* x) {
  std::int32_t v;
  __builtin_memcpy(&v, x, 4);
  return v;
}

// AVX2: |w| against the inputs with w's signs (vpmaddubsw pairs, at most 2 · 127 · 127,
// so never saturated), 8 rows per 256-bit half of a chunk.
template <int NB>
inline void Int8TileAvx2(const std::uint8_t* w, const float* ws, std::int64_t groups, int group, const QuantizedInput* in,
                         __m256 (&acc)[NB][2], const char* stop) {
  constexpr std::int64_t kBlockBytes = kInt8TileRows * kInputBlock;
  for (int b = 0; b < NB; ++b) acc[b][0] = acc[b][1] = _mm256_setzero_ps();
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80)), ones = _mm256_set1_epi16(1);
  const std::int64_t per_group = group / kInputBlock;
  const char* ahead = reinterpret_cast<const char*>(w) + kAheadBytes;
  const std::int64_t room = stop - ahead;
  for (std::int64_t g = 0; g < groups; ++g) {
    const __m256 scale[2] = {_mm256_loadu_ps(ws + g * kInt8TileRows), _mm256_loadu_ps(ws + g * kInt8TileRows + 8)};
    for (std::int64_t k = g * per_group; k < (g + 1) * per_group; ++k) {
      if (k * kBlockBytes < room) PrefetchRange(ahead + k * kBlockBytes, kBlockBytes);
      const std::uint8_t* wk = w + k * kBlockBytes;
      __m256i sum[NB][2];
      for (int b = 0; b < NB; ++b) sum[b][0] = sum[b][1] = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) {
        __m256i x[NB];
        for (int b = 0; b < NB; ++b) x[b] = _mm256_set1_epi32(LoadInputChunk(in[b].q + k * kInputBlock + 4 * j));
        for (int h = 0; h < 2; ++h) {
          const __m256i v = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wk + j * 64 + h * 32)), flip);  // w
          const __m256i magnitude = _mm256_abs_epi8(v);
          for (int b = 0; b < NB; ++b) {
            const __m256i pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(x[b], v));
            sum[b][h] = _mm256_add_epi32(sum[b][h], _mm256_madd_epi16(pairs, ones));
          }
        }
      }
      for (int b = 0; b < NB; ++b) {
        const __m256 d = _mm256_set1_ps(in[b].d[k]);
        for (int h = 0; h < 2; ++h) acc[b][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[b][h]), _mm256_mul_ps(scale[h], d), acc[b][h]);
      }
    }
  }
}

// VNNI: one tile's 16 rows per 512-bit register; a chunk's 64 bytes (w + 128) against
// the input's 4 bytes broadcast, the block's sum started from −128 × its input sum,
// in two chains (even and odd chunks) added at the end: exact integers either way.
// No software prefetch: a tile is one contiguous stream, which the hardware
// prefetcher follows; prefetching 8 KiB ahead as the AVX2 tile does made a 64 MiB
// product 1.25× slower here (BM_MatMul int8, Zen 4) and decode 8% slower.
// (A template so that only the VNNI build instantiates it.)
template <bool kVnni, int NB>
inline void Int8TileZmm(const std::uint8_t* w, const float* ws, std::int64_t groups, int group, const QuantizedInput* in,
                        float (&rows)[NB][kInt8TileRows]) {
  static_assert(kVnni);
  constexpr std::int64_t kBlockBytes = kInt8TileRows * kInputBlock;
  __m512 acc[NB];
  for (int b = 0; b < NB; ++b) acc[b] = _mm512_setzero_ps();
  const std::int64_t per_group = group / kInputBlock;
  for (std::int64_t g = 0; g < groups; ++g) {
    const __m512 scale = _mm512_loadu_ps(ws + g * kInt8TileRows);
    for (std::int64_t k = g * per_group; k < (g + 1) * per_group; ++k) {
      const std::uint8_t* wk = w + k * kBlockBytes;
      __m512i v[8];
      for (int j = 0; j < 8; ++j) v[j] = _mm512_loadu_si512(wk + 64 * j);
      for (int b = 0; b < NB; ++b) {
        const std::int8_t* x = in[b].q + k * kInputBlock;
        __m512i even = _mm512_set1_epi32(in[b].sums[k]), odd = _mm512_setzero_si512();
        for (int j = 0; j < 8; j += 2) {
          even = _mm512_dpbusd_epi32(even, v[j], _mm512_set1_epi32(LoadInputChunk(x + 4 * j)));
          odd = _mm512_dpbusd_epi32(odd, v[j + 1], _mm512_set1_epi32(LoadInputChunk(x + 4 * j + 4)));
        }
        const __m512 sum = _mm512_cvtepi32_ps(_mm512_add_epi32(even, odd));
        acc[b] = _mm512_fmadd_ps(sum, _mm512_mul_ps(scale, _mm512_set1_ps(in[b].d[k])), acc[b]);
      }
    }
  }
  for (int b = 0; b < NB; ++b) _mm512_store_ps(rows[b], acc[b]);
}

// AVX2's tile into rows[b][16].
template <int NB>
inline void Int8TileYmm(const std::uint8_t* w, const float* ws, std::int64_t groups, int group, const QuantizedInput* in,
                        float (&rows)[NB][kInt8TileRows], const char* stop) {
  __m256 acc[NB][2];
  Int8TileAvx2<NB>(w, ws, groups, group, in, acc, stop);
  for (int b = 0; b < NB; ++b) {
    _mm256_store_ps(rows[b], acc[b][0]);
    _mm256_store_ps(rows[b] + 8, acc[b][1]);
  }
}

// The tiles of rows [begin, end) against inputs [b, b + NB): a tile the range cuts
// is computed whole and stored in part.
template <bool kVnni, int NB>
inline void Int8Tiles(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs, float* y,
                      std::int64_t y_stride, std::int64_t begin, std::int64_t end) {
  constexpr std::int64_t kTile = kInt8TileRows;
  const std::int64_t groups = cols / group, first = begin / kTile, last = (end + kTile - 1) / kTile;
  const char* stop = reinterpret_cast<const char*>(values + last * kTile * cols);
  PrefetchHead(values + first * kTile * cols, stop);
  for (std::int64_t t = first; t < last; ++t) {
    alignas(64) float rows[NB][kTile];
    if constexpr (kVnni) {
      Int8TileZmm<kVnni, NB>(values + t * kTile * cols, scales + t * kTile * groups, groups, group, inputs, rows);
    } else {
      Int8TileYmm<NB>(values + t * kTile * cols, scales + t * kTile * groups, groups, group, inputs, rows, stop);
    }
    const std::int64_t lo = t * kTile < begin ? begin : t * kTile, hi = (t + 1) * kTile > end ? end : (t + 1) * kTile;
    for (int b = 0; b < NB; ++b) {
      for (std::int64_t o = lo; o < hi; ++o) y[b * y_stride + o - begin] = rows[b][o - t * kTile];
    }
  }
}

// int8 rows [begin, end), as many inputs at a time as the build's registers hold
// with a block's 8 chunks of weights (VNNI: 4; AVX2: 2), the rest in one more pass:
// every pass reads the weights once.
template <bool kVnni>
void RowsInt8(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
              std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end) {
  constexpr int kMany = kVnni ? 4 : 2;
  std::int64_t b = 0;
  for (; b + kMany <= batch; b += kMany) {
    Int8Tiles<kVnni, kMany>(values, scales, cols, group, inputs + b, y + b * y_stride, y_stride, begin, end);
  }
  switch (batch - b) {
    case 3:
      if constexpr (kMany > 3) Int8Tiles<kVnni, 3>(values, scales, cols, group, inputs + b, y + b * y_stride, y_stride, begin, end);
      break;
    case 2:
      if constexpr (kMany > 2) Int8Tiles<kVnni, 2>(values, scales, cols, group, inputs + b, y + b * y_stride, y_stride, begin, end);
      break;
    case 1:
      Int8Tiles<kVnni, 1>(values, scales, cols, group, inputs + b, y + b * y_stride, y_stride, begin, end);
      break;
    default:
      break;
  }
}

// `start` plus the sums of 32 unsigned × 32 signed bytes and 32 more, lane l = Σ of
// products 4l … 4l+3 of both: exact (each product ≤ 15 · 127 in magnitude, so
// maddubs's int16 pairs of the two add without saturating). VNNI accumulates onto
// `start` directly, which saves the kernels a subtraction per row and pair.
template <bool kVnni>
inline __m256i LaneSums2(__m256i start, __m256i u0, __m256i s0, __m256i u1, __m256i s1) {
  if constexpr (kVnni) {
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(start, u0, s0), u1, s1);
  } else {
    const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(u0, s0), _mm256_maddubs_epi16(u1, s1));
    return _mm256_add_epi32(start, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
}

// The int4 kernels' combination of eight lanes: ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)),
// which horizontal adds give for four rows at once (ReducePairsOfFour: one result
// per row, rows in order).
inline float ReducePairs(__m256 acc) {
  __m256 t = _mm256_hadd_ps(acc, acc);  // 0+1, 2+3 | 4+5, 6+7
  t = _mm256_hadd_ps(t, t);             // (0+1)+(2+3) | (4+5)+(6+7)
  return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
}
inline __m128 ReducePairsOfFour(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));  // per row: (0+1)+(2+3) | (4+5)+(6+7)
  return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

// One pair of blocks (p) of R int4 rows against B inputs, into acc: the low nibbles
// of a row's 32 bytes are the pair's even columns, the high ones its odd columns,
// each as [first block | second block], matching the prepared inputs; offset by 8
// (n ^ 8 = level + 8), which the inputs' sums take back out. `load(row)` reads a
// row's 32 bytes of the pair, `scale(r)` row r's two block scales.
template <bool kVnni, int R, int B, typename Load, typename Scale>
inline void Int4Pair(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t p, const QuantizedInput* in, Load load, Scale scale,
                     __m256 (&acc)[R][B]) {
  const __m256i offset8 = _mm256_set1_epi8(static_cast<char>(0x88)), low = _mm256_set1_epi8(0x0F);
  __m256i even[R], odd[R];
  __m256 wscale[R];
  for (int r = 0; r < R; ++r) {
    const __m256i v = _mm256_xor_si256(load(w + r * row_bytes + p * 32), offset8);
    even[r] = _mm256_and_si256(v, low);
    odd[r] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
    wscale[r] = scale(r);
  }
  for (int b = 0; b < B; ++b) {
    const std::int8_t* q = in[b].q + p * 64;
    const __m256i x_even = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
    const __m256i x_odd = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32));
    // The offset of 8 on every weight, taken back out: the sums start at −8 · Σ inputs.
    const __m256i start =
        _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in[b].sums + p * 8)));
    const __m256 d = _mm256_loadu_ps(in[b].pair_d + p * 8);
    for (int r = 0; r < R; ++r) {
      const __m256i sums = LaneSums2<kVnni>(start, even[r], x_even, odd[r], x_odd);
      acc[r][b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(wscale[r], d), acc[r][b]);
    }
  }
}

// How Int4Pair reads a row's bytes of a pair and its rows' scales (function objects
// rather than lambdas: the per-file target pragmas reach these, not a lambda's body).
struct WholePair {
  __m256i operator()(const std::uint8_t* row) const { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row)); }
};
struct HalfPair {  // an unpaired last block: its second half reads zeros
  __m256i operator()(const std::uint8_t* row) const {
    return _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row)));
  }
};
// Row r's scales at `at` (groups of the row's scales): the one at `at` for both
// blocks, or with `two`, it and the next ([s0 × 4, s1 × 4]).
struct PairScales {
  const float* ws;
  std::int64_t groups;
  std::int64_t at;
  bool two;
  __m256 operator()(int r) const {
    const float* s = ws + r * groups + at;
    if (!two) return _mm256_broadcast_ss(s);
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(s)))),
                                    _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
  }
};

// Four int4 rows against one input with AVX-512 (the VNNI build only): rows 0 and 1
// share a 512-bit register, lanes of row 0 below those of row 1, and so do rows 2
// and 3; every lane goes through Int4Pair's operations, so the bits are the same,
// with half the instructions. (A template so that only the VNNI build instantiates it.)
template <bool kVnni>
struct Int4FourRowsZmm {
  static_assert(kVnni);
  __m512 acc[2];
  Int4FourRowsZmm() { acc[0] = acc[1] = _mm512_setzero_ps(); }

  template <typename Load, typename Scale>
  void Pair(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t p, const QuantizedInput* in, Load load, Scale scale) {
    const __m512i offset8 = _mm512_set1_epi8(static_cast<char>(0x88)), low = _mm512_set1_epi8(0x0F);
    const std::int8_t* q = in->q + p * 64;
    const __m512i x_even = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
    const __m512i x_odd = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32)));
    const __m512i start = _mm512_broadcast_i64x4(
        _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in->sums + p * 8))));
    const __m512 d = _mm512_castsi512_ps(_mm512_broadcast_i64x4(_mm256_castps_si256(_mm256_loadu_ps(in->pair_d + p * 8))));
    for (int h = 0; h < 2; ++h) {
      const std::uint8_t* r0 = w + 2 * h * row_bytes + p * 32;
      const __m512i v = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(load(r0)), load(r0 + row_bytes), 1), offset8);
      // The high nibbles: a 32-bit shift moves each byte's own high nibble down; the
      // mask drops what came from the byte above.
      const __m512i even = _mm512_and_si512(v, low), odd = _mm512_and_si512(_mm512_srli_epi32(v, 4), low);
      const __m512 wscale = _mm512_castpd_ps(
          _mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(scale(2 * h))), _mm256_castps_pd(scale(2 * h + 1)), 1));
      const __m512i sums = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start, even, x_even), odd, x_odd);
      acc[h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_mul_ps(wscale, d), acc[h]);
    }
  }
  void Store(float* y) const {
    const __m256 r1 = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[0]), 1));
    const __m256 r3 = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[1]), 1));
    _mm_storeu_ps(y, ReducePairsOfFour(_mm512_castps512_ps256(acc[0]), r1, _mm512_castps512_ps256(acc[1]), r3));
  }
};

// R rows against B inputs in 256-bit registers (Int4Pair).
template <bool kVnni, int R, int B>
struct Int4Tile {
  __m256 acc[R][B];
  Int4Tile() {
    for (int r = 0; r < R; ++r) {
      for (int b = 0; b < B; ++b) acc[r][b] = _mm256_setzero_ps();
    }
  }
  template <typename Load, typename Scale>
  void Pair(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t p, const QuantizedInput* in, Load load, Scale scale) {
    Int4Pair<kVnni, R, B>(w, row_bytes, p, in, load, scale, acc);
  }
  void Store(float* y, std::int64_t y_stride) const {
    if constexpr (R == 4 && B == 1) {
      _mm_storeu_ps(y, ReducePairsOfFour(acc[0][0], acc[1][0], acc[2][0], acc[3][0]));
    } else {
      for (int r = 0; r < R; ++r) {
        for (int b = 0; b < B; ++b) y[b * y_stride + r] = ReducePairs(acc[r][b]);
      }
    }
  }
};

// int4: R weight rows against B inputs, pair of blocks after pair of blocks. Groups
// of 32 give a pair two consecutive scales, groups of 64 and 128 one shared scale
// (a group of an odd number of blocks, either); a last unpaired block reads 16 bytes.
// Four rows against one input take 512-bit registers in the VNNI build.
template <bool kVnni, int R, int B>
inline void Tile4(const std::uint8_t* w, std::int64_t row_bytes, const float* ws, std::int64_t groups, std::int64_t blocks, int group,
                  const QuantizedInput* in, float* y, std::int64_t y_stride, const char* stop) {
  constexpr bool kZmm = kVnni && R == 4 && B == 1;
  std::conditional_t<kZmm, Int4FourRowsZmm<kVnni>, Int4Tile<kVnni, R, B>> tile;
  const char* ahead = reinterpret_cast<const char*>(w) + kAheadBytes;
  const std::int64_t room = stop - reinterpret_cast<const char*>(w) - kAheadBytes;  // never past the caller's rows
  const std::int64_t per_group = group / kInputBlock, whole = blocks / 2;
  if (per_group == 1) {
    for (std::int64_t p = 0; p < whole; ++p) {
      if (p * R * 32 < room) PrefetchRange(ahead + p * R * 32, R * 32);
      tile.Pair(w, row_bytes, p, in, WholePair{}, PairScales{ws, groups, 2 * p, true});
    }
  } else {
    std::int64_t g0 = 0, in_group = 0;  // the pair's first block's group, and its index within it
    for (std::int64_t p = 0; p < whole; ++p) {
      if (p * R * 32 < room) PrefetchRange(ahead + p * R * 32, R * 32);
      tile.Pair(w, row_bytes, p, in, WholePair{}, PairScales{ws, groups, g0, in_group + 1 == per_group});
      for (int step = 0; step < 2; ++step) {
        if (++in_group == per_group) {
          in_group = 0;
          ++g0;
        }
      }
    }
  }
  if (blocks % 2 != 0) tile.Pair(w, row_bytes, whole, in, HalfPair{}, PairScales{ws, groups, (blocks - 1) / per_group, false});
  if constexpr (kZmm) {
    tile.Store(y);
  } else {
    tile.Store(y, y_stride);
  }
}

template <bool kVnni>
void RowsInt4(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
              std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end) {
  const std::int64_t row_bytes = cols / 2, groups = cols / group, blocks = cols / kInputBlock;
  const char* stop = reinterpret_cast<const char*>(values + end * row_bytes);
  std::int64_t b = 0;
  for (; b + 4 <= batch; b += 4) {
    PrefetchHead(values + begin * row_bytes, stop);
    for (std::int64_t o = begin; o < end; ++o) {
      Tile4<kVnni, 1, 4>(values + o * row_bytes, row_bytes, scales + o * groups, groups, blocks, group, inputs + b, y + b * y_stride + o,
                         y_stride, stop);
    }
  }
  for (; b < batch; ++b) {
    PrefetchHead(values + begin * row_bytes, stop);
    std::int64_t o = begin;
    // With AVX-512's 32 registers (the VNNI build) four rows' accumulators fit.
    if constexpr (kVnni) {
      for (; o + 4 <= end; o += 4) {
        Tile4<kVnni, 4, 1>(values + o * row_bytes, row_bytes, scales + o * groups, groups, blocks, group, inputs + b, y + b * y_stride + o,
                           y_stride, stop);
      }
    }
    for (; o + 2 <= end; o += 2) {
      Tile4<kVnni, 2, 1>(values + o * row_bytes, row_bytes, scales + o * groups, groups, blocks, group, inputs + b, y + b * y_stride + o,
                         y_stride, stop);
    }
    for (; o < end; ++o) {
      Tile4<kVnni, 1, 1>(values + o * row_bytes, row_bytes, scales + o * groups, groups, blocks, group, inputs + b, y + b * y_stride + o,
                         y_stride, stop);
    }
  }
}

}  // namespace

}  // namespace tandem::rt::kernels
