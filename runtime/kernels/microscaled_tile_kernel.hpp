// What the FP4 tile kernels of microscaled_avx512.cpp (AVX-512 BW) and microscaled_vnni.cpp
// (VNNI + GFNI) share: the block sums' scaling and accumulation, and the batch dispatch.
// Include it from those two files only, after <immintrin.h> and the target pragma:
// everything here has internal linkage, so each gets its own copy compiled for its target,
// and it uses no standard-library template (whose one instantiation the linker would share
// between targets).
#pragma once

#include <cstdint>

#include "runtime/kernels/microscaled_rows.hpp"

namespace tandem::rt::kernels {
namespace {

// The E8M0 scales of 16 rows as fp32 (code 0 is 2^-127, below fp32's normals).
inline __m512 TileWeightScales(const std::uint8_t* scales16) {
  const __m512i codes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales16)));
  const __m512 w_scale = _mm512_castsi512_ps(_mm512_slli_epi32(codes, 23));
  return _mm512_mask_mov_ps(w_scale, _mm512_cmpeq_epi32_mask(codes, _mm512_setzero_si512()), _mm512_set1_ps(0x1p-127f));
}

// A block's exact sums of 16 rows (lane r: row r) times the scales, added to an fp32 running
// sum in block order (the reference's accumulation).
struct TileF32Sum {
  __m512 acc;
  void Add(__m512i sums, float a_scale, const std::uint8_t* scales16) {
    const __m512 partial = _mm512_mul_ps(_mm512_cvtepi32_ps(sums), _mm512_set1_ps(0x1p-10f));
    acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_mul_ps(partial, _mm512_set1_ps(a_scale)), TileWeightScales(scales16)));
  }
};

// The same terms (the fp32 block sum, times the scales in double) added in double.
struct TileF64Sum {
  __m512d low, high;
  void Add(__m512i sums, float a_scale, const std::uint8_t* scales16) {
    const __m512 partial = _mm512_mul_ps(_mm512_cvtepi32_ps(sums), _mm512_set1_ps(0x1p-10f));
    const __m512 w_scale = TileWeightScales(scales16);
    const __m512d a = _mm512_set1_pd(a_scale);
    low = _mm512_add_pd(low, _mm512_mul_pd(_mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(partial)), a),
                                           _mm512_cvtps_pd(_mm512_castps512_ps256(w_scale))));
    const __m256 partial_high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(partial), 1));
    const __m256 w_scale_high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(w_scale), 1));
    high = _mm512_add_pd(high, _mm512_mul_pd(_mm512_mul_pd(_mm512_cvtps_pd(partial_high), a), _mm512_cvtps_pd(w_scale_high)));
  }
};

inline void Reset(TileF32Sum& s) { s.acc = _mm512_setzero_ps(); }
inline void Reset(TileF64Sum& s) { s.low = s.high = _mm512_setzero_pd(); }
inline void Store(const TileF32Sum& s, float* out) { _mm512_storeu_ps(out, s.acc); }
inline void Store(const TileF64Sum& s, double* out) {
  _mm512_storeu_pd(out, s.low);
  _mm512_storeu_pd(out + 8, s.high);
}

// Any batch, four inputs at a time: `Tile<B, Sum>::Run(tile, blocks, tile_scales, inputs,
// stream_end, out)` computes B inputs (a tile's weights decoded once for all of them).
template <template <int, class> class Tile, class Sum, class Out>
void Tile16Batch(const std::uint8_t* tile, std::int64_t blocks, const std::uint8_t* tile_scales, const Fp4TileInput* inputs,
                 std::int64_t batch, const std::uint8_t* stream_end, Out* out) {
  std::int64_t j = 0;
  for (; j + 4 <= batch; j += 4) Tile<4, Sum>::Run(tile, blocks, tile_scales, inputs + j, stream_end, out + 16 * j);
  switch (batch - j) {
    case 3:
      Tile<3, Sum>::Run(tile, blocks, tile_scales, inputs + j, stream_end, out + 16 * j);
      break;
    case 2:
      Tile<2, Sum>::Run(tile, blocks, tile_scales, inputs + j, stream_end, out + 16 * j);
      break;
    case 1:
      Tile<1, Sum>::Run(tile, blocks, tile_scales, inputs + j, stream_end, out + 16 * j);
      break;
    default:
      break;
  }
}

}  // namespace
}  // namespace tandem::rt::kernels
