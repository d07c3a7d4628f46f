#include "runtime/kernels/matmul.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <functional>
#include <cstring>
#include <utility>
#include <vector>

#include "runtime/kernels/attention_rows.hpp"
#include "runtime/kernels/cpu_features.hpp"
#include "runtime/kernels/dense_rows.hpp"
#include "runtime/kernels/quantized_input.hpp"
#include "runtime/kernels/quantized_matrix.hpp"
#include "runtime/kernels/thread_pool.hpp"
#include "runtime/model/dtype.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tandem::rt {

namespace {

constexpr int kLanes = 16;

__attribute__((always_inline)) inline float Load(const float* p, std::int64_t i) { return p[i]; }
__attribute__((always_inline)) inline float Load(const std::uint16_t* p, std::int64_t i) { return std::bit_cast<float>(static_cast<std::uint32_t>(p[i]) << 16); }

// e4m3 byte → value, by table (the portable path only).
const std::array<float, 256> kFp8Values = [] {
  std::array<float, 256> v{};
  for (int b = 0; b < 256; ++b) v[static_cast<std::size_t>(b)] = F8E4M3ToF32(static_cast<std::uint8_t>(b));
  return v;
}();
__attribute__((always_inline)) inline float Load(const std::uint8_t* p, std::int64_t i) { return kFp8Values[p[i]]; }

// Σ w[i]·x[i] with kLanes independent partial sums combined in a fixed tree: the
// compiler vectorises the lanes, and the order never depends on the caller.
// Always inlined, so each target clone below gets its own vectorised copy.
#define TANDEM_INLINE __attribute__((always_inline)) inline

template <typename T>
TANDEM_INLINE float Dot(const T* w, const float* x, std::int64_t n) {
  float acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += Load(w, i + l) * x[i + l];
  }
  for (int l = 0; i < n; ++i, ++l) acc[l] += Load(w, i) * x[i];
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

// As Dot, accumulating in double: products of bf16/fp32 weights and fp32 inputs are
// exact in double, and the sum's error is ~1e-16 relative.
template <typename T>
TANDEM_INLINE double DotF64(const T* w, const float* x, std::int64_t n) {
  double acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += static_cast<double>(Load(w, i + l)) * static_cast<double>(x[i + l]);
  }
  for (int l = 0; i < n; ++i, ++l) acc[l] += static_cast<double>(Load(w, i)) * static_cast<double>(x[i]);
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

template <typename T>
TANDEM_INLINE void MatMulRowsF64(const T* w, std::int64_t cols, std::int64_t rows, const float* x, std::int64_t batch,
                                 double* y, std::int64_t begin, std::int64_t end) {
  for (std::int64_t o = begin; o < end; ++o) {
    const T* row = w + o * cols;
    for (std::int64_t b = 0; b < batch; ++b) y[b * rows + o] = DotF64(row, x + b * cols, cols);
  }
}

template <typename T>
TANDEM_INLINE void MatMulRows(const T* w, std::int64_t cols, std::int64_t rows, const float* x, std::int64_t batch, float* y,
                std::int64_t begin, std::int64_t end) {
  for (std::int64_t o = begin; o < end; ++o) {
    const T* row = w + o * cols;
    for (std::int64_t b = 0; b < batch; ++b) y[b * rows + o] = Dot(row, x + b * cols, cols);
  }
}

template <typename T>
void MatMulTransposedCols(const T* w, std::int64_t rows, std::int64_t cols, const float* x, std::int64_t batch, float* y,
                          std::int64_t begin, std::int64_t end) {
  for (std::int64_t b = 0; b < batch; ++b) {
    float* out = y + b * cols;
    for (std::int64_t c = begin; c < end; ++c) out[c] = 0.0f;
    for (std::int64_t r = 0; r < rows; ++r) {
      const float xr = x[b * rows + r];
      const T* wr = w + r * cols;
      for (std::int64_t c = begin; c < end; ++c) out[c] += Load(wr, c) * xr;
    }
  }
}

// The hot loops, compiled once per instruction set and chosen at load time by the
// CPU (GCC function multi-versioning): AVX2+FMA, AVX+FMA, or baseline SSE2. The
// lanes and the reduction tree are the same in every version, so batch invariance
// holds on any machine; FMA contraction means results may differ in the last bits
// between machines, never between batches.
#define TANDEM_KERNEL_CLONES __attribute__((target_clones("arch=haswell", "fma", "default")))

#if defined(__x86_64__)
// bf16 · fp32 dot for AVX+FMA (no AVX2 needed): widen bf16 by interleaving zero
// halfwords below each value, multiply-add into two 8-lane accumulators (lanes
// 0–7 and 8–15 of Dot's sixteen), then the same tail and reduction tree as Dot.
__attribute__((target("avx,fma"))) float DotBf16Avx(const std::uint16_t* w, const float* x, std::int64_t n) {
  const __m128i zero = _mm_setzero_si128();
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i + 8));
    const __m256 wa = _mm256_castsi256_ps(_mm256_insertf128_si256(
        _mm256_castsi128_si256(_mm_unpacklo_epi16(zero, a)), _mm_unpackhi_epi16(zero, a), 1));
    const __m256 wb = _mm256_castsi256_ps(_mm256_insertf128_si256(
        _mm256_castsi128_si256(_mm_unpacklo_epi16(zero, b)), _mm_unpackhi_epi16(zero, b), 1));
    acc0 = _mm256_fmadd_ps(wa, _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(wb, _mm256_loadu_ps(x + i + 8), acc1);
  }
  alignas(32) float acc[kLanes];
  _mm256_store_ps(acc, acc0);
  _mm256_store_ps(acc + 8, acc1);
  for (int l = 0; i < n; ++i, ++l) acc[l] += Load(w, i) * x[i];
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

