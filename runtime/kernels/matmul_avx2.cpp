// The AVX2 + FMA + F16C row kernels (see dense_rows.hpp for the order they share).
// Compiled for that target only through the pragma; nothing here may be reached
// unless DetectedIsa() says the CPU has it. No standard-library templates in this
// file: their instantiations would be compiled for AVX2 and could be picked by the
// linker for baseline callers.
#if !defined(__clang__)
#pragma GCC target("avx2,fma,f16c")
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
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#endif

namespace tandem::rt::kernels {

namespace {

constexpr std::int64_t kBlock = 16;
// A format's 16 columns from `p`, widened to fp32 as two 8-lane vectors, and where
// those lanes sit among the sixteen canonical ones.
struct Bf16 {
  using T = std::uint16_t;
  static constexpr bool kEvenOdd = true;  // a = columns 0, 2, …, 14; b = 1, 3, …, 15
  static void Load(const T* p, __m256& a, __m256& b) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    a = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    b = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
  }
  static float Scalar(const T* p) {
    const std::uint32_t bits = static_cast<std::uint32_t>(*p) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
};

struct F32 {
  using T = float;
  static constexpr bool kEvenOdd = false;  // a = columns 0–7, b = 8–15
  static void Load(const T* p, __m256& a, __m256& b) {
    a = _mm256_loadu_ps(p);
    b = _mm256_loadu_ps(p + 8);
  }
  static float Scalar(const T* p) { return *p; }
};

// e4m3 → the half-precision number with the same bits shifted into place, which is
// the e4m3 value / 256 for every finite code (subnormals included); the 256 is in x.
struct Fp8 {
  using T = std::uint8_t;
  static constexpr bool kEvenOdd = false;
  static void Load(const T* p, __m256& a, __m256& b) {
    const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i half = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x7F)), 7),
                                         _mm256_slli_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x80)), 8));
    a = _mm256_cvtph_ps(_mm256_castsi256_si128(half));
    b = _mm256_cvtph_ps(_mm256_extracti128_si256(half, 1));
  }
  static float Scalar(const T* p) { return F8E4M3ToF32(*p) * (1.0f / 256.0f); }
};

// The canonical total of a (row, input) pair's two accumulators: the same pairs
// as ReduceLanes, added in registers.
template <bool kEvenOdd>
inline float Reduce(__m256 a, __m256 b) {
  if constexpr (kEvenOdd) {
    // Lane l + 8 of an even/odd pair sits four lanes up in the same vector.
    __m128 e = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));  // lanes 0, 2, 4, 6
    __m128 o = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1));  // lanes 1, 3, 5, 7
    e = _mm_add_ps(e, _mm_movehl_ps(e, e));                                         // lanes 0, 2
    o = _mm_add_ps(o, _mm_movehl_ps(o, o));                                         // lanes 1, 3
    e = _mm_add_ss(e, _mm_shuffle_ps(e, e, 1));                                     // lane 0
    o = _mm_add_ss(o, _mm_shuffle_ps(o, o, 1));                                     // lane 1
    return _mm_cvtss_f32(_mm_add_ss(e, o));
  } else {
    const __m256 s8 = _mm256_add_ps(a, b);                                            // lanes 0–7
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));  // 0–3
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));                                           // 0–1
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
  }
}

// The columns past the last full block: into canonical lanes, then reduced.
template <class F>
inline float ReduceWithTail(__m256 a, __m256 b, const typename F::T* w, const float* x, std::int64_t from, std::int64_t cols) {
  if (from == cols) return Reduce<F::kEvenOdd>(a, b);
  alignas(32) float va[8], vb[8];
  _mm256_store_ps(va, a);
  _mm256_store_ps(vb, b);
  float lanes[16];
  for (int j = 0; j < 8; ++j) {
    if constexpr (F::kEvenOdd) {
      lanes[2 * j] = va[j];
      lanes[2 * j + 1] = vb[j];
    } else {
      lanes[j] = va[j];
      lanes[8 + j] = vb[j];
    }
  }
  for (std::int64_t i = from, l = 0; i < cols; ++i, ++l) lanes[l] = __builtin_fmaf(F::Scalar(w + i), x[i], lanes[l]);
  return ReduceLanes(lanes);
}

// Prefetches for a tile whose rows are adjacent (one stream of R rows): per block
// of 16 columns as many bytes as the tile reads, kAheadBytes on, up to `stop` (the
// end of the caller's rows), then on into `next` (the head of the rows this thread
// reads after them, if the caller named them).
template <class F, int R>
struct AdjacentAhead {
  static constexpr std::int64_t kStep = R * kBlock * static_cast<std::int64_t>(sizeof(typename F::T));
  const char* ahead;
  std::int64_t room;
  const NextRange& next;

