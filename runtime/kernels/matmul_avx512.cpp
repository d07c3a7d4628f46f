// The AVX-512 row kernels for fp32 and fp8 weights, and bf16 for two inputs or more
// (see dense_rows.hpp for the order they share): one 16-lane register is exactly the
// sixteen canonical lanes, so inputs stay in their natural order. bf16 for one input
// runs here on Intel only: on AMD's EPYCs (family 25 and 26) widening with vpmovzxwd
// measured 10–20% slower for decode than the AVX2 kernel, which needs no shuffles, while
// on an Emerald Rapids these tiles read a decode step's expert products ~8% faster (matmul.cpp).
// With two inputs or more the 32 registers' tiles, which widen each weight block once
// for all inputs, win (the results are the same bits: same lanes, same order). Compiled
// for that target only through the pragma; nothing here may be reached unless
// DetectedIsa() says the CPU has it. No standard-library templates in this file (see
// matmul_avx2.cpp).
#if !defined(__clang__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
#endif
// GCC 12's own AVX-512 headers trip this warning (their _mm512_undefined_* helpers).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <cstdint>
#include <cstring>

#include <immintrin.h>

#include "runtime/kernels/dense_rows.hpp"
#include "runtime/kernels/prefetch.hpp"
#include "runtime/numeric/dtype.hpp"

// Clang applies `#pragma GCC target` to plain functions only, not to template
// instantiations: give every function from here on the target instead.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c"))), apply_to = function)
#endif

#include "runtime/kernels/reduce_avx512.hpp"

namespace tandem::rt::kernels {

namespace {

constexpr std::int64_t kBlock = 16;
struct F32 {
  using T = float;
  static __m512 Load(const T* p) { return _mm512_loadu_ps(p); }
  static float Scalar(const T* p) { return *p; }
};

// bf16 widened by zero-extending each value into the high half of its lane: the
// sixteen columns land in their canonical lanes, x stays in natural order.
struct Bf16 {
  using T = std::uint16_t;
  static __m512 Load(const T* p) {
    const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  }
  static float Scalar(const T* p) {
    const std::uint32_t bits = static_cast<std::uint32_t>(*p) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
};

// As in matmul_avx2.cpp: e4m3 bits shifted into a half is the value / 256.
struct Fp8 {
  using T = std::uint8_t;
  static __m512 Load(const T* p) {
    const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i half = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x7F)), 7),
                                         _mm256_slli_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x80)), 8));
    return _mm512_cvtph_ps(half);
  }
  static float Scalar(const T* p) { return F8E4M3ToF32(*p) * (1.0f / 256.0f); }
};

template <class F>
inline float ReduceWithTail(__m512 acc, const typename F::T* w, const float* x, std::int64_t from, std::int64_t cols) {
  if (from == cols) return ReduceAvx512(acc);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc);
  for (std::int64_t i = from, l = 0; i < cols; ++i, ++l) lanes[l] = __builtin_fmaf(F::Scalar(w + i), x[i], lanes[l]);
  return ReduceLanes(lanes);
}

template <class F, int R, int B>
inline void Tile(const typename F::T* w, std::int64_t cols, const float* x, float* y, std::int64_t y_stride, const char* stop,
                 const NextRange& next = {}) {
  __m512 acc[R][B];
  for (int r = 0; r < R; ++r) {
    for (int b = 0; b < B; ++b) acc[r][b] = _mm512_setzero_ps();
  }
  const std::int64_t full = cols - cols % kBlock;
  // Per block of 16 columns the tile reads R · 16 values: prefetch as many bytes,
  // kAheadBytes on (its rows are contiguous), never past `stop`, the end of the
  // caller's rows, but from there on into `next` if the caller named it.
  constexpr std::int64_t kStep = R * kBlock * static_cast<std::int64_t>(sizeof(typename F::T));
  const char* ahead = reinterpret_cast<const char*>(w) + kAheadBytes;
  const std::int64_t room = stop - reinterpret_cast<const char*>(w) - kAheadBytes;
  for (std::int64_t i = 0; i < full; i += kBlock) {
    const std::int64_t at = i / kBlock * kStep;
    // Under a line a block: one prefetch every other block.
    if (kStep >= 64 || at % 64 == 0) PrefetchAhead(ahead, room, next, at, kStep);
    __m512 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = F::Load(w + r * cols + i);
    for (int b = 0; b < B; ++b) {
      const __m512 xv = _mm512_loadu_ps(x + b * cols + i);
      for (int r = 0; r < R; ++r) acc[r][b] = _mm512_fmadd_ps(wv[r], xv, acc[r][b]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int b = 0; b < B; ++b) y[b * y_stride + r] = ReduceWithTail<F>(acc[r][b], w + r * cols, x + b * cols, full, cols);
  }
}

// Cache lines another range's reading wants in L2 (ManyRows' later passes prefetch the
// next block): the lines that start in [from, to), taken a few at a time.
struct LineSpan {
  std::uintptr_t line = 0, to = 0;
  LineSpan() = default;
  LineSpan(const char* from, const char* end)
      : line((reinterpret_cast<std::uintptr_t>(from) + 63) & ~std::uintptr_t{63}), to(reinterpret_cast<std::uintptr_t>(end)) {}
  void PrefetchSome(int n) {
    for (; n > 0 && line < to; --n, line += 64) _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T1);
  }
  void PrefetchAll() { PrefetchSome(1 << 30); }
};

