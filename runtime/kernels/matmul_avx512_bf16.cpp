// bf16 rows by dot products of bf16 pairs (AVX-512 BF16, vdpbf16ps), for every
// batch size. One instruction multiplies 32 weights by 32 inputs and adds the pairs'
// products into 16 fp32 lanes: twice the multiply-adds of an fp32 FMA, and the
// weights need no widening. The price is that the inputs are rounded to bf16 (once
// per product, by PrepareBf16InputDpbf16), so this path's results differ from the
// exact-fp32-input paths' by up to 2^-9 of Σ|w·x| (see dense_rows.hpp). Within the
// path, a (row, input) pair is always computed by the same instruction sequence on
// its own accumulator, whatever tile it falls in: batch and thread count never
// change a row's bits. Compiled for that target only through the pragma; nothing
// here may be reached unless DetectedIsa() says the CPU has it. No standard-library
// templates in this file (see matmul_avx2.cpp).
#if !defined(__clang__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c")
#endif
// GCC 12's own AVX-512 headers trip these warnings (their _mm512_undefined_* helpers).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <cstdint>

#include <immintrin.h>

#include "runtime/kernels/dense_rows.hpp"
#include "runtime/kernels/prefetch.hpp"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c"))), apply_to = function)
#endif

#include "runtime/kernels/reduce_avx512.hpp"

namespace tandem::rt::kernels {

namespace {

constexpr std::int64_t kBlock = 32;  // bf16 values per register

inline __m512 DotPairs(__m512 acc, __m512i w, __m512i x) { return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)x); }

// R output rows × B inputs. `x` holds the inputs as bf16, `xs` values apart, zero
// past `cols` up to a whole block; the weights' last partial block is read masked,
// so it adds exact zeros past `cols`.
template <int R, int B>
inline void Tile(const std::uint16_t* w, std::int64_t cols, const std::uint16_t* x, std::int64_t xs, float* y, std::int64_t y_stride,
                 const char* stop, const NextRange& next) {
  __m512 acc[R][B];
  for (int r = 0; r < R; ++r) {
    for (int b = 0; b < B; ++b) acc[r][b] = _mm512_setzero_ps();
  }
  const std::int64_t full = cols - cols % kBlock;
  // Per block the tile reads R · 64 bytes: prefetch as many, kAheadBytes on, up to
  // `stop` (the end of the caller's rows), then on into `next`.
  constexpr std::int64_t kStep = R * kBlock * 2;
  const char* ahead = reinterpret_cast<const char*>(w) + kAheadBytes;
  const std::int64_t room = stop - reinterpret_cast<const char*>(w) - kAheadBytes;
  for (std::int64_t i = 0; i < full; i += kBlock) {
    PrefetchAhead(ahead, room, next, i / kBlock * kStep, kStep);
    __m512i wv[R];
    for (int r = 0; r < R; ++r) wv[r] = _mm512_loadu_si512(w + r * cols + i);
    for (int b = 0; b < B; ++b) {
      const __m512i xv = _mm512_loadu_si512(x + b * xs + i);
      for (int r = 0; r < R; ++r) acc[r][b] = DotPairs(acc[r][b], wv[r], xv);
    }
  }
  if (full < cols) {
    const __mmask32 mask = static_cast<__mmask32>((1ull << (cols - full)) - 1);
    __m512i wv[R];
    for (int r = 0; r < R; ++r) wv[r] = _mm512_maskz_loadu_epi16(mask, w + r * cols + full);
    for (int b = 0; b < B; ++b) {
      const __m512i xv = _mm512_loadu_si512(x + b * xs + full);
      for (int r = 0; r < R; ++r) acc[r][b] = DotPairs(acc[r][b], wv[r], xv);
    }
  }
  if constexpr (R == 4 && B == 4) {
    // The sixteen sums reduced together (ReduceSixteen: lane 4b + r holds row r, input b).
    const __m512 sum = ReduceSixteen(&acc[0][0]);
    StoreQuarters(sum, y, y_stride);
  } else {
    for (int r = 0; r < R; ++r) {
      for (int b = 0; b < B; ++b) y[b * y_stride + r] = ReduceAvx512(acc[r][b]);
    }
  }
}

