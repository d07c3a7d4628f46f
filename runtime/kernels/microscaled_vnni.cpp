// DeepSeek V4.1's FP4 tiles by bytes (microscaled_rows.hpp): GFNI splits a group's 32 bytes
// into their low and high nibbles (one affine bit shuffle per byte, each half of the
// register its own), a byte shuffle maps a nibble to the unsigned weight 2w + 12, and VNNI's
// 4-byte dot products take the input as three signed byte parts, so a 64-weight row group
// costs two instructions to decode and three to multiply. The same integers as
// microscaled_avx512.cpp, so the same bits. Only reached when HasAvx512VnniGfni().
#if !defined(__clang__)
#pragma GCC target("avx2,avx512f,avx512bw,avx512vl,avx512vnni,gfni")
// GCC 12's own AVX-512 headers trip these (their _mm512_undefined_* helpers).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include "runtime/kernels/microscaled_rows.hpp"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,avx512f,avx512bw,avx512vl,avx512vnni,gfni"))), apply_to = function)
#endif

// After the target: these are compiled for it.
#include "runtime/kernels/microscaled_tile_kernel.hpp"
#include "runtime/kernels/prefetch.hpp"

namespace tandem::rt::kernels {

namespace {

template <int B, class Sum>
struct ByteTile {
  template <class Out>
  static void Run(const std::uint8_t* tile, std::int64_t blocks, const std::uint8_t* tile_scales, const Fp4TileInput* inputs,
                  const std::uint8_t* stream_end, Out* out) {
    // 2w + 12 by E2M1 code (2w: 0, 1, 2, 3, 4, 6, 8, 12, then negated), in every 128-bit lane.
    const __m512i weights = _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    // Bit i of the result is the parity of matrix byte 7 − i and the input byte: the low half
    // takes bits 0–3 where they are, the high half bits 4–7 down to 0–3.
    constexpr long long kLowNibble = 0x0102040800000000LL, kHighNibble = 0x1020408000000000LL;
    const __m512i split =
        _mm512_set_epi64(kHighNibble, kHighNibble, kHighNibble, kHighNibble, kLowNibble, kLowNibble, kLowNibble, kLowNibble);
    Sum sums[B];
    for (int j = 0; j < B; ++j) Reset(sums[j]);
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::uint8_t* at = tile + b * 256;
      // The tiles of a thread's share are one contiguous stream: keep kAheadBytes of it in
      // flight, as far as the share goes.
      if (at + kAheadBytes < stream_end) PrefetchRange(reinterpret_cast<const char*>(at + kAheadBytes), 256);
      // Per row half and input: the dot products with the parts a (× 2^14), b (× 2^7), c.
      __m512i part_a[2][B], part_b[2][B], part_c[2][B];
      for (int h = 0; h < 2; ++h) {
        for (int j = 0; j < B; ++j) part_a[h][j] = part_b[h][j] = part_c[h][j] = _mm512_setzero_si512();
      }
      for (int q = 0; q < 4; ++q) {
        __m512i w[2];
        for (int h = 0; h < 2; ++h) {
          const __m512i bytes = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + (2 * q + h) * 32)));
          w[h] = _mm512_shuffle_epi8(weights, _mm512_gf2p8affine_epi64_epi8(bytes, split, 0));
        }
        for (int j = 0; j < B; ++j) {
          const std::int8_t* x = inputs[j].bytes + (b * 4 + q) * 3 * 64;
          const __m512i xa = _mm512_loadu_si512(x), xb = _mm512_loadu_si512(x + 64), xc = _mm512_loadu_si512(x + 128);
          for (int h = 0; h < 2; ++h) {
            part_a[h][j] = _mm512_dpbusd_epi32(part_a[h][j], w[h], xa);
            part_b[h][j] = _mm512_dpbusd_epi32(part_b[h][j], w[h], xb);
            part_c[h][j] = _mm512_dpbusd_epi32(part_c[h][j], w[h], xc);
          }
        }
      }
      for (int j = 0; j < B; ++j) {
        __m512i half[2];
        for (int h = 0; h < 2; ++h) {
          half[h] =
              _mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(part_a[h][j], 14), _mm512_slli_epi32(part_b[h][j], 7)), part_c[h][j]);
        }
        // Lane r < 8 of a half: row r's even columns, lane 8 + r its odd ones.
        __m512i rows = _mm512_add_epi32(_mm512_shuffle_i64x2(half[0], half[1], 0x44), _mm512_shuffle_i64x2(half[0], half[1], 0xee));
        rows = _mm512_sub_epi32(rows, _mm512_set1_epi32(inputs[j].offset[b]));  // the weights' + 12
        sums[j].Add(rows, inputs[j].a_scale[b], tile_scales + 16 * b);
      }
    }
    for (int j = 0; j < B; ++j) Store(sums[j], out + 16 * j);
  }
};

}  // namespace

void Fp4Tile16Vnni(const std::uint8_t* tile, std::int64_t blocks, const std::uint8_t* tile_scales, const Fp4TileInput* inputs,
                   std::int64_t batch, const std::uint8_t* stream_end, float* out) {
  Tile16Batch<ByteTile, TileF32Sum>(tile, blocks, tile_scales, inputs, batch, stream_end, out);
}

void Fp4Tile16F64Vnni(const std::uint8_t* tile, std::int64_t blocks, const std::uint8_t* tile_scales, const Fp4TileInput* inputs,
                      std::int64_t batch, const std::uint8_t* stream_end, double* out) {
  Tile16Batch<ByteTile, TileF64Sum>(tile, blocks, tile_scales, inputs, batch, stream_end, out);
}

}  // namespace tandem::rt::kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
