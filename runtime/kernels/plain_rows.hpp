#pragma once

// The plain C++ loops of the dense kernels (private to runtime/kernels): the canonical
// sixteen-lane order of dense_rows.hpp written as loops the compiler vectorises. The
// portable path compiles them for the baseline target (matmul_portable.cpp), the
// AVX + FMA path for its own (matmul_avx_fma.cpp). Everything here has internal
// linkage, and no standard-library template is used, so each including file gets its
// own copy for its target: a copy compiled for AVX can never be linked into a
// baseline caller.

#include <cstdint>
#include <cstring>

#include "runtime/numeric/dtype.hpp"

#define TANDEM_INLINE __attribute__((always_inline)) inline

namespace tandem::rt::kernels {
namespace {  // NOLINT(google-build-namespaces): one copy per instruction-set file, by design

constexpr int kPlainLanes = 16;

TANDEM_INLINE float Load(const float* p, std::int64_t i) { return p[i]; }
TANDEM_INLINE float Load(const std::uint16_t* p, std::int64_t i) {
  const std::uint32_t bits = static_cast<std::uint32_t>(p[i]) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// e4m3 byte → value, by table (filled once per including file).
struct Fp8Table {
  float v[256];
  Fp8Table() {
    for (int b = 0; b < 256; ++b) v[b] = F8E4M3ToF32(static_cast<std::uint8_t>(b));
  }
};
const Fp8Table kFp8Values;
TANDEM_INLINE float Load(const std::uint8_t* p, std::int64_t i) { return kFp8Values.v[p[i]]; }

// Σ w[i]·x[i] with sixteen independent partial sums combined in a fixed tree: the
// compiler vectorises the lanes, and the order never depends on the caller.
template <typename T>
TANDEM_INLINE float PlainDot(const T* w, const float* x, std::int64_t n) {
  float acc[kPlainLanes] = {};
  std::int64_t i = 0;
  for (; i + kPlainLanes <= n; i += kPlainLanes) {
    for (int l = 0; l < kPlainLanes; ++l) acc[l] += Load(w, i + l) * x[i + l];
  }
  for (int l = 0; i < n; ++i, ++l) acc[l] += Load(w, i) * x[i];
  for (int width = kPlainLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

// As PlainDot, accumulating in double: products of bf16/fp32 weights and fp32 inputs
// are exact in double, and the sum's error is ~1e-16 relative.
template <typename T>
TANDEM_INLINE double PlainDotF64(const T* w, const float* x, std::int64_t n) {
  double acc[kPlainLanes] = {};
  std::int64_t i = 0;
  for (; i + kPlainLanes <= n; i += kPlainLanes) {
    for (int l = 0; l < kPlainLanes; ++l) acc[l] += static_cast<double>(Load(w, i + l)) * static_cast<double>(x[i + l]);
  }
  for (int l = 0; i < n; ++i, ++l) acc[l] += static_cast<double>(Load(w, i)) * static_cast<double>(x[i]);
  for (int width = kPlainLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

// y[b·y_stride + o] for output rows [begin, end), as dense_rows.hpp's kernels.
template <typename T>
TANDEM_INLINE void PlainRows(const T* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                             std::int64_t begin, std::int64_t end) {
  for (std::int64_t o = begin; o < end; ++o) {
    const T* row = w + o * cols;
    for (std::int64_t b = 0; b < batch; ++b) y[b * y_stride + o] = PlainDot(row, x + b * cols, cols);
  }
}

template <typename T>
TANDEM_INLINE void PlainRowsF64(const T* w, std::int64_t cols, const float* x, std::int64_t batch, double* y, std::int64_t y_stride,
                                std::int64_t begin, std::int64_t end) {
  for (std::int64_t o = begin; o < end; ++o) {
    const T* row = w + o * cols;
    for (std::int64_t b = 0; b < batch; ++b) y[b * y_stride + o] = PlainDotF64(row, x + b * cols, cols);
  }
}

// Columns [begin, end) of Y = X·W (W is [rows × cols]), summing over r in order.
template <typename T>
TANDEM_INLINE void PlainTransposedCols(const T* w, std::int64_t rows, std::int64_t cols, const float* x, std::int64_t batch, float* y,
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

}  // namespace
}  // namespace tandem::rt::kernels