// DotBf16Avx for four input rows at once: each chunk of weights is widened once and
// used four times. Every row keeps its own two accumulators and the exact operation
// sequence of DotBf16Avx, so its result is bit-identical to computing it alone.
__attribute__((target("avx,fma"))) void DotBf16Avx4(const std::uint16_t* w, const float* x, std::int64_t x_stride,
                                                    std::int64_t n, float* out, std::int64_t out_stride) {
  const __m128i zero = _mm_setzero_si128();
  __m256 acc0[4], acc1[4];
  for (int r = 0; r < 4; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i + 8));
    const __m256 wa = _mm256_castsi256_ps(_mm256_insertf128_si256(
        _mm256_castsi128_si256(_mm_unpacklo_epi16(zero, a)), _mm_unpackhi_epi16(zero, a), 1));
    const __m256 wb = _mm256_castsi256_ps(_mm256_insertf128_si256(
        _mm256_castsi128_si256(_mm_unpacklo_epi16(zero, b)), _mm_unpackhi_epi16(zero, b), 1));
    for (int r = 0; r < 4; ++r) {
      const float* xr = x + r * x_stride + i;
      acc0[r] = _mm256_fmadd_ps(wa, _mm256_loadu_ps(xr), acc0[r]);
      acc1[r] = _mm256_fmadd_ps(wb, _mm256_loadu_ps(xr + 8), acc1[r]);
    }
  }
  for (int r = 0; r < 4; ++r) {
    alignas(32) float acc[kLanes];
    _mm256_store_ps(acc, acc0[r]);
    _mm256_store_ps(acc + 8, acc1[r]);
    const float* xr = x + r * x_stride;
    std::int64_t j = i;
    for (int l = 0; j < n; ++j, ++l) acc[l] += Load(w, j) * xr[j];
    for (int width = kLanes / 2; width > 0; width /= 2) {
      for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
    }
    out[r * out_stride] = acc[0];
  }
}

__attribute__((target("avx,fma"))) void RowsBf16Avx(const std::uint16_t* w, std::int64_t cols, std::int64_t rows,
                                                    const float* x, std::int64_t batch, float* y, std::int64_t begin,
                                                    std::int64_t end) {
  for (std::int64_t o = begin; o < end; ++o) {
    std::int64_t b = 0;
    for (; b + 4 <= batch; b += 4) DotBf16Avx4(w + o * cols, x + b * cols, cols, cols, y + b * rows + o, rows);
    for (; b < batch; ++b) y[b * rows + o] = DotBf16Avx(w + o * cols, x + b * cols, cols);
  }
}

