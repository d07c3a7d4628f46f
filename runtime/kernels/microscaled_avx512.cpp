// DeepSeek V4.1's FP4 products with AVX-512 BW: a block's 32 weights from their 16 bytes
// (nibbles through a 16-entry table to the integers 2w), 32 int16 multiply-adds against
// the input's high and low halves, summed exactly in int32 (microscaled_rows.hpp). Only
// reached when ActiveIsa() >= kAvx512.
#if !defined(__clang__)
#pragma GCC target("avx2,avx512f,avx512bw,avx512vl")
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

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

// fp32 block sums of 16 rows (lane r: row r) times the scales, added to `acc` in order.
inline __m512 Accumulate(__m512 acc, __m512i sums, float a_scale, const std::uint8_t* scales16) {
  const __m512i codes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales16)));
  __m512 w_scale = _mm512_castsi512_ps(_mm512_slli_epi32(codes, 23));
  w_scale = _mm512_mask_mov_ps(w_scale, _mm512_cmpeq_epi32_mask(codes, _mm512_setzero_si512()), _mm512_set1_ps(0x1p-127f));  // E8M0 0
  const __m512 partial = _mm512_mul_ps(_mm512_cvtepi32_ps(sums), _mm512_set1_ps(0x1p-10f));
  return _mm512_add_ps(acc, _mm512_mul_ps(_mm512_mul_ps(partial, _mm512_set1_ps(a_scale)), w_scale));
}

}  // namespace

void Fp4Rows16Avx512(const std::uint8_t* packed, std::int64_t row_bytes, const std::uint8_t* tile_scales, const Fp4Input& input,
                     const float* a_scale, float* out) {
  const __m256i table = Table();
  const __m512i table16 = _mm512_cvtepi8_epi16(table);  // entries 0–15 (and again 16–31)
  const __m128i nibble = _mm_set1_epi8(0x0f);
  __m512 acc = _mm512_setzero_ps();
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
    acc = Accumulate(acc, _mm512_shuffle_i32x4(h01, h23, 0x88), a_scale[b], tile_scales + 16 * b);
    acc = Accumulate(acc, _mm512_shuffle_i32x4(h01, h23, 0xdd), a_scale[b + 1], tile_scales + 16 * (b + 1));
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
    const __m512i sums = PairSegments(PairSegments(quads[0], quads[1]), PairSegments(quads[2], quads[3]));
    acc = Accumulate(acc, sums, a_scale[b], tile_scales + 16 * b);
  }
  _mm512_storeu_ps(out, acc);
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

}  // namespace tandem::rt::kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
