#pragma once

// The SIMD body of the quantized kernels, included by quantized_avx2.cpp and
// quantized_vnni.cpp, each compiling it for its own target (everything here has
// internal linkage, so the two instantiations never mix). See quantized_rows.hpp
// for the order computed.
#include <immintrin.h>

#include <cstdint>

#include "runtime/kernels/prefetch.hpp"
#include "runtime/kernels/quantized_rows.hpp"

namespace tandem::rt::kernels {

namespace {

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

// int8: R weight rows against B inputs (R = 1 or B = 1): each block of weights
// serves B inputs, each input block R rows, and the R·B independent accumulator
// chains keep the multiply-adds from waiting on each other.
template <bool kVnni, int R, int B>
inline void Tile8(const std::uint8_t* w, std::int64_t row_bytes, const float* ws, std::int64_t groups, int group,
                  const QuantizedInput* in, float* y, std::int64_t y_stride) {
  __m256 acc[R][B];
  for (int r = 0; r < R; ++r) {
    for (int b = 0; b < B; ++b) acc[r][b] = _mm256_setzero_ps();
  }
  const char* ahead = reinterpret_cast<const char*>(w) + kAheadBytes;
  const std::int64_t per_group = group / kInputBlock;
  for (std::int64_t g = 0; g < groups; ++g) {
    for (std::int64_t k = g * per_group; k < (g + 1) * per_group; ++k) {
      for (std::int64_t at = 0; at < R * 32; at += 64) _mm_prefetch(ahead + k * R * 32 + at, _MM_HINT_T1);
      __m256i u[R], wabs[R];
      for (int r = 0; r < R; ++r) {
        u[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + r * row_bytes + k * 32));
        wabs[r] = _mm256_abs_epi8(u[r]);  // the signs go onto the inputs below
      }
      for (int b = 0; b < B; ++b) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in[b].q + k * kInputBlock));
        const float d = in[b].d[k];
        for (int r = 0; r < R; ++r) {
          const __m256i sums = LaneSums<kVnni>(wabs[r], _mm256_sign_epi8(x, u[r]));
          acc[r][b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_set1_ps(ws[r * groups + g] * d), acc[r][b]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int b = 0; b < B; ++b) y[b * y_stride + r] = ReduceEight(acc[r][b]);
  }
}

// int4: R weight rows against B inputs, a pair of blocks (32 packed bytes) at a
// time: the low nibbles are the pair's even columns, the high ones its odd columns,
// each as [first block | second block], matching the prepared inputs; offset by 8
// (n ^ 8 = level + 8), which the inputs' sums take back out.
template <bool kVnni, int R, int B>
inline void Tile4(const std::uint8_t* w, std::int64_t row_bytes, const float* ws, std::int64_t groups, std::int64_t blocks,
                  int group, const QuantizedInput* in, float* y, std::int64_t y_stride) {
  __m256 acc_even[R][B], acc_odd[R][B];
  for (int r = 0; r < R; ++r) {
    for (int b = 0; b < B; ++b) acc_even[r][b] = acc_odd[r][b] = _mm256_setzero_ps();
  }
  const char* ahead = reinterpret_cast<const char*>(w) + kAheadBytes;
  const std::int64_t per_group = group / kInputBlock, pairs = (blocks + 1) / 2;
  const __m256i offset8 = _mm256_set1_epi8(static_cast<char>(0x88)), low = _mm256_set1_epi8(0x0F);
  std::int64_t g0 = 0, in_group = 0;  // the first block's group, and its index within it
  for (std::int64_t p = 0; p < pairs; ++p) {
    const bool whole = 2 * p + 1 < blocks;
    const std::int64_t g1 = in_group + 1 < per_group ? g0 : g0 + 1;
    for (std::int64_t at = 0; at < R * 32; at += 64) _mm_prefetch(ahead + p * R * 32 + at, _MM_HINT_T1);
    __m256i even[R], odd[R];
    __m256 wscale[R];
    for (int r = 0; r < R; ++r) {
      const std::uint8_t* row = w + r * row_bytes + p * 32;
      const __m256i v = _mm256_xor_si256(whole ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row))
                                                : _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row))),
                                          offset8);
      even[r] = _mm256_and_si256(v, low);
      odd[r] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
      const float* scales = ws + r * groups;
      wscale[r] = _mm256_set_m128(_mm_set1_ps(scales[whole ? g1 : g0]), _mm_set1_ps(scales[g0]));
    }
    for (int b = 0; b < B; ++b) {
      const std::int8_t* q = in[b].q + p * 64;
      const __m256i x_even = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
      const __m256i x_odd = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32));
      const __m256i off_even = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in[b].sums + p * 16));
      const __m256i off_odd = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in[b].sums + p * 16 + 8));
      const __m256 d = _mm256_loadu_ps(in[b].pair_d + p * 8);
      for (int r = 0; r < R; ++r) {
        const __m256 scale = _mm256_mul_ps(wscale[r], d);
        const __m256i se = _mm256_sub_epi32(LaneSums<kVnni>(even[r], x_even), off_even);
        const __m256i so = _mm256_sub_epi32(LaneSums<kVnni>(odd[r], x_odd), off_odd);
        acc_even[r][b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(se), scale, acc_even[r][b]);
        acc_odd[r][b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(so), scale, acc_odd[r][b]);
      }
    }
    // Advance to the next pair's first block.
    for (int step = 0; step < 2; ++step) {
      if (++in_group == per_group) {
        in_group = 0;
        ++g0;
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int b = 0; b < B; ++b) y[b * y_stride + r] = ReduceEight(_mm256_add_ps(acc_even[r][b], acc_odd[r][b]));
  }
}

