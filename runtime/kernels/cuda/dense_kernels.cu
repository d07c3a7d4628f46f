// Dense products and the row-wise operations of the forward pass.

#include <cstdint>

#include "runtime/kernels/cuda/device_memory.hpp"
#include "runtime/kernels/cuda/kernels.hpp"
#include "runtime/kernels/cuda/warp_dot.cuh"

namespace tandem::rt::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kBatchTile = 4;  // input rows per pass over a weight row
// Weight rows per warp (each input chunk is loaded once for all of them): 4 for one
// input row, 8 for several, where the inputs' loads would otherwise be the limit. Every
// output's sum is the same either way.
constexpr int kRowTileOne = 4;
constexpr int kRowTileMany = 8;
constexpr int kThreads = 256;

unsigned Blocks(std::int64_t n, std::int64_t per_block) { return static_cast<unsigned>((n + per_block - 1) / per_block); }

bool Aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

template <int kRowTile, bool Vec, typename T>
__global__ void GemvKernel(const T* w, std::int64_t rows, std::int64_t cols, const float* x, std::int64_t x_stride, std::int64_t batch,
                           float* y, std::int64_t y_stride, bool accumulate) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const std::int64_t r0 = (static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp) * kRowTile;
  if (r0 >= rows) return;
  const T* w_rows[kRowTile];
#pragma unroll
  for (int r = 0; r < kRowTile; ++r) w_rows[r] = w + min(r0 + r, rows - 1) * cols;  // past the end: read row rows−1, not written
  for (std::int64_t b0 = 0; b0 < batch; b0 += kBatchTile) {
    const float* xs[kBatchTile];
#pragma unroll
    for (int j = 0; j < kBatchTile; ++j) xs[j] = b0 + j < batch ? x + (b0 + j) * x_stride : nullptr;
    float sums[kRowTile][kBatchTile];
    WarpDots<kRowTile, kBatchTile, Vec>(w_rows, cols, xs, lane, sums);
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < kRowTile; ++r) {
        if (r0 + r >= rows) break;
#pragma unroll
        for (int j = 0; j < kBatchTile; ++j) {
          if (xs[j] == nullptr) continue;
          float* out = y + (b0 + j) * y_stride + r0 + r;
          *out = accumulate ? *out + sums[r][j] : sums[r][j];
        }
      }
    }
  }
}

template <typename T>
void LaunchGemv(const MatrixView& w, const float* x, std::int64_t x_stride, std::int64_t batch, float* y, std::int64_t y_stride,
                bool accumulate, cudaStream_t stream) {
  const auto* data = static_cast<const T*>(w.data);
  const bool vec = w.cols % 8 == 0 && x_stride % 4 == 0 && Aligned16(x) && Aligned16(data);
  const int tile = batch > 1 ? kRowTileMany : kRowTileOne;
  const unsigned blocks = Blocks(w.rows, kWarpsPerBlock * tile);
  const unsigned threads = kWarpsPerBlock * kWarp;
  if (tile == kRowTileOne) {
    if (vec) {
      GemvKernel<kRowTileOne, true><<<blocks, threads, 0, stream>>>(data, w.rows, w.cols, x, x_stride, batch, y, y_stride, accumulate);
    } else {
      GemvKernel<kRowTileOne, false><<<blocks, threads, 0, stream>>>(data, w.rows, w.cols, x, x_stride, batch, y, y_stride, accumulate);
    }
  } else if (vec) {
    GemvKernel<kRowTileMany, true><<<blocks, threads, 0, stream>>>(data, w.rows, w.cols, x, x_stride, batch, y, y_stride, accumulate);
  } else {
    GemvKernel<kRowTileMany, false><<<blocks, threads, 0, stream>>>(data, w.rows, w.cols, x, x_stride, batch, y, y_stride, accumulate);
  }
  CheckLaunch("Gemv");
}

template <typename T>
__global__ void EmbedKernel(const T* table, std::int64_t cols, const std::int32_t* tokens, std::int64_t rows, float* out) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const std::int64_t b = i / cols, c = i % cols;
  out[i] = Load1(table + static_cast<std::int64_t>(tokens[b]) * cols + c);
}

__global__ void RmsNormKernel(const float* x, std::int64_t x_stride, const float* weight, std::int64_t n, float eps, float* out,
                              std::int64_t out_stride) {
  __shared__ double partial[kThreads];
  const float* in = x + static_cast<std::int64_t>(blockIdx.x) * x_stride;
  float* o = out + static_cast<std::int64_t>(blockIdx.x) * out_stride;
  double sum = 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += kThreads) sum += static_cast<double>(in[i]) * in[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  const auto scale = static_cast<float>(1.0 / sqrt(partial[0] / static_cast<double>(n) + eps));
  // Every thread has read `partial[0]` before any writes `o` (which may alias `in`:
  // each element is read and written by the same thread).
  for (std::int64_t i = threadIdx.x; i < n; i += kThreads) o[i] = in[i] * scale * weight[i];
}

