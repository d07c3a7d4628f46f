// DeepSeek V4.1's FP4 and FP8 products with AVX-512 BW: weights through a table to the
// integers 2w (FP4) or w·512 (FP8), int16 multiply-adds against the input's high and low
// halves, summed exactly in int32 (microscaled_rows.hpp). Only reached when ActiveIsa() >=
// kAvx512.
#if !defined(__clang__)
#pragma GCC target("avx2,avx512f,avx512bw,avx512vl")
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <bit>

#include <immintrin.h>

#include "runtime/kernels/microscaled_rows.hpp"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,avx512f,avx512bw,avx512vl"))), apply_to = function)
#endif

// After the target: the tile kernel is compiled for it.
#include "runtime/kernels/microscaled_tile_kernel.hpp"
#include "runtime/kernels/prefetch.hpp"

namespace tandem::rt::kernels {

namespace {

// One tile of 16 rows against B inputs with int16 multiply-adds (microscaled_rows.hpp):
// each group of 32 bytes decoded once for all B inputs — a 16-bit lane per byte, its low
// nibble's weight by the table as it is (the table's index is a lane's low 5 bits and its
// halves are the same), its high nibble's once shifted — and each int32 lane the sum of one
// row's four weights of a parity; at the block's end a row's two lanes are added.
template <int B, class Sum>
struct BwTile {
  template <class Out>
  static void Run(const std::uint8_t* tile, std::int64_t blocks, const std::uint8_t* tile_scales, const Fp4TileInput* inputs,
                  const std::uint8_t* stream_end, Out* out) {
    // 2 × E2M1 by code (0, 0.5, 1, 1.5, 2, 3, 4, 6, then negated), twice.
    const __m512i table =
        _mm512_set_epi16(-12, -8, -6, -4, -3, -2, -1, 0, 12, 8, 6, 4, 3, 2, 1, 0, -12, -8, -6, -4, -3, -2, -1, 0, 12, 8, 6, 4, 3, 2, 1, 0);
    // Row r's two lanes: 2r and 2r + 1 of the first half's register (r < 8), else of the second's.
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    Sum sums[B];
    for (int j = 0; j < B; ++j) Reset(sums[j]);
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::uint8_t* at = tile + b * 256;
      // The tiles of a thread's share are one contiguous stream: keep kAheadBytes of it in
      // flight, as far as the share goes.
      if (at + kAheadBytes < stream_end) PrefetchRange(reinterpret_cast<const char*>(at + kAheadBytes), 256);
      __m512i high[2][B], low[2][B];
      for (int h = 0; h < 2; ++h) {
        for (int j = 0; j < B; ++j) high[h][j] = low[h][j] = _mm512_setzero_si512();
      }
      for (int q = 0; q < 4; ++q) {
        for (int h = 0; h < 2; ++h) {
          const __m512i bytes = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + (2 * q + h) * 32)));
          const __m512i w_lo = _mm512_permutexvar_epi16(bytes, table);
          const __m512i w_hi = _mm512_permutexvar_epi16(_mm512_srli_epi16(bytes, 4), table);
          for (int j = 0; j < B; ++j) {
            const std::int64_t* x = inputs[j].words + (b * 4 + q) * 4;
            high[h][j] = _mm512_add_epi32(high[h][j], _mm512_add_epi32(_mm512_madd_epi16(w_lo, _mm512_set1_epi64(x[0])),
                                                                       _mm512_madd_epi16(w_hi, _mm512_set1_epi64(x[1]))));
            low[h][j] = _mm512_add_epi32(low[h][j], _mm512_add_epi32(_mm512_madd_epi16(w_lo, _mm512_set1_epi64(x[2])),
                                                                     _mm512_madd_epi16(w_hi, _mm512_set1_epi64(x[3]))));
          }
        }
      }
      for (int j = 0; j < B; ++j) {
        const __m512i first = _mm512_add_epi32(_mm512_slli_epi32(high[0][j], 9), low[0][j]);
        const __m512i second = _mm512_add_epi32(_mm512_slli_epi32(high[1][j], 9), low[1][j]);
        const __m512i rows =
            _mm512_add_epi32(_mm512_permutex2var_epi32(first, even, second), _mm512_permutex2var_epi32(first, odd, second));
        sums[j].Add(rows, inputs[j].a_scale[b], tile_scales + 16 * b);
      }
    }
    for (int j = 0; j < B; ++j) Store(sums[j], out + 16 * j);
  }
};

}  // namespace