template <bool kVnni>
void RowsInt4(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
              std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end) {
  const std::int64_t row_bytes = cols / 2, groups = cols / group, blocks = cols / kInputBlock;
  std::int64_t b = 0;
  for (; b + 4 <= batch; b += 4) {
    for (std::int64_t o = begin; o < end; ++o) {
      Tile4<kVnni, 1, 4>(values + o * row_bytes, row_bytes, scales + o * groups, groups, blocks, group, inputs + b,
                         y + b * y_stride + o, y_stride);
    }
  }
  for (; b < batch; ++b) {
    std::int64_t o = begin;
    // With AVX-512's 32 registers (the VNNI build) four rows' accumulators fit.
    if constexpr (kVnni) {
      for (; o + 4 <= end; o += 4) {
        Tile4<kVnni, 4, 1>(values + o * row_bytes, row_bytes, scales + o * groups, groups, blocks, group, inputs + b,
                           y + b * y_stride + o, y_stride);
      }
    }
    for (; o + 2 <= end; o += 2) {
      Tile4<kVnni, 2, 1>(values + o * row_bytes, row_bytes, scales + o * groups, groups, blocks, group, inputs + b,
                         y + b * y_stride + o, y_stride);
    }
    for (; o < end; ++o) {
      Tile4<kVnni, 1, 1>(values + o * row_bytes, row_bytes, scales + o * groups, groups, blocks, group, inputs + b,
                         y + b * y_stride + o, y_stride);
    }
  }
}

template <bool kVnni>
void RowsInt8(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
              std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end) {
  const std::int64_t groups = cols / group;
  std::int64_t b = 0;
  for (; b + 4 <= batch; b += 4) {
    for (std::int64_t o = begin; o < end; ++o) {
      Tile8<kVnni, 1, 4>(values + o * cols, cols, scales + o * groups, groups, group, inputs + b, y + b * y_stride + o, y_stride);
    }
  }
  for (; b < batch; ++b) {
    std::int64_t o = begin;
    for (; o + 4 <= end; o += 4) {
      Tile8<kVnni, 4, 1>(values + o * cols, cols, scales + o * groups, groups, group, inputs + b, y + b * y_stride + o, y_stride);
    }
    for (; o < end; ++o) {
      Tile8<kVnni, 1, 1>(values + o * cols, cols, scales + o * groups, groups, group, inputs + b, y + b * y_stride + o, y_stride);
    }
  }
}

}  // namespace

}  // namespace tandem::rt::kernels