// Four rows × B inputs (2 to 4), ManyRows' tile: Tile's loop with each sum a named
// variable, and the 4 · B sums reduced together (ReduceSixteen; the unused inputs'
// sums stay zero and are not stored): one tree for sixteen sums costs fewer
// instructions than one each. Written out because with an array of sums GCC zeroed
// them on the stack, stored them there after the loop and reduced from memory, some 32
// stores of 64 bytes a tile, which for an expert's down rows (128 columns: 8 blocks of
// 16 multiply-adds) cost about a third as much as the multiply-adds. The same
// operations per sum as Tile, so the same bits.
template <class F, int B, bool kOwnPrefetch = true>
inline void TileFourRows(const typename F::T* w, std::int64_t cols, const float* x, float* y, std::int64_t y_stride, const char* stop,
                         LineSpan other = {}) {
  static_assert(B >= 2 && B <= 4);
  __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00, a13 = a00, a20 = a00, a21 = a00,
         a22 = a00, a23 = a00, a30 = a00, a31 = a00, a32 = a00, a33 = a00;  // a<row><input>
  const typename F::T *w0 = w, *w1 = w + cols, *w2 = w + 2 * cols, *w3 = w + 3 * cols;
  const float *x0 = x, *x1 = x + cols, *x2 = x + (B > 2 ? 2 : 0) * cols, *x3 = x + (B > 3 ? 3 : 0) * cols;
  const std::int64_t full = cols - cols % kBlock;
  constexpr std::int64_t kStep = 4 * kBlock * static_cast<std::int64_t>(sizeof(typename F::T));
  const char* ahead = reinterpret_cast<const char*>(w) + kAheadBytes;
  const std::int64_t room = stop - reinterpret_cast<const char*>(w) - kAheadBytes;
  for (std::int64_t i = 0; i < full; i += kBlock) {
    if constexpr (kOwnPrefetch) {
      const std::int64_t at = i / kBlock * kStep;
      if (at < room) PrefetchRange(ahead + at, kStep);
    } else {
      // A tile's share of `other` is ~0.7 lines a block of 16 columns with four passes,
      // 2 with two: up to two a block keep pace.
      other.PrefetchSome(2);
    }
    const __m512 v0 = F::Load(w0 + i), v1 = F::Load(w1 + i), v2 = F::Load(w2 + i), v3 = F::Load(w3 + i);
    __m512 xv = _mm512_loadu_ps(x0 + i);
    a00 = _mm512_fmadd_ps(v0, xv, a00), a10 = _mm512_fmadd_ps(v1, xv, a10), a20 = _mm512_fmadd_ps(v2, xv, a20),
    a30 = _mm512_fmadd_ps(v3, xv, a30);
    xv = _mm512_loadu_ps(x1 + i);
    a01 = _mm512_fmadd_ps(v0, xv, a01), a11 = _mm512_fmadd_ps(v1, xv, a11), a21 = _mm512_fmadd_ps(v2, xv, a21),
    a31 = _mm512_fmadd_ps(v3, xv, a31);
    if constexpr (B > 2) {
      xv = _mm512_loadu_ps(x2 + i);
      a02 = _mm512_fmadd_ps(v0, xv, a02), a12 = _mm512_fmadd_ps(v1, xv, a12), a22 = _mm512_fmadd_ps(v2, xv, a22),
      a32 = _mm512_fmadd_ps(v3, xv, a32);
    }
    if constexpr (B > 3) {
      xv = _mm512_loadu_ps(x3 + i);
      a03 = _mm512_fmadd_ps(v0, xv, a03), a13 = _mm512_fmadd_ps(v1, xv, a13), a23 = _mm512_fmadd_ps(v2, xv, a23),
      a33 = _mm512_fmadd_ps(v3, xv, a33);
    }
  }
  if (full == cols) {
    // Lane 4b + r of the reduced sums holds row r, input b.
    const __m512 all[16] = {a00, a01, a02, a03, a10, a11, a12, a13, a20, a21, a22, a23, a30, a31, a32, a33};
    StoreQuarters<B>(ReduceSixteen(all), y, y_stride);
    return;
  }
  const __m512 sums[4][4] = {{a00, a01, a02, a03}, {a10, a11, a12, a13}, {a20, a21, a22, a23}, {a30, a31, a32, a33}};
  const typename F::T* rows[4] = {w0, w1, w2, w3};
  for (int r = 0; r < 4; ++r) {
    for (int b = 0; b < B; ++b) y[b * y_stride + r] = ReduceWithTail<F>(sums[r][b], rows[r], x + b * cols, full, cols);
  }
}