  AdjacentAhead(const typename F::T* w, const char* stop, const NextRange& next_range)
      : ahead(reinterpret_cast<const char*>(w) + kAheadBytes), room(stop - ahead), next(next_range) {}

  void operator()(std::int64_t i) const {
    const std::int64_t at = i / kBlock * kStep;
    // Under a line a block: one prefetch every other block.
    if (kStep >= 64 || at % 64 == 0) PrefetchAhead(ahead, room, next, at, kStep);
  }
};

// The smallest range of rows read in four streams (see Rows).
constexpr std::int64_t kSpreadBytes = 256 * 1024;

// Prefetches for a tile whose four rows come from four streams (the quarters of a
// range, see Rows): each row's next line, kAheadBytes on, up to its stream's end
// (`ends[r]`); the last stream runs on to `stop` and then into `next` as above.
template <class F>
struct SpreadAhead {
  const char* ahead[4];
  std::int64_t room[4];
  const NextRange& next;

  SpreadAhead(const typename F::T* const (&rows)[4], const char* const (&ends)[4], const NextRange& next_range) : next(next_range) {
    for (int r = 0; r < 4; ++r) {
      ahead[r] = reinterpret_cast<const char*>(rows[r]) + kAheadBytes;
      room[r] = ends[r] - ahead[r];
    }
  }

  void operator()(std::int64_t i) const {
    const std::int64_t at = i * static_cast<std::int64_t>(sizeof(typename F::T));
    if (at % 64 != 0) return;
    for (int r = 0; r < 3; ++r) {
      if (at < room[r]) _mm_prefetch(ahead[r] + at, _MM_HINT_T1);
    }
    PrefetchAhead(ahead[3], room[3], next, at, 64);
  }
};