// DotF64 for AVX+FMA: the same sixteen double lanes as four 4-wide accumulators.
__attribute__((target("avx,fma"))) double DotBf16F64Avx(const std::uint16_t* w, const float* x, std::int64_t n) {
  const __m128i zero = _mm_setzero_si128();
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int half = 0; half < 2; ++half) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i + 8 * half));
      const __m128 lo = _mm_castsi128_ps(_mm_unpacklo_epi16(zero, v));  // w[0..3]
      const __m128 hi = _mm_castsi128_ps(_mm_unpackhi_epi16(zero, v));  // w[4..7]
      const __m128 xlo = _mm_loadu_ps(x + i + 8 * half);
      const __m128 xhi = _mm_loadu_ps(x + i + 8 * half + 4);
      acc[2 * half] = _mm256_fmadd_pd(_mm256_cvtps_pd(lo), _mm256_cvtps_pd(xlo), acc[2 * half]);
      acc[2 * half + 1] = _mm256_fmadd_pd(_mm256_cvtps_pd(hi), _mm256_cvtps_pd(xhi), acc[2 * half + 1]);
    }
  }
  alignas(32) double lanes[kLanes];
  for (int a = 0; a < 4; ++a) _mm256_store_pd(lanes + 4 * a, acc[a]);
  for (int l = 0; i < n; ++i, ++l) lanes[l] += static_cast<double>(Load(w, i)) * static_cast<double>(x[i]);
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0];
}

// DotBf16F64Avx for two input rows at once (the same per-row operation sequence).
__attribute__((target("avx,fma"))) void DotBf16F64Avx2(const std::uint16_t* w, const float* x, std::int64_t x_stride,
                                                       std::int64_t n, double* out, std::int64_t out_stride) {
  const __m128i zero = _mm_setzero_si128();
  __m256d acc[2][4];
  for (auto& row : acc) {
    for (auto& a : row) a = _mm256_setzero_pd();
  }
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int half = 0; half < 2; ++half) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i + 8 * half));
      const __m256d lo = _mm256_cvtps_pd(_mm_castsi128_ps(_mm_unpacklo_epi16(zero, v)));
      const __m256d hi = _mm256_cvtps_pd(_mm_castsi128_ps(_mm_unpackhi_epi16(zero, v)));
      for (int r = 0; r < 2; ++r) {
        const float* xr = x + r * x_stride + i + 8 * half;
        acc[r][2 * half] = _mm256_fmadd_pd(lo, _mm256_cvtps_pd(_mm_loadu_ps(xr)), acc[r][2 * half]);
        acc[r][2 * half + 1] = _mm256_fmadd_pd(hi, _mm256_cvtps_pd(_mm_loadu_ps(xr + 4)), acc[r][2 * half + 1]);
      }
    }
  }
  for (int r = 0; r < 2; ++r) {
    alignas(32) double lanes[kLanes];
    for (int a = 0; a < 4; ++a) _mm256_store_pd(lanes + 4 * a, acc[r][a]);
    const float* xr = x + r * x_stride;
    std::int64_t j = i;
    for (int l = 0; j < n; ++j, ++l) lanes[l] += static_cast<double>(Load(w, j)) * static_cast<double>(xr[j]);
    for (int width = kLanes / 2; width > 0; width /= 2) {
      for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
    }
    out[r * out_stride] = lanes[0];
  }
}

__attribute__((target("avx,fma"))) void RowsBf16F64Avx(const std::uint16_t* w, std::int64_t cols, std::int64_t rows,
                                                       const float* x, std::int64_t batch, double* y, std::int64_t begin,
                                                       std::int64_t end) {
  for (std::int64_t o = begin; o < end; ++o) {
    std::int64_t b = 0;
    for (; b + 2 <= batch; b += 2) DotBf16F64Avx2(w + o * cols, x + b * cols, cols, cols, y + b * rows + o, rows);
    for (; b < batch; ++b) y[b * rows + o] = DotBf16F64Avx(w + o * cols, x + b * cols, cols);
  }
}

#endif

TANDEM_KERNEL_CLONES void RowsBf16(const std::uint16_t* w, std::int64_t cols, std::int64_t rows, const float* x,
                                   std::int64_t batch, float* y, std::int64_t begin, std::int64_t end) {
  MatMulRows(w, cols, rows, x, batch, y, begin, end);
}

TANDEM_KERNEL_CLONES void RowsF32(const float* w, std::int64_t cols, std::int64_t rows, const float* x, std::int64_t batch,
                                  float* y, std::int64_t begin, std::int64_t end) {
  MatMulRows(w, cols, rows, x, batch, y, begin, end);
}

