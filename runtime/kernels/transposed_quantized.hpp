#pragma once

// What the transposed products over a QuantizedMatrix (attention's absorbed key
// product, attention_rows.hpp) share between their AVX2 and AVX-512 forms: where a
// tile's blocks lie, and a tile's bytes turned into rows of levels in column order.
// Private to runtime/kernels; included by latent_attention_avx2.cpp and
// latent_attention_avx512.cpp, each compiling it for its own target (everything here
// has internal linkage, so the two never mix).
#include <cstdint>

#include <immintrin.h>

#include "runtime/kernels/quantized_rows.hpp"

namespace tandem::rt::kernels {
namespace {

constexpr std::int64_t kTile = kTileRows, kBlock = kInputBlock, kChunk = 64;

// Where a QuantizedMatrix's tiles and their blocks start (quantized_matrix.hpp), for
// `cols` int8 or int4 values a row.
struct TileBytes {
  std::int64_t tile, block;
  TileBytes(bool int8, std::int64_t cols) : tile(kTile * (int8 ? cols : cols / 2)), block(kTile * (int8 ? kBlock : kBlock / 2)) {}
};

// v[j] holds the 4 bytes of 8 rows in chunk j; afterwards v[i] holds row i's 4 bytes
// of every chunk, chunk after chunk.
inline void TransposeDwords8x8(__m256i v[8]) {
  __m256i t[8], u[8];
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_epi32(v[2 * k], v[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_epi32(v[2 * k], v[2 * k + 1]);
  }
  for (int k = 0; k < 2; ++k) {
    u[4 * k] = _mm256_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 1] = _mm256_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 2] = _mm256_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
    u[4 * k + 3] = _mm256_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_permute2x128_si256(u[i], u[4 + i], 0x20);
    v[4 + i] = _mm256_permute2x128_si256(u[i], u[4 + i], 0x31);
  }
}

// v[j] (j < 4) holds the 4 bytes of 8 rows in chunk j; afterwards v[i] holds rows i
// (low half) and 4 + i (high half), each as its 4 bytes of the 4 chunks in order.
inline void TransposeDwords8x4(__m256i v[4]) {
  const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
  v[0] = _mm256_unpacklo_epi64(t0, t2);
  v[1] = _mm256_unpackhi_epi64(t0, t2);
  v[2] = _mm256_unpacklo_epi64(t1, t3);
  v[3] = _mm256_unpackhi_epi64(t1, t3);
}

// A row's 32 bytes of an int8 block (q + 128, columns in order) as its levels q:
// columns 0–15 in lo, 16–31 in hi.
inline void Int8Columns(__m256i row, __m128i& lo, __m128i& hi) {
  const __m256i q = _mm256_xor_si256(row, _mm256_set1_epi8(static_cast<char>(0x80)));
  lo = _mm256_castsi256_si128(q);
  hi = _mm256_extracti128_si256(q, 1);
}

// A row's 16 bytes of an int4 block (chunk j's byte i holds columns 8j + i in its low
// nibble and 8j + 4 + i in its high one, each q + 8) as its levels q in column order:
// columns 0–15 in lo, 16–31 in hi.
inline void Int4Columns(__m128i row, __m128i& lo, __m128i& hi) {
  const __m128i nibble = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
  const __m128i low = _mm_and_si128(row, nibble), high = _mm_and_si128(_mm_srli_epi16(row, 4), nibble);
  lo = _mm_sub_epi8(_mm_unpacklo_epi32(low, high), eight);
  hi = _mm_sub_epi8(_mm_unpackhi_epi32(low, high), eight);
}

}  // namespace
}  // namespace tandem::rt::kernels
