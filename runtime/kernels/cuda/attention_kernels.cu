// MLA decode attention over the compressed cache, with the key up-projection
// absorbed into the query and the value up-projection applied to the attended latent.

#include <cfloat>
#include <cstdint>

#include "runtime/kernels/cuda/device_memory.hpp"
#include "runtime/kernels/cuda/kernels.hpp"
#include "runtime/kernels/cuda/warp_dot.cuh"

namespace tandem::rt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kWarp;
// Small blocks for AbsorbKeys: a decode step has only heads × latent threads of it,
// which should spread over many multiprocessors.
constexpr int kAbsorbThreads = 64;
constexpr int kChunk = 256;  // cache entries scored at a time
constexpr int kMaxLatentPerThread = kMaxAttentionLatent / kThreads;

unsigned Blocks(std::int64_t n, std::int64_t per_block) { return static_cast<unsigned>((n + per_block - 1) / per_block); }

template <typename T>
__global__ void AbsorbKeysKernel(const T* key_up, std::int64_t heads, std::int64_t nope, std::int64_t latent, const float* q,
                                 std::int64_t q_stride, std::int64_t rows, float* q_abs) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * heads * latent) return;
  const std::int64_t c = i % latent, bh = i / latent, h = bh % heads;
  const float* qn = q + bh * q_stride;
  const T* k = key_up + h * nope * latent + c;
  float sum = 0.0f;
#pragma unroll 8
  for (std::int64_t n = 0; n < nope; ++n) sum += Load1(k + n * latent) * qn[n];
  q_abs[i] = sum;
}

// A block-wide reduction in a fixed tree order; every thread gets the result.
template <typename Op>
__device__ float BlockReduce(float v, float* shared, Op op) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) shared[threadIdx.x] = op(shared[threadIdx.x], shared[threadIdx.x + half]);
    __syncthreads();
  }
  const float result = shared[0];
  __syncthreads();
  return result;
}

// One block per (row, head), an online softmax over chunks of the cache: a chunk's
// scores (a warp per entry) in shared memory, then the running maximum and sum and
// the accumulated latent (a thread per latent dimension, t ascending) rescaled to
// the new maximum. No scratch the size of the context, and a fixed order of
// operations for every (row, head): batch invariant.
__global__ void LatentAttentionKernel(const float* q_abs, const float* q, std::int64_t q_stride, std::int64_t q_rope_offset,
                                      CacheRows cache, int layer, std::int64_t heads, std::int64_t latent, std::int64_t rope, float scale,
                                      float* out) {
  __shared__ float s[kChunk];
  __shared__ float reduce[kThreads];
  const std::int64_t bh = blockIdx.x, b = bh / heads;
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const std::int64_t len = cache.positions[b] + 1;
  const float* entries = cache.caches[b] + static_cast<std::int64_t>(layer) * cache.capacities[b] * cache.width;
  const float* qa = q_abs + bh * latent;
  const float* qr = q + bh * q_stride + q_rope_offset;

  float acc[kMaxLatentPerThread];
#pragma unroll
  for (int k = 0; k < kMaxLatentPerThread; ++k) acc[k] = 0.0f;
  float running_max = -INFINITY, running_sum = 0.0f;
  for (std::int64_t t0 = 0; t0 < len; t0 += kChunk) {
    const std::int64_t count = min(static_cast<std::int64_t>(kChunk), len - t0);
    for (std::int64_t t = warp; t < count; t += kWarpsPerBlock) {
      const float* entry = entries + (t0 + t) * cache.width;
      float dot_latent = 0.0f, dot_rope = 0.0f;
      for (std::int64_t c = lane; c < latent; c += kWarp) dot_latent += qa[c] * entry[c];
      for (std::int64_t c = lane; c < rope; c += kWarp) dot_rope += qr[c] * entry[latent + c];
      dot_latent = WarpSum(dot_latent);
      dot_rope = WarpSum(dot_rope);
      if (lane == 0) s[t] = (dot_latent + dot_rope) * scale;
    }
    __syncthreads();
    float local_max = -INFINITY;
    for (std::int64_t t = threadIdx.x; t < count; t += kThreads) local_max = fmaxf(local_max, s[t]);
    const float new_max = fmaxf(running_max, BlockReduce(local_max, reduce, [](float a, float c) { return fmaxf(a, c); }));
    const float rescale = expf(running_max - new_max);  // 0 for the first chunk
    float local_sum = 0.0f;
    for (std::int64_t t = threadIdx.x; t < count; t += kThreads) {
      const float e = expf(s[t] - new_max);
      s[t] = e;
      local_sum += e;
    }
    running_sum = running_sum * rescale + BlockReduce(local_sum, reduce, [](float a, float c) { return a + c; });
#pragma unroll
    for (int k = 0; k < kMaxLatentPerThread; ++k) {
      const std::int64_t c = threadIdx.x + static_cast<std::int64_t>(k) * kThreads;
      if (c >= latent) break;
      float sum = 0.0f;
#pragma unroll 8
      for (std::int64_t t = 0; t < count; ++t) sum += s[t] * entries[(t0 + t) * cache.width + c];
      acc[k] = acc[k] * rescale + sum;
    }
    running_max = new_max;
    __syncthreads();  // every thread is done with s before the next chunk's scores
  }
#pragma unroll
  for (int k = 0; k < kMaxLatentPerThread; ++k) {
    const std::int64_t c = threadIdx.x + static_cast<std::int64_t>(k) * kThreads;
    if (c < latent) out[bh * latent + c] = acc[k] / running_sum;
  }
}