// R output rows × B inputs: each weight block is loaded once and used B times,
// each input block once for R rows. Row r's values start at rows[r], its result
// for input b goes to y[b · y_stride + r · y_step]; `prefetch(i)` runs before the
// block at column i is read.
template <class F, int R, int B, class Prefetch>
inline void Tile(const typename F::T* const (&rows)[R], std::int64_t cols, const float* x, float* y, std::int64_t y_stride,
                 std::int64_t y_step, const Prefetch& prefetch) {
  __m256 acc_a[R][B], acc_b[R][B];
  for (int r = 0; r < R; ++r) {
    for (int b = 0; b < B; ++b) acc_a[r][b] = acc_b[r][b] = _mm256_setzero_ps();
  }
  const std::int64_t full = cols - cols % kBlock;
  for (std::int64_t i = 0; i < full; i += kBlock) {
    prefetch(i);
    __m256 wa[R], wb[R];
    for (int r = 0; r < R; ++r) F::Load(rows[r] + i, wa[r], wb[r]);
    for (int b = 0; b < B; ++b) {
      const __m256 xa = _mm256_loadu_ps(x + b * cols + i), xb = _mm256_loadu_ps(x + b * cols + i + 8);
      for (int r = 0; r < R; ++r) {
        acc_a[r][b] = _mm256_fmadd_ps(wa[r], xa, acc_a[r][b]);
        acc_b[r][b] = _mm256_fmadd_ps(wb[r], xb, acc_b[r][b]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int b = 0; b < B; ++b) {
      y[b * y_stride + r * y_step] = ReduceWithTail<F>(acc_a[r][b], acc_b[r][b], rows[r], x + b * cols, full, cols);
    }
  }
}

// One weight row against B inputs (its bytes one stream).
template <class F, int B>
inline void RowTile(const typename F::T* w, std::int64_t cols, const float* x, float* y, std::int64_t y_stride, const char* stop,
                    const NextRange& next) {
  const typename F::T* const rows[1] = {w};
  Tile<F, 1, B>(rows, cols, x, y, y_stride, 1, AdjacentAhead<F, 1>(w, stop, next));
}

// Inputs in fours (one weight row at a time), the rest one input at a time: a range
// of at least kSpreadBytes as four streams, a row from each quarter of [begin, end)
// side by side (the leftover rows one by one), a smaller range row by row on its
// first pass and four adjacent rows at a time on later ones (from L2). Four
// adjacent rows (loads a row apart) read from memory at ~0.7 of the rate of one row
// or of four rows far apart (Zen 5: BM_MatMul bf16, 131072 rows, 18–20 against
// 24–25 GB/s; docs/performance.md, "bf16 against one input"), while a row alone
// waits on its sums' latency once its bytes are near (in L3 ~0.75 of four quarters);
// the 128 KiB expert projections of a decode step still ran fastest row by row. A
// row's sums are the same whichever rows share its tile.
template <class F>
bool Rows(const typename F::T* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
          std::int64_t begin, std::int64_t end, const RowStream& stream) {
  const char* stop = reinterpret_cast<const char*>(w + end * cols);
  // The last pass's tiles prefetch on past `stop` into the next range's head.
  // They run kAheadBytes ahead of where they read, so rows shorter than that would
  // leave the head's first bytes out; and their prefetch steps meet `stop` exactly
  // only when a row is whole cache lines in fours (a multiple of 64 columns). Else
  // the next range warms its own head.
  const bool prefetches_next = stream.next != nullptr && stream.next_bytes > 0 && cols % 64 == 0 &&
                               stop - reinterpret_cast<const char*>(w + begin * cols) >= kAheadBytes;
  // No std::min here: nothing built for AVX2 may instantiate a standard template.
  const NextRange none{}, next_head = HeadOf(stream.next, stream.next_bytes);
  std::int64_t b = 0;
  for (; b + 4 <= batch; b += 4) {
    if (b > 0 || !stream.head_warm) PrefetchHead(w + begin * cols, stop);
    const NextRange& next = prefetches_next && b + 4 == batch ? next_head : none;
    for (std::int64_t o = begin; o < end; ++o) RowTile<F, 4>(w + o * cols, cols, x + b * cols, y + b * y_stride + o, y_stride, stop, next);
  }
  const bool spread = stop - reinterpret_cast<const char*>(w + begin * cols) >= kSpreadBytes;
  const std::int64_t quarter = spread ? (end - begin) / 4 : 0;
  for (; b < batch; ++b) {
    if (b > 0 || !stream.head_warm) PrefetchHead(w + begin * cols, stop);
    const NextRange& next = prefetches_next && b + 1 == batch ? next_head : none;
    std::int64_t o = begin;
    if (b > 0 && !spread) {
      // A small range the pass before just read is in L2, where four adjacent rows at
      // a time are the fastest (BM_ExpertProducts, 3 rows an expert, AVX2 path).
      for (; o + 4 <= end; o += 4) {
        const typename F::T* const rows[4] = {w + o * cols, w + (o + 1) * cols, w + (o + 2) * cols, w + (o + 3) * cols};
        Tile<F, 4, 1>(rows, cols, x + b * cols, y + b * y_stride + o, y_stride, 1, AdjacentAhead<F, 4>(rows[0], stop, next));
      }
    } else if (quarter > 0) {
      // Stream r: rows [begin + r·quarter, begin + (r + 1)·quarter); the last one's
      // prefetches run on over the leftover rows to `stop`.
      const char* ends[4];
      for (int r = 0; r < 4; ++r) ends[r] = r == 3 ? stop : reinterpret_cast<const char*>(w + (begin + (r + 1) * quarter) * cols);
      for (int r = 1; r < 4; ++r) PrefetchHead(w + (begin + r * quarter) * cols, ends[r]);
      for (std::int64_t k = 0; k < quarter; ++k) {
        const typename F::T* const rows[4] = {w + (begin + k) * cols, w + (begin + quarter + k) * cols,
                                              w + (begin + 2 * quarter + k) * cols, w + (begin + 3 * quarter + k) * cols};
        Tile<F, 4, 1>(rows, cols, x + b * cols, y + b * y_stride + begin + k, y_stride, quarter, SpreadAhead<F>(rows, ends, next));
      }
      o = begin + 4 * quarter;
    }
    for (; o < end; ++o) RowTile<F, 1>(w + o * cols, cols, x + b * cols, y + b * y_stride + o, y_stride, stop, next);
  }
  return prefetches_next && batch > 0;
}

}  // namespace

void PrepareBf16InputAvx2(const float* x, std::int64_t batch, std::int64_t cols, float* out) {
  const std::int64_t full = cols - cols % kBlock;
  for (std::int64_t b = 0; b < batch; ++b) {
    const float* in = x + b * cols;
    float* o = out + b * cols;
    for (std::int64_t i = 0; i < full; i += kBlock) {
      for (int j = 0; j < 8; ++j) {
        o[i + j] = in[i + 2 * j];
        o[i + 8 + j] = in[i + 2 * j + 1];
      }
    }
    for (std::int64_t i = full; i < cols; ++i) o[i] = in[i];
  }
}

bool RowsBf16Avx2(const std::uint16_t* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                  std::int64_t begin, std::int64_t end, const RowStream& stream) {
  return Rows<Bf16>(w, cols, x, batch, y, y_stride, begin, end, stream);
}

void RowsF32Avx2(const float* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin,
                 std::int64_t end) {
  Rows<F32>(w, cols, x, batch, y, y_stride, begin, end, RowStream{});
}

void RowsFp8Avx2(const std::uint8_t* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                 std::int64_t begin, std::int64_t end) {
  Rows<Fp8>(w, cols, x, batch, y, y_stride, begin, end, RowStream{});
}

}  // namespace tandem::rt::kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
