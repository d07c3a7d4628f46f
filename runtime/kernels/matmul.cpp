#include "runtime/kernels/matmul.hpp"

#include <algorithm>
#include <bit>
#include <functional>
#include <cstring>
#include <vector>

#include "runtime/kernels/thread_pool.hpp"

namespace tandem::rt {

namespace {

constexpr int kLanes = 16;

inline float Load(const float* p, std::int64_t i) { return p[i]; }
inline float Load(const std::uint16_t* p, std::int64_t i) { return std::bit_cast<float>(static_cast<std::uint32_t>(p[i]) << 16); }

// Σ w[i]·x[i] with kLanes independent partial sums combined in a fixed tree: the
// compiler vectorises the lanes, and the order never depends on the caller.
template <typename T>
float Dot(const T* w, const float* x, std::int64_t n) {
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

template <typename T>
void MatMulRows(const T* w, std::int64_t cols, std::int64_t rows, const float* x, std::int64_t batch, float* y,
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

void Run(ThreadPool* pool, std::int64_t n, std::int64_t min_chunk, const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (pool == nullptr) {
    fn(0, n);
  } else {
    pool->ParallelFor(n, fn, min_chunk);
  }
}

}  // namespace

void MatMul(const WeightMatrix& w, const float* x, std::int64_t batch, float* y, ThreadPool* pool) {
  // About 16k multiply-adds per chunk keeps dispatch overhead small for tiny layers.
  const std::int64_t min_chunk = std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, w.cols * batch));
  Run(pool, w.rows, min_chunk, [&](std::int64_t begin, std::int64_t end) {
    if (w.type == WeightMatrix::Type::kF32) {
      MatMulRows(static_cast<const float*>(w.data), w.cols, w.rows, x, batch, y, begin, end);
    } else {
      MatMulRows(static_cast<const std::uint16_t*>(w.data), w.cols, w.rows, x, batch, y, begin, end);
    }
  });
}

void MatMulTransposed(const WeightMatrix& w, const float* x, std::int64_t batch, float* y, ThreadPool* pool) {
  const std::int64_t min_chunk = std::max<std::int64_t>(16, 16384 / std::max<std::int64_t>(1, w.rows * batch));
  Run(pool, w.cols, min_chunk, [&](std::int64_t begin, std::int64_t end) {
    if (w.type == WeightMatrix::Type::kF32) {
      MatMulTransposedCols(static_cast<const float*>(w.data), w.rows, w.cols, x, batch, y, begin, end);
    } else {
      MatMulTransposedCols(static_cast<const std::uint16_t*>(w.data), w.rows, w.cols, x, batch, y, begin, end);
    }
  });
}

float Dot(const float* a, const float* b, std::int64_t n) { return Dot<float>(a, b, n); }

void CopyRow(const WeightMatrix& w, std::int64_t row, float* dst) {
  if (w.type == WeightMatrix::Type::kF32) {
    std::memcpy(dst, static_cast<const float*>(w.data) + row * w.cols, static_cast<std::size_t>(w.cols) * 4);
    return;
  }
  const auto* src = static_cast<const std::uint16_t*>(w.data) + row * w.cols;
  for (std::int64_t i = 0; i < w.cols; ++i) dst[i] = Load(src, i);
}

}  // namespace tandem::rt
