#pragma once

// The SIMD body of the quantized kernels, included by quantized_avx2.cpp and
// quantized_vnni.cpp, each compiling it for its own target (everything here has
// internal linkage, so the two instantiations never mix). See quantized_rows.hpp
// for the order computed.
#include <immintrin.h>

#include <cstdint>

#include "runtime/kernels/quantized_rows.hpp"

namespace tandem::rt::kernels {

namespace {

constexpr std::int64_t kAheadBytes = 16384;  // prefetch distance into L2, as the dense kernels

// Lane sums of 32 unsigned × 32 signed bytes: lane l = Σ of products 4l … 4l+3.
template <bool kVnni>
inline __m256i LaneSums(__m256i u, __m256i s) {
  if constexpr (kVnni) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);  // instantiated only in quantized_vnni.cpp
  } else {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
}

inline float ReduceEight(__m256 acc) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));  // l + 4
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));                                           // l + 2
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));                     // l + 1
}

// R weight rows against B inputs (R = 1 or B = 1): each unpacked block of weights
// serves B inputs, each input block R rows, and the R·B independent accumulator
// chains keep the multiply-adds from waiting on each other. An int4 row's 16
// bytes per block unpack to its even columns then its odd ones, offset by 8
// (n ^ 8 = level + 8), which the prepared inputs' sums8 takes back out.
template <bool kInt4, bool kVnni, int R, int B>
inline void Tile(const std::uint8_t* w, std::int64_t row_bytes, const float* ws, std::int64_t groups, std::int64_t cols,
                 int group, const QuantizedInput* in, float* y, std::int64_t y_stride) {
  __m256 acc[R][B];
  for (int r = 0; r < R; ++r) {
    for (int b = 0; b < B; ++b) acc[r][b] = _mm256_setzero_ps();
  }
  const char* ahead = reinterpret_cast<const char*>(w) + kAheadBytes;
  const std::int64_t per_group = group / kInputBlock;
  constexpr std::int64_t kBlockBytes = kInt4 ? 16 : 32;
  (void)cols;
  for (std::int64_t g = 0; g < groups; ++g) {
    for (std::int64_t k = g * per_group; k < (g + 1) * per_group; ++k) {
      // The tile reads R · kBlockBytes per block: prefetch as much, kAheadBytes on.
      for (std::int64_t p = 0; p < R * kBlockBytes; p += 64) {
        if ((k * R * kBlockBytes + p) % 64 == 0 || R * kBlockBytes >= 64) _mm_prefetch(ahead + k * R * kBlockBytes + p, _MM_HINT_T1);
      }
      __m256i u[R], wabs[R];
      for (int r = 0; r < R; ++r) {
        const std::uint8_t* row = w + r * row_bytes;
        if constexpr (kInt4) {
          const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k * 16));
          const __m128i low = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(0x08);
          const __m128i even = _mm_xor_si128(_mm_and_si128(packed, low), eight);
          const __m128i odd = _mm_xor_si128(_mm_and_si128(_mm_srli_epi16(packed, 4), low), eight);
          u[r] = _mm256_inserti128_si256(_mm256_castsi128_si256(even), odd, 1);
          wabs[r] = u[r];
        } else {
          u[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + k * 32));
          wabs[r] = _mm256_abs_epi8(u[r]);  // the signs go onto the inputs below
        }
      }
      for (int b = 0; b < B; ++b) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in[b].q + k * kInputBlock));
        const float d = in[b].d[k];
        __m256i offset = _mm256_setzero_si256();
        if constexpr (kInt4) offset = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in[b].sums8 + k * 8));
        for (int r = 0; r < R; ++r) {
          const __m256i sums = kInt4 ? _mm256_sub_epi32(LaneSums<kVnni>(u[r], x), offset)
                                     : LaneSums<kVnni>(wabs[r], _mm256_sign_epi8(x, u[r]));
          acc[r][b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_set1_ps(ws[r * groups + g] * d), acc[r][b]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int b = 0; b < B; ++b) y[b * y_stride + r] = ReduceEight(acc[r][b]);
  }
}

template <bool kInt4, bool kVnni>
void Rows(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
          std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end) {
  const std::int64_t row_bytes = kInt4 ? cols / 2 : cols, groups = cols / group;
  std::int64_t b = 0;
  for (; b + 4 <= batch; b += 4) {
    for (std::int64_t o = begin; o < end; ++o) {
      Tile<kInt4, kVnni, 1, 4>(values + o * row_bytes, row_bytes, scales + o * groups, groups, cols, group, inputs + b,
                               y + b * y_stride + o, y_stride);
    }
  }
  for (; b < batch; ++b) {
    std::int64_t o = begin;
    for (; o + 4 <= end; o += 4) {
      Tile<kInt4, kVnni, 4, 1>(values + o * row_bytes, row_bytes, scales + o * groups, groups, cols, group, inputs + b,
                               y + b * y_stride + o, y_stride);
    }
    for (; o < end; ++o) {
      Tile<kInt4, kVnni, 1, 1>(values + o * row_bytes, row_bytes, scales + o * groups, groups, cols, group, inputs + b,
                               y + b * y_stride + o, y_stride);
    }
  }
}

}  // namespace

}  // namespace tandem::rt::kernels