__global__ void AddKernel(float* x, const float* y, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += y[i];
}

__global__ void SwiGluKernel(float* gate, const float* up, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  gate[i] = g / (1.0f + expf(-g)) * up[i];
}

__global__ void RopeKernel(float* v, std::int64_t rows, std::int64_t row_stride, std::int64_t offset, std::int64_t count,
                           std::int64_t vector_stride, std::int64_t dim, const std::int32_t* positions, const double* inv_freq,
                           double mscale) {
  const std::int64_t half = dim / 2;
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * count * half) return;
  const std::int64_t pair = i % half, vec = (i / half) % count, b = i / (half * count);
  const double angle = static_cast<double>(positions[b]) * inv_freq[pair];
  const auto c = static_cast<float>(cos(angle) * mscale);
  const auto s = static_cast<float>(sin(angle) * mscale);
  float* p = v + b * row_stride + offset + vec * vector_stride + 2 * pair;
  const float a = p[0], q = p[1];
  p[0] = a * c - q * s;
  p[1] = q * c + a * s;
}

__global__ void StoreLatentsKernel(const float* kv_a, std::int64_t rows, CacheRows cache, int layer, float* staging) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cache.width) return;
  const std::int64_t b = i / cache.width, j = i % cache.width;
  const float value = kv_a[i];
  const std::int64_t entry = static_cast<std::int64_t>(layer) * cache.capacities[b] + cache.positions[b];
  cache.caches[b][entry * cache.width + j] = value;
  staging[i] = value;
}

}  // namespace

void Gemv(const MatrixView& w, const float* x, std::int64_t x_stride, std::int64_t batch, float* y, std::int64_t y_stride, bool accumulate,
          cudaStream_t stream) {
  if (batch <= 0 || w.rows == 0) return;
  if (w.type == DType::kBF16) {
    LaunchGemv<std::uint16_t>(w, x, x_stride, batch, y, y_stride, accumulate, stream);
  } else {
    LaunchGemv<float>(w, x, x_stride, batch, y, y_stride, accumulate, stream);
  }
}

void Embed(const MatrixView& table, const std::int32_t* tokens, std::int64_t rows, float* out, cudaStream_t stream) {
  const std::int64_t n = rows * table.cols;
  if (n == 0) return;
  if (table.type == DType::kBF16) {
    EmbedKernel<<<Blocks(n, kThreads), kThreads, 0, stream>>>(static_cast<const std::uint16_t*>(table.data), table.cols, tokens, rows, out);
  } else {
    EmbedKernel<<<Blocks(n, kThreads), kThreads, 0, stream>>>(static_cast<const float*>(table.data), table.cols, tokens, rows, out);
  }
  CheckLaunch("Embed");
}

void RmsNorm(const float* x, std::int64_t x_stride, const float* weight, std::int64_t rows, std::int64_t n, float eps, float* out,
             std::int64_t out_stride, cudaStream_t stream) {
  if (rows == 0) return;
  RmsNormKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, x_stride, weight, n, eps, out, out_stride);
  CheckLaunch("RmsNorm");
}

void Add(float* x, const float* y, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  AddKernel<<<Blocks(n, kThreads), kThreads, 0, stream>>>(x, y, n);
  CheckLaunch("Add");
}

void SwiGlu(float* gate, const float* up, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  SwiGluKernel<<<Blocks(n, kThreads), kThreads, 0, stream>>>(gate, up, n);
  CheckLaunch("SwiGlu");
}

void Rope(float* v, std::int64_t rows, std::int64_t row_stride, std::int64_t offset, std::int64_t count, std::int64_t vector_stride,
          std::int64_t dim, const std::int32_t* positions, const double* inv_freq, double mscale, cudaStream_t stream) {
  const std::int64_t n = rows * count * (dim / 2);
  if (n == 0) return;
  RopeKernel<<<Blocks(n, kThreads), kThreads, 0, stream>>>(v, rows, row_stride, offset, count, vector_stride, dim, positions, inv_freq,
                                                           mscale);
  CheckLaunch("Rope");
}

void StoreLatents(const float* kv_a, std::int64_t rows, const CacheRows& cache, int layer, float* staging, cudaStream_t stream) {
  const std::int64_t n = rows * cache.width;
  if (n == 0) return;
  StoreLatentsKernel<<<Blocks(n, kThreads), kThreads, 0, stream>>>(kv_a, rows, cache, layer, staging);
  CheckLaunch("StoreLatents");
}

}  // namespace tandem::rt::cuda