void Fp4Tile16Avx512(const std::uint8_t* tile, std::int64_t blocks, const std::uint8_t* tile_scales, const Fp4TileInput* inputs,
                     std::int64_t batch, const std::uint8_t* stream_end, float* out) {
  Tile16Batch<BwTile, TileF32Sum>(tile, blocks, tile_scales, inputs, batch, stream_end, out);
}

void Fp4Tile16F64Avx512(const std::uint8_t* tile, std::int64_t blocks, const std::uint8_t* tile_scales, const Fp4TileInput* inputs,
                        std::int64_t batch, const std::uint8_t* stream_end, double* out) {
  Tile16Batch<BwTile, TileF64Sum>(tile, blocks, tile_scales, inputs, batch, stream_end, out);
}

void Fp4RowSumsAvx512(const std::uint8_t* packed, const Fp4Input& input, std::int32_t* partials) {
  // 2 × E2M1 by code: 0, 0.5, 1, 1.5, 2, 3, 4, 6, then the same negated.
  const __m256i table =
      _mm256_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12, 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
  const __m128i nibble = _mm_set1_epi8(0x0f);
  for (std::int64_t b = 0; b < input.blocks; ++b) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed + 16 * b));
    const __m128i even = _mm_and_si128(bytes, nibble);
    const __m128i odd = _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble);
    const __m256i codes = _mm256_inserti128_si256(_mm256_castsi128_si256(even), odd, 1);
    const __m512i w = _mm512_cvtepi8_epi16(_mm256_shuffle_epi8(table, codes));
    const __m512i high = _mm512_loadu_si512(input.high + 32 * b);
    const __m512i low = _mm512_loadu_si512(input.low + 32 * b);
    const __m512i sum = _mm512_add_epi32(_mm512_slli_epi32(_mm512_madd_epi16(w, high), 9), _mm512_madd_epi16(w, low));
    partials[b] = _mm512_reduce_add_epi32(sum);
  }
}

namespace {

// w·512 of E4M3 magnitude code c (0–126; 127, NaN, as 0), split as high·512 + low.
struct Fp8Tables {
  alignas(64) std::int16_t high[128];
  alignas(64) std::int16_t low[128];
  Fp8Tables() {
    for (int c = 0; c < 128; ++c) {
      const int e = c >> 3, m = c & 7;
      const int mant = e == 0 ? m : (m | 8);
      const std::int32_t v = c == 127 ? 0 : mant << ((e == 0 ? 1 : e) - 1);
      high[c] = static_cast<std::int16_t>(v >> 9);
      low[c] = static_cast<std::int16_t>(v & 511);
    }
  }
};

// Two rows' lanes to one register holding both rows' partial sums, interleaved.
inline __m512i Pair32(__m512i a, __m512i b) { return _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b)); }
inline __m512i Pair64(__m512i a, __m512i b) { return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b)); }
// Four rows' sums per 128-bit segment, two such registers: segments summed pairwise.
inline __m512i PairSegments(__m512i a, __m512i b) {
  return _mm512_add_epi32(_mm512_shuffle_i32x4(a, b, 0x88), _mm512_shuffle_i32x4(a, b, 0xdd));
}

// 16 rows' lanes (each the pair sums of one row) reduced to one register, lane r row r's sum.
inline __m512i Reduce16(const __m512i* v) {
  __m512i quads[4];
  for (int q = 0; q < 4; ++q) quads[q] = Pair64(Pair32(v[4 * q], v[4 * q + 1]), Pair32(v[4 * q + 2], v[4 * q + 3]));
  return PairSegments(PairSegments(quads[0], quads[1]), PairSegments(quads[2], quads[3]));
}