TANDEM_KERNEL_CLONES void RowsBf16F64(const std::uint16_t* w, std::int64_t cols, std::int64_t rows, const float* x,
                                      std::int64_t batch, double* y, std::int64_t begin, std::int64_t end) {
  MatMulRowsF64(w, cols, rows, x, batch, y, begin, end);
}

TANDEM_KERNEL_CLONES void RowsF32F64(const float* w, std::int64_t cols, std::int64_t rows, const float* x, std::int64_t batch,
                                     double* y, std::int64_t begin, std::int64_t end) {
  MatMulRowsF64(w, cols, rows, x, batch, y, begin, end);
}

TANDEM_KERNEL_CLONES void RowsFp8(const std::uint8_t* w, std::int64_t cols, std::int64_t rows, const float* x,
                                  std::int64_t batch, float* y, std::int64_t begin, std::int64_t end) {
  MatMulRows(w, cols, rows, x, batch, y, begin, end);
}

TANDEM_KERNEL_CLONES void RowsFp8F64(const std::uint8_t* w, std::int64_t cols, std::int64_t rows, const float* x,
                                     std::int64_t batch, double* y, std::int64_t begin, std::int64_t end) {
  MatMulRowsF64(w, cols, rows, x, batch, y, begin, end);
}

TANDEM_KERNEL_CLONES float DotF32(const float* a, const float* b, std::int64_t n) { return Dot(a, b, n); }

// Calls fn over [0, n) on the pool, or directly without one. The pool takes a
// std::function: handing it a lambda that captures a single reference keeps the
// function object in place, so no call allocates however much `fn` captures.
template <typename Fn>
void Run(ThreadPool* pool, std::int64_t n, std::int64_t min_chunk, const Fn& fn) {
  if (pool == nullptr) {
    fn(0, n);
  } else {
    pool->ParallelFor(n, [&fn](std::int64_t begin, std::int64_t end) { fn(begin, end); }, min_chunk);
  }
}

// Reused across calls so the hot path does not allocate: the caller thread's copy
// of the inputs in the layout a kernel wants (read by every thread of the pool).
std::vector<float>& InputScratch() {
  thread_local std::vector<float> scratch;
  return scratch;
}

// fp8 rows [begin, end): each 128-row block of the scale grid gets the inputs
// multiplied by its column blocks' scales (times `multiplier`, which the SIMD
// kernels use to read e4m3 as half precision), then the block's rows run through
// `rows_fn` like any other type.
template <typename RowsFn>
void Fp8Rows(const WeightMatrix& w, const float* x, std::int64_t batch, std::int64_t begin, std::int64_t end, float multiplier,
             std::vector<float>& scaled, RowsFn rows_fn) {
  constexpr std::int64_t kBlock = WeightMatrix::kFp8Block;
  scaled.resize(static_cast<std::size_t>(batch * w.cols));
  for (std::int64_t first = begin; first < end;) {
    const std::int64_t block_row = (first + w.block_origin_row) / kBlock;
    const std::int64_t last = std::min(end, (block_row + 1) * kBlock - w.block_origin_row);
    const float* scale = w.block_scales + block_row * w.scale_cols;
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t c = 0; c < w.cols; ++c) {
        scaled[static_cast<std::size_t>(b * w.cols + c)] = x[b * w.cols + c] * scale[(c + w.block_origin_col) / kBlock] * multiplier;
      }
    }
    rows_fn(scaled.data(), first, last);
    first = last;
  }
}

}  // namespace

namespace kernels {

float ReduceLanes(float* lanes) {
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0];
}

}  // namespace kernels

