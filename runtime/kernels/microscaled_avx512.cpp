// DeepSeek V4.1's FP4 products with AVX-512 BW: a block's 32 weights from their 16 bytes
// (nibbles through a 16-entry table to the integers 2w), 32 int16 multiply-adds against
// the input's high and low halves, summed exactly in int32 (microscaled_rows.hpp). Only
// reached when ActiveIsa() >= kAvx512.
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

namespace tandem::rt::kernels {

namespace {

// 2 × E2M1 by code: 0, 0.5, 1, 1.5, 2, 3, 4, 6, then the same negated.
inline __m256i Table() {
  return _mm256_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12, 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
}

// One row's block: 16 int32 lanes whose sum is the block's Σ (x·512)(2w).
inline __m512i BlockLanes(const std::uint8_t* bytes16, __m256i table, __m128i nibble, __m512i high, __m512i low) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes16));
  const __m128i even = _mm_and_si128(bytes, nibble);
  const __m128i odd = _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble);
  const __m256i codes = _mm256_inserti128_si256(_mm256_castsi128_si256(even), odd, 1);
  const __m512i w = _mm512_cvtepi8_epi16(_mm256_shuffle_epi8(table, codes));
  return _mm512_add_epi32(_mm512_slli_epi32(_mm512_madd_epi16(w, high), 9), _mm512_madd_epi16(w, low));
}

// Two rows' lanes to one register holding both rows' partial sums, interleaved.
inline __m512i Pair32(__m512i a, __m512i b) { return _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b)); }
inline __m512i Pair64(__m512i a, __m512i b) { return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b)); }
// Four rows' sums per 128-bit segment, two such registers: segments summed pairwise.
inline __m512i PairSegments(__m512i a, __m512i b) {
  return _mm512_add_epi32(_mm512_shuffle_i32x4(a, b, 0x88), _mm512_shuffle_i32x4(a, b, 0xdd));
}

// Two blocks of one row from their 32 bytes: 16 int32 lanes, the first 8 summing to block
// b's Σ (x·512)(2w), the last 8 to block b + 1's. `x` points at the pair's input: high
// evens, high odds, low evens, low odds (32 int16 each, block b's 16 then block b + 1's).
inline __m512i PairLanes(const std::uint8_t* bytes32, __m512i table, const __m512i* x) {
  const __m512i bytes = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes32)));
  const __m512i even = _mm512_permutexvar_epi16(_mm512_and_si512(bytes, _mm512_set1_epi16(0x0f)), table);
  const __m512i odd = _mm512_permutexvar_epi16(_mm512_srli_epi16(bytes, 4), table);
  const __m512i high = _mm512_add_epi32(_mm512_madd_epi16(even, x[0]), _mm512_madd_epi16(odd, x[1]));
  const __m512i low = _mm512_add_epi32(_mm512_madd_epi16(even, x[2]), _mm512_madd_epi16(odd, x[3]));
  return _mm512_add_epi32(_mm512_slli_epi32(high, 9), low);
}

// The E8M0 scales of 16 rows as fp32 (code 0 is 2^-127, below fp32's normals).
inline __m512 WeightScales(const std::uint8_t* scales16) {
  const __m512i codes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales16)));
  const __m512 w_scale = _mm512_castsi512_ps(_mm512_slli_epi32(codes, 23));
  return _mm512_mask_mov_ps(w_scale, _mm512_cmpeq_epi32_mask(codes, _mm512_setzero_si512()), _mm512_set1_ps(0x1p-127f));
}

// fp32 block sums of 16 rows (lane r: row r) times the scales, added to an fp32 running sum
// in order (the reference's accumulation).
struct F32Sum {
  __m512 acc;  // set by the caller (a member initializer would compile without AVX-512)
  void Add(__m512i sums, float a_scale, const std::uint8_t* scales16) {
    const __m512 partial = _mm512_mul_ps(_mm512_cvtepi32_ps(sums), _mm512_set1_ps(0x1p-10f));
    acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_mul_ps(partial, _mm512_set1_ps(a_scale)), WeightScales(scales16)));
  }
};