// Eight lanes (as double) x·2^18 + y·2^9 + z, exact, rounded once to fp32.
inline __m256 JoinHalf(__m256i x, __m256i y, __m256i z) {
  const __m512d v = _mm512_fmadd_pd(_mm512_cvtepi32_pd(x), _mm512_set1_pd(0x1p18),
                                    _mm512_fmadd_pd(_mm512_cvtepi32_pd(y), _mm512_set1_pd(0x1p9), _mm512_cvtepi32_pd(z)));
  return _mm512_cvtpd_ps(v);
}

// Lanes a·2^18 + b·2^9 + c as fp32.
inline __m512 Join(__m512i a, __m512i b, __m512i c) {
  const __m256 lo = JoinHalf(_mm512_castsi512_si256(a), _mm512_castsi512_si256(b), _mm512_castsi512_si256(c));
  const __m256 hi = JoinHalf(_mm512_extracti64x4_epi64(a, 1), _mm512_extracti64x4_epi64(b, 1), _mm512_extracti64x4_epi64(c, 1));
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
}

}  // namespace

void Fp8Rows16Avx512(const std::uint8_t* values, std::int64_t row_bytes, const std::uint8_t* scales, const Fp4Input& input,
                     const float* a_scale, float* out) {
  static const Fp8Tables tables;
  const __m512i high0 = _mm512_load_si512(tables.high), high1 = _mm512_load_si512(tables.high + 32);
  const __m512i high2 = _mm512_load_si512(tables.high + 64), high3 = _mm512_load_si512(tables.high + 96);
  const __m512i low0 = _mm512_load_si512(tables.low), low1 = _mm512_load_si512(tables.low + 32);
  const __m512i low2 = _mm512_load_si512(tables.low + 64), low3 = _mm512_load_si512(tables.low + 96);
  __m512 acc = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < input.blocks; ++b) {
    const __m512i xh = _mm512_loadu_si512(input.high + 32 * b);
    const __m512i xl = _mm512_loadu_si512(input.low + 32 * b);
    __m512i hh[16], cross[16], ll[16];
    for (int r = 0; r < 16; ++r) {
      const __m512i bytes = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + r * row_bytes + 32 * b)));
      const __m512i code = _mm512_and_si512(bytes, _mm512_set1_epi16(0x7f));
      const __mmask32 upper = _mm512_test_epi16_mask(code, _mm512_set1_epi16(0x40));
      const __mmask32 negative = _mm512_test_epi16_mask(bytes, _mm512_set1_epi16(0x80));
      __m512i wh =
          _mm512_mask_blend_epi16(upper, _mm512_permutex2var_epi16(high0, code, high1), _mm512_permutex2var_epi16(high2, code, high3));
      __m512i wl = _mm512_mask_blend_epi16(upper, _mm512_permutex2var_epi16(low0, code, low1), _mm512_permutex2var_epi16(low2, code, low3));
      wh = _mm512_mask_sub_epi16(wh, negative, _mm512_setzero_si512(), wh);
      wl = _mm512_mask_sub_epi16(wl, negative, _mm512_setzero_si512(), wl);
      hh[r] = _mm512_madd_epi16(wh, xh);
      cross[r] = _mm512_add_epi32(_mm512_madd_epi16(wh, xl), _mm512_madd_epi16(wl, xh));
      ll[r] = _mm512_madd_epi16(wl, xl);
    }
    const __m512 partial = _mm512_mul_ps(Join(Reduce16(hh), Reduce16(cross), Reduce16(ll)), _mm512_set1_ps(0x1p-18f));
    const std::uint8_t code = scales[b];
    const float w_scale = code == 0 ? 0x1p-127f : std::bit_cast<float>(static_cast<std::uint32_t>(code) << 23);
    acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_mul_ps(partial, _mm512_set1_ps(a_scale[b])), _mm512_set1_ps(w_scale)));
  }
  _mm512_storeu_ps(out, acc);
}

}  // namespace tandem::rt::kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
