// Sampling on the device with the CPU sampler's choices: the same sort order, the
// same double arithmetic, the same sums in the same order (runtime/sampling).

#include <cfloat>
#include <cstdint>

#include <cub/device/device_segmented_radix_sort.cuh>

#include "runtime/kernels/cuda/device_memory.hpp"
#include "runtime/kernels/cuda/kernels.hpp"

namespace tandem::rt::cuda {

namespace {

constexpr int kThreads = 256;

__device__ std::uint64_t SplitMix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The CPU's TokenDraw in its two parts: (seed, position) mixed once per row.
__device__ std::uint64_t DrawStream(std::uint64_t seed, std::int64_t position) {
  return SplitMix64(seed ^ SplitMix64(static_cast<std::uint64_t>(position)));
}

__device__ double DrawOf(std::uint64_t stream, std::int32_t token) {
  const std::uint64_t bits = SplitMix64(stream ^ static_cast<std::uint64_t>(static_cast<std::uint32_t>(token)));
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

__global__ void SortInputsKernel(const float* logits, std::int64_t n, std::int64_t vocab, float* keys, std::int32_t* ids) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  keys[i] = logits[i] + 0.0f;  // −0 becomes +0: the CPU's comparison sees them equal (then id decides)
  ids[i] = static_cast<std::int32_t>(i % vocab);
}

__global__ void ArgMaxKernel(const float* logits, std::int64_t vocab, const SampleParams* params, std::int32_t* tokens) {
  __shared__ float best_value[kThreads];
  __shared__ std::int32_t best_id[kThreads];
  const std::int64_t b = blockIdx.x;
  if (params[b].temperature > 0.0f) return;  // a sampled row
  const float* l = logits + b * vocab;
  float value = -FLT_MAX;
  std::int32_t id = -1;
  for (std::int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    if (id < 0 || l[i] > value) {  // ascending i: the first of equal values stays
      value = l[i];
      id = static_cast<std::int32_t>(i);
    }
  }
  best_value[threadIdx.x] = value;
  best_id[threadIdx.x] = id;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) {
      const int other = static_cast<int>(threadIdx.x) + half;
      const std::int32_t a = best_id[threadIdx.x], c = best_id[other];
      const bool take =
          c >= 0 && (a < 0 || best_value[other] > best_value[threadIdx.x] || (best_value[other] == best_value[threadIdx.x] && c < a));
      if (take) {
        best_value[threadIdx.x] = best_value[other];
        best_id[threadIdx.x] = c;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) tokens[b] = best_id[0] < 0 ? 0 : best_id[0];
}

__global__ void SampleSortedKernel(const float* sorted_logits, const std::int32_t* sorted_ids, std::int64_t vocab,
                                   const SampleParams* params, double* prob_all, std::int32_t* tokens) {
  __shared__ double total;
  __shared__ std::int64_t survivors;
  __shared__ double best_key[kThreads];
  __shared__ std::int64_t best_at[kThreads];
  const std::int64_t b = blockIdx.x;
  const SampleParams p = params[b];
  if (!(p.temperature > 0.0f)) return;  // a greedy row (the whole block leaves)
  const float* l = sorted_logits + b * vocab;
  const std::int32_t* ids = sorted_ids + b * vocab;
  double* prob = prob_all + b * vocab;
  std::int64_t keep = vocab;
  if (p.top_k > 0 && p.top_k < keep) keep = p.top_k;
  const double inv_t = 1.0 / p.temperature;
  const double max = l[0];
  for (std::int64_t i = threadIdx.x; i < keep; i += kThreads) prob[i] = exp((l[i] - max) * inv_t);
  __syncthreads();
  if (threadIdx.x == 0) {  // the CPU's sum, in its order
    double sum = 0.0;
    for (std::int64_t i = 0; i < keep; ++i) sum += prob[i];
    total = sum;
  }
  __syncthreads();
  for (std::int64_t i = threadIdx.x; i < keep; i += kThreads) prob[i] /= total;
  __syncthreads();
  if (threadIdx.x == 0) {
    if (p.top_p < 1.0f) {
      double mass = 0.0;
      std::int64_t n = 0;
      while (n < keep && mass < p.top_p) mass += prob[n++];
      keep = n > 1 ? n : 1;
    }
    if (p.min_p > 0.0f) {
      const double floor = p.min_p * prob[0];
      std::int64_t n = 1;
      while (n < keep && prob[n] >= floor) ++n;
      keep = n;
    }
    survivors = keep;
  }
  __syncthreads();
  keep = survivors;
  // The CPU's exponential race: the smallest −log(draw) / p, the earlier survivor on ties.
  const std::uint64_t stream = DrawStream(p.seed, p.position);
  double key = 0.0;
  std::int64_t at = -1;
  for (std::int64_t i = threadIdx.x; i < keep; i += kThreads) {  // ascending i: the first of equal keys stays
    const double k = -log(DrawOf(stream, ids[i])) / prob[i];
    if (at < 0 || k < key) {
      key = k;
      at = i;
    }
  }
  best_key[threadIdx.x] = key;
  best_at[threadIdx.x] = at;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) {
      const int other = static_cast<int>(threadIdx.x) + half;
      const std::int64_t a = best_at[threadIdx.x], c = best_at[other];
      const bool take = c >= 0 && (a < 0 || best_key[other] < best_key[threadIdx.x] || (best_key[other] == best_key[threadIdx.x] && c < a));
      if (take) {
        best_key[threadIdx.x] = best_key[other];
        best_at[threadIdx.x] = c;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) tokens[b] = ids[best_at[0]];
}

}  // namespace

std::size_t SortTemporaryBytes(std::int64_t rows, std::int64_t vocab) {
  std::size_t bytes = 0;
  Check(cub::DeviceSegmentedRadixSort::SortPairsDescending(
            nullptr, bytes, static_cast<const float*>(nullptr), static_cast<float*>(nullptr), static_cast<const std::int32_t*>(nullptr),
            static_cast<std::int32_t*>(nullptr), rows * vocab, static_cast<std::int64_t>(rows), static_cast<const std::int32_t*>(nullptr),
            static_cast<const std::int32_t*>(nullptr)),
        "cub::DeviceSegmentedRadixSort (sizing)");
  return bytes;
}

void SortByLogit(const float* logits, std::int64_t rows, std::int64_t vocab, float* keys_in, float* sorted_logits, std::int32_t* ids_in,
                 std::int32_t* sorted_ids, const std::int32_t* offsets, void* temp, std::size_t temp_bytes, cudaStream_t stream) {
  const std::int64_t n = rows * vocab;
  if (n == 0) return;
  SortInputsKernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(logits, n, vocab, keys_in, ids_in);
  CheckLaunch("SortInputs");
  // A radix sort is stable: equal logits keep ascending ids, the CPU's tie rule.
  Check(cub::DeviceSegmentedRadixSort::SortPairsDescending(temp, temp_bytes, keys_in, sorted_logits, ids_in, sorted_ids, n, rows, offsets,
                                                           offsets + 1, 0, 32, stream),
        "cub::DeviceSegmentedRadixSort");
}

void ArgMax(const float* logits, std::int64_t rows, std::int64_t vocab, const SampleParams* params, std::int32_t* tokens,
            cudaStream_t stream) {
  if (rows == 0) return;
  ArgMaxKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, vocab, params, tokens);
  CheckLaunch("ArgMax");
}

void SampleSorted(const float* sorted_logits, const std::int32_t* sorted_ids, std::int64_t rows, std::int64_t vocab,
                  const SampleParams* params, double* prob, std::int32_t* tokens, cudaStream_t stream) {
  if (rows == 0) return;
  SampleSortedKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(sorted_logits, sorted_ids, vocab, params, prob, tokens);
  CheckLaunch("SampleSorted");
}

}  // namespace tandem::rt::cuda