namespace {

// Rows [begin, end) of one product with fp32 output; `x` as PrepareInput left it.
// Returns whether the kernel prefetched the head of `stream.next` (only the AVX2
// bf16 kernel follows a stream across products).
bool RowsOf(const WeightMatrix& w, Isa isa, const float* x, std::int64_t batch, float* y, std::int64_t begin, std::int64_t end,
            const kernels::RowStream& stream) {
  const std::int64_t rows = w.rows, cols = w.cols;
  switch (w.type) {
    case WeightMatrix::Type::kBF16: {
      const auto* data = static_cast<const std::uint16_t*>(w.data);
      if (isa >= Isa::kAvx2) return kernels::RowsBf16Avx2(data, cols, x, batch, y, rows, begin, end, stream);
#if defined(__x86_64__)
      if (isa == Isa::kAvxFma) {
        RowsBf16Avx(data, cols, rows, x, batch, y, begin, end);
        return false;
      }
#endif
      RowsBf16(data, cols, rows, x, batch, y, begin, end);
      return false;
    }
    case WeightMatrix::Type::kF32: {
      const auto* data = static_cast<const float*>(w.data);
      if (isa == Isa::kAvx512) {
        kernels::RowsF32Avx512(data, cols, x, batch, y, rows, begin, end);
      } else if (isa == Isa::kAvx2) {
        kernels::RowsF32Avx2(data, cols, x, batch, y, rows, begin, end);
      } else {
        RowsF32(data, cols, rows, x, batch, y, begin, end);
      }
      return false;
    }
    case WeightMatrix::Type::kF8E4M3: {
      const auto* data = static_cast<const std::uint8_t*>(w.data);
      thread_local std::vector<float> scaled;
      Fp8Rows(w, x, batch, begin, end, isa >= Isa::kAvx2 ? 256.0f : 1.0f, scaled,
              [&](const float* xs, std::int64_t b, std::int64_t e) {
                if (isa == Isa::kAvx512) return kernels::RowsFp8Avx512(data, cols, xs, batch, y, rows, b, e);
                if (isa == Isa::kAvx2) return kernels::RowsFp8Avx2(data, cols, xs, batch, y, rows, b, e);
                RowsFp8(data, cols, rows, xs, batch, y, b, e);
              });
      return false;
    }
    case WeightMatrix::Type::kQuantized: return false;  // MatMulMany runs these itself
  }
  return false;
}

// Rows [begin, end) of one product with double accumulation and output.
void RowsOfF64(const WeightMatrix& w, Isa isa, const float* x, std::int64_t batch, double* y, std::int64_t begin,
               std::int64_t end) {
  switch (w.type) {
    case WeightMatrix::Type::kF32:
      return RowsF32F64(static_cast<const float*>(w.data), w.cols, w.rows, x, batch, y, begin, end);
    case WeightMatrix::Type::kBF16:
#if defined(__x86_64__)
      if (isa >= Isa::kAvxFma) return RowsBf16F64Avx(static_cast<const std::uint16_t*>(w.data), w.cols, w.rows, x, batch, y, begin, end);
#endif
      return RowsBf16F64(static_cast<const std::uint16_t*>(w.data), w.cols, w.rows, x, batch, y, begin, end);
    case WeightMatrix::Type::kF8E4M3: {
      thread_local std::vector<float> scaled;
      return Fp8Rows(w, x, batch, begin, end, 1.0f, scaled, [&](const float* xs, std::int64_t b, std::int64_t e) {
        RowsFp8F64(static_cast<const std::uint8_t*>(w.data), w.cols, w.rows, xs, batch, y, b, e);
      });
    }
    case WeightMatrix::Type::kQuantized: return;
  }
}

// Whether a product's fp32 kernel wants its input rearranged (AVX2 bf16: see
// PrepareBf16InputAvx2).
bool NeedsPreparedInput(const MatMulTask& t, Isa isa) {
  return isa >= Isa::kAvx2 && t.y != nullptr && t.w->type == WeightMatrix::Type::kBF16 && !t.w->quantized;
}

}  // namespace