// Rows [first, last) for B inputs: four rows per tile, then one at a time. One input
// reads one row at a time: one stream from memory per tile, as fast as the AVX2 kernel
// for decode (BM_ExpertProducts, Zen 4), where four rows' streams of whole cache lines
// were 15-25% slower and eight slower still.
template <int B>
inline void Pass(const std::uint16_t* w, std::int64_t cols, const std::uint16_t* x, std::int64_t xs, float* y, std::int64_t y_stride,
                 std::int64_t first, std::int64_t last, const char* stop, const NextRange& next) {
  std::int64_t o = first;
  constexpr int kRows = B == 1 ? 1 : 4;
  for (; o + kRows <= last; o += kRows) Tile<kRows, B>(w + o * cols, cols, x, xs, y + o, y_stride, stop, next);
  for (; o < last; ++o) Tile<1, B>(w + o * cols, cols, x, xs, y + o, y_stride, stop, next);
}

}  // namespace

std::int64_t Bf16DotStride(std::int64_t cols) { return (cols + kBlock - 1) / kBlock * kBlock; }

void PrepareBf16InputDpbf16(const float* x, std::int64_t batch, std::int64_t cols, std::uint16_t* out) {
  const std::int64_t xs = Bf16DotStride(cols);
  for (std::int64_t b = 0; b < batch; ++b) {
    const float* in = x + b * cols;
    std::uint16_t* o = out + b * xs;
    std::int64_t i = 0;
    for (; i + 32 <= cols; i += 32) {
      // Round to nearest even (as F32ToBf16 for every finite value).
      const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(in + i + 16), _mm512_loadu_ps(in + i));
      _mm512_storeu_si512(o + i, (__m512i)v);
    }
    if (i < cols) {
      const __mmask16 lo = static_cast<__mmask16>(cols - i >= 16 ? 0xFFFF : (1u << (cols - i)) - 1);
      const __mmask16 hi = static_cast<__mmask16>(cols - i <= 16 ? 0 : (1u << (cols - i - 16)) - 1);
      const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, in + i + 16), _mm512_maskz_loadu_ps(lo, in + i));
      _mm512_storeu_si512(o + i, (__m512i)v);  // zeros up to the stride
    }
  }
}

bool RowsBf16Dpbf16(const std::uint16_t* w, std::int64_t cols, const std::uint16_t* x, std::int64_t batch, float* y, std::int64_t y_stride,
                    std::int64_t begin, std::int64_t end, const RowStream& stream) {
  if (batch <= 0 || begin >= end) return false;
  const std::int64_t xs = Bf16DotStride(cols);
  const char* stop = reinterpret_cast<const char*>(w + end * cols);
  // As the AVX2 kernel: the last pass's tiles prefetch on into the next range's head
  // when their steps meet `stop` exactly (whole blocks) and the range is longer than
  // the prefetch distance; else the next range warms its own head.
  const bool prefetches_next = stream.next != nullptr && stream.next_bytes > 0 && cols % kBlock == 0 &&
                               stop - reinterpret_cast<const char*>(w + begin * cols) >= kAheadBytes;
  const NextRange none{}, next_head = HeadOf(stream.next, stream.next_bytes);
  // Several inputs pass over blocks of about 64 KiB of rows, which stay in L2: the
  // weights come from memory once, the inputs from cache once per block. One input
  // passes once.
  const std::int64_t row_bytes = cols * 2 > 0 ? cols * 2 : 1;
  std::int64_t block = (64 * 1024 / row_bytes) / 4 * 4;
  if (block < 4) block = 4;
  if (batch == 1) block = end - begin;
  for (std::int64_t first = begin; first < end; first += block) {
    const std::int64_t last = end - first < block ? end : first + block;
    if (first != begin || !stream.head_warm) PrefetchHead(w + first * cols, stop);
    const bool final_block = last == end;
    std::int64_t b = 0;
    for (; b + 4 <= batch; b += 4) {
      const NextRange& next = prefetches_next && final_block && b + 4 == batch ? next_head : none;
      Pass<4>(w, cols, x + b * xs, xs, y + b * y_stride, y_stride, first, last, stop, next);
    }
    // The last one to three inputs together, so the weights are read once for them too.
    const NextRange& next = prefetches_next && final_block ? next_head : none;
    const std::uint16_t* xb = x + b * xs;
    float* yb = y + b * y_stride;
    switch (batch - b) {
      case 3:
        Pass<3>(w, cols, xb, xs, yb, y_stride, first, last, stop, next);
        break;
      case 2:
        Pass<2>(w, cols, xb, xs, yb, y_stride, first, last, stop, next);
        break;
      case 1:
        Pass<1>(w, cols, xb, xs, yb, y_stride, first, last, stop, next);
        break;
      default:
        break;
    }
  }
  return prefetches_next;
}

}  // namespace tandem::rt::kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