template <class F>
void Rows(const typename F::T* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
          std::int64_t begin, std::int64_t end) {
  const char* stop = reinterpret_cast<const char*>(w + end * cols);
  std::int64_t b = 0;
  for (; b + 4 <= batch; b += 4) {
    PrefetchHead(w + begin * cols, stop);
    std::int64_t o = begin;
    for (; o + 2 <= end; o += 2) Tile<F, 2, 4>(w + o * cols, cols, x + b * cols, y + b * y_stride + o, y_stride, stop);
    for (; o < end; ++o) Tile<F, 1, 4>(w + o * cols, cols, x + b * cols, y + b * y_stride + o, y_stride, stop);
  }
  for (; b < batch; ++b) {
    PrefetchHead(w + begin * cols, stop);
    std::int64_t o = begin;
    for (; o + 4 <= end; o += 4) Tile<F, 4, 1>(w + o * cols, cols, x + b * cols, y + b * y_stride + o, y_stride, stop);
    for (; o < end; ++o) Tile<F, 1, 1>(w + o * cols, cols, x + b * cols, y + b * y_stride + o, y_stride, stop);
  }
}

// One input (where the CPU reads it faster so than with the AVX2 kernel: see
// matmul.cpp): four adjacent rows a tile, one pass over the range, whose last tiles
// prefetch on into the head of the rows the thread reads next, as the AVX2 kernel's
// do (RowStream). Returns whether they did.
template <class F>
bool OneInput(const typename F::T* w, std::int64_t cols, const float* x, float* y, std::int64_t begin, std::int64_t end,
              const RowStream& stream) {
  const char* stop = reinterpret_cast<const char*>(w + end * cols);
  const std::int64_t row_bytes = cols * static_cast<std::int64_t>(sizeof(typename F::T));
  // The tiles' prefetch steps meet `stop` exactly when a row is whole pairs of cache
  // lines, and reach the next range's head from its first byte only if this range is
  // at least the prefetch distance long: else the next range warms its own head.
  const bool prefetches_next =
      stream.next != nullptr && stream.next_bytes > 0 && row_bytes % 128 == 0 && (end - begin) * row_bytes >= kAheadBytes;
  const NextRange next = prefetches_next ? HeadOf(stream.next, stream.next_bytes) : NextRange{};
  if (!stream.head_warm) PrefetchHead(w + begin * cols, stop);
  std::int64_t o = begin;
  for (; o + 4 <= end; o += 4) Tile<F, 4, 1>(w + o * cols, cols, x, y + o, 1, stop, next);
  for (; o < end; ++o) Tile<F, 1, 1>(w + o * cols, cols, x, y + o, 1, stop, next);
  return prefetches_next;
}