void MatMulMany(std::span<const MatMulTask> tasks, ThreadPool* pool) {
  const Isa isa = ActiveIsa();
  // Inputs some kernels want rearranged: laid out one after the other in the
  // caller's scratch, which the pool's threads read. Quantized products get their
  // inputs quantized once (a product sharing its input and format with an earlier
  // one, like an MLP's up with its gate, reuses that).
  std::vector<float>& scratch = InputScratch();
  std::size_t scratch_size = 0;
  for (const MatMulTask& t : tasks) {
    if (NeedsPreparedInput(t, isa)) scratch_size += static_cast<std::size_t>(t.batch * t.w->cols);
  }
  scratch.resize(scratch_size);
  thread_local std::vector<const float*> inputs;
  thread_local std::vector<std::int64_t> first_row;
  thread_local std::vector<kernels::PreparedQuantizedInput> quantized_inputs;
  thread_local std::vector<const kernels::PreparedQuantizedInput*> quantized_of;
  inputs.assign(tasks.size(), nullptr);
  // Sized up front: quantized_of points into it.
  if (quantized_inputs.size() < tasks.size()) quantized_inputs.resize(tasks.size());
  quantized_of.assign(tasks.size(), nullptr);
  first_row.assign(tasks.size() + 1, 0);
  std::size_t offset = 0, quantized_used = 0;
  std::int64_t work = 0;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const MatMulTask& t = tasks[i];
    inputs[i] = t.x;
    if (t.w->quantized) {
      const QuantizedMatrix& q = *t.w->quantized;
      for (std::size_t j = 0; j < quantized_used && quantized_of[i] == nullptr; ++j) {
        const kernels::PreparedQuantizedInput& p = quantized_inputs[j];
        if (p.source == t.x && p.batch == t.batch && p.cols == q.cols && p.int4 == (q.format == QuantFormat::kInt4)) {
          quantized_of[i] = &p;
        }
      }
      if (quantized_of[i] == nullptr) {
        kernels::PreparedQuantizedInput& p = quantized_inputs[quantized_used++];
        p.source = nullptr;
        p.Prepare(q, t.x, t.batch, isa);
        quantized_of[i] = &p;
      }
    } else if (NeedsPreparedInput(t, isa)) {
      // A product sharing its input with an earlier one (an MLP's up with its gate,
      // experts given the same row) reuses that one's rearranged copy.
      for (std::size_t j = 0; j < i && inputs[i] == t.x; ++j) {
        const MatMulTask& u = tasks[j];
        if (u.x == t.x && u.batch == t.batch && u.w->cols == t.w->cols && inputs[j] != u.x) inputs[i] = inputs[j];
      }
      if (inputs[i] == t.x) {
        float* prepared = scratch.data() + offset;
        kernels::PrepareBf16InputAvx2(t.x, t.batch, t.w->cols, prepared);
        inputs[i] = prepared;
        offset += static_cast<std::size_t>(t.batch * t.w->cols);
      }
    }
    first_row[i + 1] = first_row[i] + t.w->rows;
    work += t.w->rows * t.w->cols * t.batch;
  }
  const std::int64_t total = first_row.back();
  if (total == 0) return;
  // About 16k multiply-adds per chunk keeps dispatch overhead small for tiny layers.
  const std::int64_t per_row = std::max<std::int64_t>(1, work / total);
  const std::int64_t min_chunk = std::max<std::int64_t>(1, 16384 / per_row);
  const std::vector<const float*>& in = inputs;
  const std::vector<std::int64_t>& starts = first_row;
  const std::vector<const kernels::PreparedQuantizedInput*>& quantized = quantized_of;
  Run(pool, total, min_chunk, [&](std::int64_t begin, std::int64_t end) {
    auto i = static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), begin) - starts.begin()) - 1;
    bool head_warm = false;  // the previous product prefetched this one's head
    for (; i < tasks.size() && starts[i] < end; ++i) {
      const MatMulTask& t = tasks[i];
      const std::int64_t b = std::max(begin, starts[i]) - starts[i], e = std::min(end, starts[i + 1]) - starts[i];
      if (b >= e) continue;
      kernels::RowStream stream;
      stream.head_warm = std::exchange(head_warm, false);
      // The next product this thread reads, if the same kernel reads it (its rows
      // in this share start at its first row: the shares are contiguous).
      if (i + 1 < tasks.size() && starts[i + 1] < end && tasks[i + 1].batch > 0 && NeedsPreparedInput(tasks[i + 1], isa)) {
        const WeightMatrix& next = *tasks[i + 1].w;
        stream.next = static_cast<const char*>(next.data);
        stream.next_bytes = (std::min(end, starts[i + 2]) - starts[i + 1]) * next.cols * static_cast<std::int64_t>(sizeof(std::uint16_t));
      }
      if (t.w->quantized) {
        const QuantizedMatrix& q = *t.w->quantized;
        if (t.y != nullptr) kernels::QuantizedRows(q, *quantized[i], t.y + b, q.rows, b, e, isa);
        if (t.y64 != nullptr) {
          thread_local std::vector<float> rows;
          rows.resize(static_cast<std::size_t>(t.batch * (e - b)));
          kernels::QuantizedRows(q, *quantized[i], rows.data(), e - b, b, e, isa);
          for (std::int64_t r = 0; r < t.batch; ++r) {
            for (std::int64_t o = b; o < e; ++o) t.y64[r * q.rows + o] = rows[static_cast<std::size_t>(r * (e - b) + o - b)];
          }
        }
        continue;
      }
      if (t.y != nullptr) head_warm = RowsOf(*t.w, isa, in[i], t.batch, t.y, b, e, stream);
      if (t.y64 != nullptr) RowsOfF64(*t.w, isa, t.x, t.batch, t.y64, b, e);  // the double kernels read x as given
    }
  });
}