template <bool Vec, typename T>
__global__ void ApplyValuesKernel(const T* value_up, std::int64_t heads, std::int64_t v_dim, std::int64_t latent, const float* latents,
                                  std::int64_t rows, float* o) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (i >= rows * heads * v_dim) return;
  const std::int64_t v = i % v_dim, bh = i / v_dim, h = bh % heads;
  const T* w[1] = {value_up + (h * v_dim + v) * latent};
  const float* x[1] = {latents + bh * latent};
  float sum[1][1];
  WarpDots<1, 1, Vec>(w, latent, x, lane, sum);
  if (lane == 0) o[i] = sum[0][0];
}

}  // namespace

void AbsorbKeys(const MatrixView& key_up, std::int64_t heads, std::int64_t nope, std::int64_t latent, const float* q, std::int64_t q_stride,
                std::int64_t rows, float* q_abs, cudaStream_t stream) {
  const std::int64_t n = rows * heads * latent;
  if (n == 0) return;
  if (key_up.type == DType::kBF16) {
    AbsorbKeysKernel<<<Blocks(n, kAbsorbThreads), kAbsorbThreads, 0, stream>>>(static_cast<const std::uint16_t*>(key_up.data), heads, nope,
                                                                               latent, q, q_stride, rows, q_abs);
  } else {
    AbsorbKeysKernel<<<Blocks(n, kAbsorbThreads), kAbsorbThreads, 0, stream>>>(static_cast<const float*>(key_up.data), heads, nope, latent,
                                                                               q, q_stride, rows, q_abs);
  }
  CheckLaunch("AbsorbKeys");
}

void LatentAttention(const float* q_abs, const float* q, std::int64_t q_stride, std::int64_t q_rope_offset, const CacheRows& cache,
                     int layer, std::int64_t rows, std::int64_t heads, std::int64_t latent, std::int64_t rope, float scale, float* out,
                     cudaStream_t stream) {
  if (rows * heads == 0) return;
  LatentAttentionKernel<<<static_cast<unsigned>(rows * heads), kThreads, 0, stream>>>(q_abs, q, q_stride, q_rope_offset, cache, layer,
                                                                                      heads, latent, rope, scale, out);
  CheckLaunch("LatentAttention");
}

void ApplyValues(const MatrixView& value_up, std::int64_t heads, std::int64_t v_dim, std::int64_t latent, const float* latents,
                 std::int64_t rows, float* o, cudaStream_t stream) {
  const std::int64_t n = rows * heads * v_dim;
  if (n == 0) return;
  const bool vec = latent % 8 == 0;  // rows of value_up and of latents then start 32-byte aligned
  const unsigned blocks = Blocks(n, kWarpsPerBlock);
  if (value_up.type == DType::kBF16) {
    const auto* w = static_cast<const std::uint16_t*>(value_up.data);
    if (vec) {
      ApplyValuesKernel<true><<<blocks, kThreads, 0, stream>>>(w, heads, v_dim, latent, latents, rows, o);
    } else {
      ApplyValuesKernel<false><<<blocks, kThreads, 0, stream>>>(w, heads, v_dim, latent, latents, rows, o);
    }
  } else {
    const auto* w = static_cast<const float*>(value_up.data);
    if (vec) {
      ApplyValuesKernel<true><<<blocks, kThreads, 0, stream>>>(w, heads, v_dim, latent, latents, rows, o);
    } else {
      ApplyValuesKernel<false><<<blocks, kThreads, 0, stream>>>(w, heads, v_dim, latent, latents, rows, o);
    }
  }
  CheckLaunch("ApplyValues");
}

}  // namespace tandem::rt::cuda
