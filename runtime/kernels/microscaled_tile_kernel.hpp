// The FP4 tile kernel's body, compiled twice: by microscaled_avx512.cpp for AVX-512 BW
// (multiply-add, then add) and by microscaled_vnni.cpp for AVX-512 VNNI (vpdpwssd), each
// under its own target. Include it from those two files only, after <immintrin.h> and
// the target pragma: everything here has internal linkage, so each gets its own copy, and
// it uses no standard-library template (whose one instantiation the linker would share
// between targets).
#pragma once

#include <cstdint>

#include "runtime/kernels/microscaled_rows.hpp"
#include "runtime/kernels/prefetch.hpp"

namespace tandem::rt::kernels {
namespace {

// 2 × E2M1 by code as int16 lanes, the table repeated: 0, 0.5, 1, 1.5, 2, 3, 4, 6, then negated.
inline __m512i TileTable() {
  return _mm512_set_epi16(-12, -8, -6, -4, -3, -2, -1, 0, 12, 8, 6, 4, 3, 2, 1, 0, -12, -8, -6, -4, -3, -2, -1, 0, 12, 8, 6, 4, 3, 2, 1, 0);
}

// acc + (w · x) summed by pairs of int16 lanes into int32 lanes.
template <bool kVnni>
inline __m512i DotAdd(__m512i acc, __m512i w, __m512i x) {
  if constexpr (kVnni) {
    return _mm512_dpwssd_epi32(acc, w, x);
  } else {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(w, x));
  }
}

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

// One tile of 16 rows against B inputs (FP4 tile layout: microscaled_rows.hpp). Each group
// of 32 bytes is decoded once for all B inputs; per input, four independent int32 chains
// (weights of the low or high nibbles, times the input's high or low half) keep the
// multiply-adds from waiting on one another.
template <bool kVnni, int B, class Sum, class Out>
void Tile16(const std::uint8_t* tile, std::int64_t blocks, const std::uint8_t* tile_scales, const Fp4TileInput* inputs,
            const std::uint8_t* stream_end, Out* out) {
  const __m512i table = TileTable();
  Sum sums[B];
  for (int j = 0; j < B; ++j) Reset(sums[j]);
  // One input alone gets twice the chains (even and odd groups apart): its multiply-adds
  // would otherwise wait on each other's latency.
  constexpr int kSets = B == 1 ? 2 : 1;
  for (std::int64_t b = 0; b < blocks; ++b) {
    __m512i high_lo[kSets][B], high_hi[kSets][B], low_lo[kSets][B], low_hi[kSets][B];
    for (int k = 0; k < kSets; ++k) {
      for (int j = 0; j < B; ++j) high_lo[k][j] = high_hi[k][j] = low_lo[k][j] = low_hi[k][j] = _mm512_setzero_si512();
    }
    const std::uint8_t* at = tile + b * 256;
    // The tiles of a thread's share are one contiguous stream: keep kAheadBytes of it in
    // flight, as far as the share goes.
    if (at + kAheadBytes < stream_end) PrefetchRange(reinterpret_cast<const char*>(at + kAheadBytes), 256);
    for (int g = 0; g < 8; ++g) {
      const int k = g % kSets;
      // The table's index is a lane's low 5 bits, and its two halves are the same: a byte
      // indexes its low nibble's weight as it is, its high nibble's once shifted down.
      const __m512i bytes = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + 32 * g)));
      const __m512i w_lo = _mm512_permutexvar_epi16(bytes, table);
      const __m512i w_hi = _mm512_permutexvar_epi16(_mm512_srli_epi16(bytes, 4), table);
      for (int j = 0; j < B; ++j) {
        const std::int32_t* x = inputs[j].pairs + (b * 8 + g) * 4;
        high_lo[k][j] = DotAdd<kVnni>(high_lo[k][j], w_lo, _mm512_set1_epi32(x[0]));
        high_hi[k][j] = DotAdd<kVnni>(high_hi[k][j], w_hi, _mm512_set1_epi32(x[1]));
        low_lo[k][j] = DotAdd<kVnni>(low_lo[k][j], w_lo, _mm512_set1_epi32(x[2]));
        low_hi[k][j] = DotAdd<kVnni>(low_hi[k][j], w_hi, _mm512_set1_epi32(x[3]));
      }
    }
    for (int j = 0; j < B; ++j) {
      __m512i high = _mm512_add_epi32(high_lo[0][j], high_hi[0][j]);
      __m512i low = _mm512_add_epi32(low_lo[0][j], low_hi[0][j]);
      for (int k = 1; k < kSets; ++k) {
        high = _mm512_add_epi32(high, _mm512_add_epi32(high_lo[k][j], high_hi[k][j]));
        low = _mm512_add_epi32(low, _mm512_add_epi32(low_lo[k][j], low_hi[k][j]));
      }
      sums[j].Add(_mm512_add_epi32(_mm512_slli_epi32(high, 9), low), inputs[j].a_scale[b], tile_scales + 16 * b);
    }
  }
  for (int j = 0; j < B; ++j) Store(sums[j], out + 16 * j);
}

// Any batch, four inputs at a time.
template <bool kVnni, class Sum, class Out>
void Tile16Batch(const std::uint8_t* tile, std::int64_t blocks, const std::uint8_t* tile_scales, const Fp4TileInput* inputs,
                 std::int64_t batch, const std::uint8_t* stream_end, Out* out) {
  std::int64_t j = 0;
  for (; j + 4 <= batch; j += 4) Tile16<kVnni, 4, Sum>(tile, blocks, tile_scales, inputs + j, stream_end, out + 16 * j);
  switch (batch - j) {
    case 3:
      Tile16<kVnni, 3, Sum>(tile, blocks, tile_scales, inputs + j, stream_end, out + 16 * j);
      break;
    case 2:
      Tile16<kVnni, 2, Sum>(tile, blocks, tile_scales, inputs + j, stream_end, out + 16 * j);
      break;
    case 1:
      Tile16<kVnni, 1, Sum>(tile, blocks, tile_scales, inputs + j, stream_end, out + 16 * j);
      break;
    default:
      break;
  }
}

}  // namespace
}  // namespace tandem::rt::kernels