void MatMul(const WeightMatrix& w, const float* x, std::int64_t batch, float* y, ThreadPool* pool) {
  const MatMulTask task{&w, x, batch, y, nullptr};
  MatMulMany(std::span<const MatMulTask>(&task, 1), pool);
}

void MatMulF64(const WeightMatrix& w, const float* x, std::int64_t batch, double* y, ThreadPool* pool) {
  const MatMulTask task{&w, x, batch, nullptr, y};
  MatMulMany(std::span<const MatMulTask>(&task, 1), pool);
}

namespace {

// A QuantizedMatrix as a kQuantized WeightMatrix that does not own it (an aliasing
// shared_ptr with no owner: nothing is allocated or counted).
WeightMatrix View(const QuantizedMatrix& q) {
  return WeightMatrix::FromQuantized(std::shared_ptr<const QuantizedMatrix>(std::shared_ptr<const QuantizedMatrix>(), &q));
}

}  // namespace

void MatMul(const QuantizedMatrix& w, const float* x, std::int64_t batch, float* y, ThreadPool* pool) {
  MatMul(View(w), x, batch, y, pool);
}

void MatMulF64(const QuantizedMatrix& w, const float* x, std::int64_t batch, double* y, ThreadPool* pool) {
  MatMulF64(View(w), x, batch, y, pool);
}

void MatMulTransposed(const WeightMatrix& w, const float* x, std::int64_t batch, float* y, ThreadPool* pool) {
  const std::int64_t min_chunk = std::max<std::int64_t>(16, 16384 / std::max<std::int64_t>(1, w.rows * batch));
  // By the CPU, not TANDEM_ISA: the AVX2 loops give the same bits (attention_rows.hpp).
  static const bool avx2 = DetectedIsa() >= Isa::kAvx2;
  Run(pool, w.cols, min_chunk, [&](std::int64_t begin, std::int64_t end) {
    switch (w.type) {
      case WeightMatrix::Type::kF32:
        if (avx2) return kernels::TransposedF32Avx2(static_cast<const float*>(w.data), w.rows, w.cols, x, batch, y, begin, end);
        return MatMulTransposedCols(static_cast<const float*>(w.data), w.rows, w.cols, x, batch, y, begin, end);
      case WeightMatrix::Type::kBF16:
        if (avx2) {
          return kernels::TransposedBf16Avx2(static_cast<const std::uint16_t*>(w.data), w.rows, w.cols, x, batch, y, begin, end);
        }
        return MatMulTransposedCols(static_cast<const std::uint16_t*>(w.data), w.rows, w.cols, x, batch, y, begin, end);
      case WeightMatrix::Type::kF8E4M3:
      case WeightMatrix::Type::kQuantized:
        // Small (attention's absorbed key projection), so element by element.
        for (std::int64_t b = 0; b < batch; ++b) {
          float* out = y + b * w.cols;
          for (std::int64_t c = begin; c < end; ++c) out[c] = 0.0f;
          for (std::int64_t r = 0; r < w.rows; ++r) {
            const float xr = x[b * w.rows + r];
            for (std::int64_t c = begin; c < end; ++c) out[c] += w.At(r, c) * xr;
          }
        }
        return;
    }
  });
}

float Dot(const float* a, const float* b, std::int64_t n) { return DotF32(a, b, n); }

void CopyRow(const WeightMatrix& w, std::int64_t row, float* dst) {
  if (w.type == WeightMatrix::Type::kF32) {
    std::memcpy(dst, static_cast<const float*>(w.data) + row * w.cols, static_cast<std::size_t>(w.cols) * 4);
  } else if (w.type == WeightMatrix::Type::kBF16) {
    const auto* src = static_cast<const std::uint16_t*>(w.data) + row * w.cols;
    for (std::int64_t i = 0; i < w.cols; ++i) dst[i] = Load(src, i);
  } else {
    for (std::int64_t i = 0; i < w.cols; ++i) dst[i] = w.At(row, i);
  }
}

}  // namespace tandem::rt