// The same terms (the fp32 block sum, times the scales in double) added in double.
struct F64Sum {
  __m512d low, high;  // set by the caller
  void Add(__m512i sums, float a_scale, const std::uint8_t* scales16) {
    const __m512 partial = _mm512_mul_ps(_mm512_cvtepi32_ps(sums), _mm512_set1_ps(0x1p-10f));
    const __m512 w_scale = WeightScales(scales16);
    const __m512d a = _mm512_set1_pd(a_scale);
    low = _mm512_add_pd(low, _mm512_mul_pd(_mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(partial)), a),
                                           _mm512_cvtps_pd(_mm512_castps512_ps256(w_scale))));
    const __m256 partial_high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(partial), 1));
    const __m256 w_scale_high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(w_scale), 1));
    high = _mm512_add_pd(high, _mm512_mul_pd(_mm512_mul_pd(_mm512_cvtps_pd(partial_high), a), _mm512_cvtps_pd(w_scale_high)));
  }
};

// 16 rows' block sums, block by block, into `sum` (F32Sum or F64Sum).
template <class Sum>
void Fp4Rows16(const std::uint8_t* packed, std::int64_t row_bytes, const std::uint8_t* tile_scales, const Fp4Input& input,
               const float* a_scale, Sum& sum) {
  const __m256i table = Table();
  const __m512i table16 = _mm512_cvtepi8_epi16(table);  // entries 0–15 (and again 16–31)
  const __m128i nibble = _mm_set1_epi8(0x0f);
  std::int64_t b = 0;
  for (; b + 2 <= input.blocks; b += 2) {
    __m512i x[4];
    for (int k = 0; k < 4; ++k) x[k] = _mm512_loadu_si512(input.pairs + 128 * (b / 2) + 32 * k);
    const std::uint8_t* at = packed + 16 * b;
    __m512i quads[4];
    for (int q = 0; q < 4; ++q) {
      const std::uint8_t* r = at + 4 * q * row_bytes;
      const __m512i p01 = Pair32(PairLanes(r, table16, x), PairLanes(r + row_bytes, table16, x));
      const __m512i p23 = Pair32(PairLanes(r + 2 * row_bytes, table16, x), PairLanes(r + 3 * row_bytes, table16, x));
      quads[q] = Pair64(p01, p23);  // segments 0–1: block b, 2–3: block b + 1; rows 4q … 4q + 3
    }
    const __m512i h01 = PairSegments(quads[0], quads[1]);  // A_b, A_b+1, B_b, B_b+1
    const __m512i h23 = PairSegments(quads[2], quads[3]);  // C_b, C_b+1, D_b, D_b+1
    sum.Add(_mm512_shuffle_i32x4(h01, h23, 0x88), a_scale[b], tile_scales + 16 * b);
    sum.Add(_mm512_shuffle_i32x4(h01, h23, 0xdd), a_scale[b + 1], tile_scales + 16 * (b + 1));
  }
  for (; b < input.blocks; ++b) {  // an odd last block
    const __m512i high = _mm512_loadu_si512(input.high + 32 * b);
    const __m512i low = _mm512_loadu_si512(input.low + 32 * b);
    const std::uint8_t* at = packed + 16 * b;
    __m512i quads[4];
    for (int q = 0; q < 4; ++q) {
      const std::uint8_t* r = at + 4 * q * row_bytes;
      const __m512i p01 = Pair32(BlockLanes(r, table, nibble, high, low), BlockLanes(r + row_bytes, table, nibble, high, low));
      const __m512i p23 =
          Pair32(BlockLanes(r + 2 * row_bytes, table, nibble, high, low), BlockLanes(r + 3 * row_bytes, table, nibble, high, low));
      quads[q] = Pair64(p01, p23);
    }
    sum.Add(PairSegments(PairSegments(quads[0], quads[1]), PairSegments(quads[2], quads[3])), a_scale[b], tile_scales + 16 * b);
  }
}

}  // namespace

void Fp4Rows16Avx512(const std::uint8_t* packed, std::int64_t row_bytes, const std::uint8_t* tile_scales, const Fp4Input& input,
                     const float* a_scale, float* out) {
  F32Sum sum;
  sum.acc = _mm512_setzero_ps();
  Fp4Rows16(packed, row_bytes, tile_scales, input, a_scale, sum);
  _mm512_storeu_ps(out, sum.acc);
}

void Fp4Rows16F64Avx512(const std::uint8_t* packed, std::int64_t row_bytes, const std::uint8_t* tile_scales, const Fp4Input& input,
                        const float* a_scale, double* out) {
  F64Sum sum;
  sum.low = sum.high = _mm512_setzero_pd();
  Fp4Rows16(packed, row_bytes, tile_scales, input, a_scale, sum);
  _mm512_storeu_pd(out, sum.low);
  _mm512_storeu_pd(out + 8, sum.high);
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