// Several inputs (prefill, verification, batched decode): tiles of 4 weight rows × 4
// inputs keep 16 accumulators in registers, so each weight block is widened once for
// four inputs and each input block loaded once for four rows. Rows go in blocks of
// about 64 KiB of weights, which stay in L2 while every input passes over them: the
// weights come from memory once, the inputs from cache once per block.
//
// With two passes or more (five inputs on), the later passes over a block, which find
// its rows in L2 and only compute, prefetch the next block instead (the next rows of
// the range, or the head of the next product the thread reads, `stream`), each tile a
// proportional share spread over its loop; the first pass over that block then finds
// it in L2 as well, so reading the weights overlaps the multiply-adds instead of
// preceding them. The range's first block, and every block read in one pass, still
// relies on the tiles' own prefetches 8 KiB ahead. Bursts of a tile's whole share at
// its start measured slower (Zen 5) than no change. Returns whether it prefetched the
// head of `stream.next`.
template <class F>
bool ManyRows(const typename F::T* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
              std::int64_t begin, std::int64_t end, const RowStream& stream) {
  if (batch == 1) return OneInput<F>(w, cols, x, y, begin, end, stream);
  const char* stop = reinterpret_cast<const char*>(w + end * cols);
  const std::int64_t row_bytes = cols * static_cast<std::int64_t>(sizeof(typename F::T));
  std::int64_t block = (64 * 1024 / (row_bytes > 0 ? row_bytes : 1)) / 4 * 4;
  if (block < 4) block = 4;
  const std::int64_t passes = (batch + 3) / 4;  // the last one to three inputs are a pass too
  bool next_warm = false;
  for (std::int64_t first = begin; first < end; first += block) {
    const std::int64_t last = end - first < block ? end : first + block;
    const char* next = nullptr;  // what this block's later passes prefetch
    std::int64_t next_bytes = 0;
    if (passes > 1 && last < end) {
      next = reinterpret_cast<const char*>(w + last * cols);
      next_bytes = ((end - last < block ? end : last + block) - last) * row_bytes;
    } else if (passes > 1 && stream.next != nullptr) {
      next = stream.next;
      next_bytes = stream.next_bytes < block * row_bytes ? stream.next_bytes : block * row_bytes;
      next_warm = next_bytes > 0;
    }
    // Whether the block's first pass prefetches for itself (nobody prefetched it).
    const bool own = passes == 1 || first == begin;
    if (own && !(first == begin && stream.head_warm)) PrefetchHead(w + first * cols, stop);
    // Rows [o, o + n)'s share of `next` in pass p ≥ 1: the p-th of passes − 1 equal
    // parts, split over the block's rows.
    const auto share = [&](std::int64_t pass, std::int64_t o, std::int64_t n) {
      if (pass == 0 || next_bytes == 0) return LineSpan{};
      const std::int64_t lo = (pass - 1) * next_bytes / (passes - 1), hi = pass * next_bytes / (passes - 1), rows = last - first;
      return LineSpan(next + lo + (hi - lo) * (o - first) / rows, next + lo + (hi - lo) * (o + n - first) / rows);
    };
    std::int64_t b = 0, pass = 0;
    // Four rows × B inputs over the block; rows past the last four one at a time.
    const auto four_rows = [&]<int B>(const float* xb, float* yb) {
      std::int64_t o = first;
      if (own && pass == 0) {
        for (; o + 4 <= last; o += 4) TileFourRows<F, B>(w + o * cols, cols, xb, yb + o, y_stride, stop);
      } else {
        for (; o + 4 <= last; o += 4) TileFourRows<F, B, false>(w + o * cols, cols, xb, yb + o, y_stride, stop, share(pass, o, 4));
      }
      for (; o < last; ++o) {
        share(pass, o, 1).PrefetchAll();
        Tile<F, 1, B>(w + o * cols, cols, xb, yb + o, y_stride, stop);
      }
    };
    for (; b + 4 <= batch; b += 4, ++pass) four_rows.template operator()<4>(x + b * cols, y + b * y_stride);
    // The last one to three inputs together, so the weights are widened once for them too.
    const float* xb = x + b * cols;
    float* yb = y + b * y_stride;
    if (batch - b == 3) {
      four_rows.template operator()<3>(xb, yb);
    } else if (batch - b == 2) {
      four_rows.template operator()<2>(xb, yb);
    } else if (batch - b == 1) {
      std::int64_t o = first;
      for (; o + 4 <= last; o += 4) {
        share(pass, o, 4).PrefetchAll();
        Tile<F, 4, 1>(w + o * cols, cols, xb, yb + o, y_stride, stop);
      }
      for (; o < last; ++o) {
        share(pass, o, 1).PrefetchAll();
        Tile<F, 1, 1>(w + o * cols, cols, xb, yb + o, y_stride, stop);
      }
    }
  }
  return next_warm;
}

}  // namespace

bool RowsBf16ManyAvx512(const std::uint16_t* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                        std::int64_t begin, std::int64_t end, const RowStream& stream) {
  return ManyRows<Bf16>(w, cols, x, batch, y, y_stride, begin, end, stream);
}

void RowsF32Avx512(const float* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                   std::int64_t begin, std::int64_t end) {
  Rows<F32>(w, cols, x, batch, y, y_stride, begin, end);
}

void RowsFp8Avx512(const std::uint8_t* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                   std::int64_t begin, std::int64_t end) {
  Rows<Fp8>(w, cols, x, batch, y, y_stride, begin, end);
}

}  // namespace tandem::rt::kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
