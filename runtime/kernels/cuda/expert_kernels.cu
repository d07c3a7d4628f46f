// The MoE layer on the device: routing, rows grouped by expert, the experts'
// SwiGLU products over their groups, and the weighted route sum.

#include <cstdint>

#include "runtime/kernels/cuda/device_memory.hpp"
#include "runtime/kernels/cuda/kernels.hpp"
#include "runtime/kernels/cuda/warp_dot.cuh"

namespace tandem::rt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kWarp;
constexpr int kSlotTile = 4;   // slots per pass over an expert's weight rows
constexpr int kInterTile = 2;  // intermediate rows per warp (each with its gate and up row)
constexpr int kOutTile = 4;    // down-projection rows per warp

// ScoringFunc and TopkMethod values (runtime/model/model_config.hpp).
constexpr int kSoftmax = 0, kSigmoid = 1;
constexpr int kGreedy = 0, kNoauxTc = 2;

unsigned Blocks(std::int64_t n, std::int64_t per_block) { return static_cast<unsigned>((n + per_block - 1) / per_block); }

constexpr int kRouteThreads = 128;

// A block per row, the CPU router's arithmetic (Router::Route) step by step: the
// scores (independent per expert) and the group scores in parallel, every sum in
// the CPU's order in one thread, and top groups and top-k as arg-max reductions
// with its tie rule (value descending, lower id first), which are exact.
__global__ void RouteKernel(const float* logits, RouterParams p, const float* bias, std::int32_t* experts, float* weights) {
  __shared__ double scores[kMaxRoutedExperts];
  __shared__ double choice[kMaxRoutedExperts];
  __shared__ double group_score[kMaxRoutedExperts];
  __shared__ bool keep[kMaxRoutedExperts];
  __shared__ double best_value[kRouteThreads];
  __shared__ int best_id[kRouteThreads];
  __shared__ int order[kMaxRoutedExperts];
  __shared__ double sum;
  const std::int64_t b = blockIdx.x;
  const int t = static_cast<int>(threadIdx.x);
  const int n = p.experts;
  const float* l = logits + b * n;

  if (p.scoring == kSoftmax) {
    if (t == 0) {
      float top = l[0];
      for (int e = 1; e < n; ++e) top = l[e] > top ? l[e] : top;
      const double max = top;  // Router::Route subtracts in double
      for (int e = 0; e < n; ++e) scores[e] = exp(static_cast<double>(l[e]) - max);
      double total = 0.0;
      for (int e = 0; e < n; ++e) total += scores[e];
      sum = total;
    }
    __syncthreads();
    for (int e = t; e < n; e += kRouteThreads) scores[e] /= sum;
  } else if (p.scoring == kSigmoid) {
    for (int e = t; e < n; e += kRouteThreads) scores[e] = 1.0 / (1.0 + exp(-static_cast<double>(l[e])));
  } else {
    for (int e = t; e < n; e += kRouteThreads) {
      const double z = l[e];
      scores[e] = sqrt(z > 30.0 ? z : log1p(exp(z)));
    }
  }
  __syncthreads();
  for (int e = t; e < n; e += kRouteThreads) choice[e] = scores[e] + (p.topk_method == kNoauxTc && bias != nullptr ? bias[e] : 0.0);
  __syncthreads();

  if (p.topk_method != kGreedy && p.groups > 1) {
    const int per_group = n / p.groups;
    for (int g = t; g < p.groups; g += kRouteThreads) {
      double first = -INFINITY, second = -INFINITY;
      for (int e = g * per_group; e < (g + 1) * per_group; ++e) {
        if (choice[e] > first) {
          second = first;
          first = choice[e];
        } else if (choice[e] > second) {
          second = choice[e];
        }
      }
      group_score[g] = p.topk_method == kNoauxTc ? first + (per_group > 1 ? second : 0.0) : first;
      keep[g] = false;
    }
    __syncthreads();
    if (t == 0) {  // the best groups, lower index on ties
      for (int i = 0; i < p.top_groups; ++i) {
        int best = -1;
        for (int g = 0; g < p.groups; ++g) {
          if (!keep[g] && (best < 0 || group_score[g] > group_score[best])) best = g;
        }
        keep[best] = true;
      }
    }
    __syncthreads();
    for (int e = t; e < n; e += kRouteThreads) {
      if (!keep[e / per_group]) choice[e] = -INFINITY;
    }
  }
  __syncthreads();

  // Top-k: k arg-max reductions; a chosen expert leaves the race (its id is taken).
  for (int i = 0; i < p.top_k; ++i) {
    double value = -INFINITY;
    int id = -1;
    for (int e = t; e < n; e += kRouteThreads) {
      bool taken = false;
      for (int j = 0; j < i; ++j) taken = taken || order[j] == e;
      if (!taken && (id < 0 || choice[e] > value)) {  // e ascending: the first of equal values stays
        value = choice[e];
        id = e;
      }
    }
    best_value[t] = value;
    best_id[t] = id;
    __syncthreads();
    for (int half = kRouteThreads / 2; half > 0; half /= 2) {
      if (t < half) {
        const int other = best_id[t + half], mine = best_id[t];
        if (other >= 0 && (mine < 0 || best_value[t + half] > best_value[t] || (best_value[t + half] == best_value[t] && other < mine))) {
          best_value[t] = best_value[t + half];
          best_id[t] = other;
        }
      }
      __syncthreads();
    }
    if (t == 0) order[i] = best_id[0];
    __syncthreads();
  }

  if (t == 0) {
    double total = 0.0;
    for (int i = 0; i < p.top_k; ++i) total += scores[order[i]];
    const bool normalise = p.top_k > 1 && p.norm_topk_prob;
    for (int i = 0; i < p.top_k; ++i) {
      double w = scores[order[i]];
      if (normalise) w /= total + 1e-20;
      if (p.scale) w *= p.routed_scaling_factor;
      experts[b * p.top_k + i] = order[i];
      weights[b * p.top_k + i] = static_cast<float>(w);
    }
  }
}

// A counting sort in one thread, which keeps the order (expert, then route index)
// fixed: a decode step has tens to hundreds of routes (a few microseconds); a long
// prefill pass has thousands, a cost that is small beside its products.
__global__ void GroupRoutesKernel(const std::int32_t* experts, std::int64_t routes, int expert_begin, int expert_end,
                                  std::int32_t* slot_route, std::int32_t* offsets, std::int32_t* route_slot) {
  const int local = expert_end - expert_begin;
  for (int e = 0; e <= local; ++e) offsets[e] = 0;
  for (std::int64_t r = 0; r < routes; ++r) {
    const int e = experts[r];
    if (e >= expert_begin && e < expert_end) ++offsets[e - expert_begin + 1];
  }
  for (int e = 0; e < local; ++e) offsets[e + 1] += offsets[e];
  int cursor[kMaxRoutedExperts];
  for (int e = 0; e < local; ++e) cursor[e] = offsets[e];
  for (std::int64_t r = 0; r < routes; ++r) {
    const int e = experts[r];
    if (e >= expert_begin && e < expert_end) {
      const int slot = cursor[e - expert_begin]++;
      slot_route[slot] = static_cast<std::int32_t>(r);
      route_slot[r] = slot;
    } else {
      route_slot[r] = -1;
    }
  }
}

template <bool Vec, typename T>
__global__ void ExpertGateUpKernel(const T* gate, const T* up, std::int64_t inter, std::int64_t hidden, const float* x,
                                   const std::int32_t* slot_route, const std::int32_t* offsets, int top_k, float* h) {
  const std::int64_t e = blockIdx.x;
  const int begin = offsets[e], end = offsets[e + 1];
  if (begin == end) return;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const std::int64_t i0 = (static_cast<std::int64_t>(blockIdx.y) * kWarpsPerBlock + threadIdx.x / kWarp) * kInterTile;
  if (i0 >= inter) return;
  // Rows i0, i0 + 1 of gate, then the same rows of up (a row past the end reads the
  // last row and is not written).
  const T* w[2 * kInterTile];
#pragma unroll
  for (int r = 0; r < kInterTile; ++r) {
    const std::int64_t i = min(i0 + r, inter - 1);
    w[r] = gate + (e * inter + i) * hidden;
    w[kInterTile + r] = up + (e * inter + i) * hidden;
  }
  for (int s0 = begin; s0 < end; s0 += kSlotTile) {
    const float* xs[kSlotTile];
#pragma unroll
    for (int j = 0; j < kSlotTile; ++j) {
      xs[j] = s0 + j < end ? x + static_cast<std::int64_t>(slot_route[s0 + j] / top_k) * hidden : nullptr;
    }
    float sums[2 * kInterTile][kSlotTile];
    WarpDots<2 * kInterTile, kSlotTile, Vec>(w, hidden, xs, lane, sums);
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < kInterTile; ++r) {
        if (i0 + r >= inter) break;
#pragma unroll
        for (int j = 0; j < kSlotTile; ++j) {
          if (xs[j] == nullptr) continue;
          const float g = sums[r][j], u = sums[kInterTile + r][j];
          h[static_cast<std::int64_t>(s0 + j) * inter + i0 + r] = g / (1.0f + expf(-g)) * u;
        }
      }
    }
  }
}

template <bool Vec, typename T>
__global__ void ExpertDownKernel(const T* down, std::int64_t hidden, std::int64_t inter, const float* h, const std::int32_t* offsets,
                                 float* y) {
  const std::int64_t e = blockIdx.x;
  const int begin = offsets[e], end = offsets[e + 1];
  if (begin == end) return;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const std::int64_t o0 = (static_cast<std::int64_t>(blockIdx.y) * kWarpsPerBlock + threadIdx.x / kWarp) * kOutTile;
  if (o0 >= hidden) return;
  const T* w[kOutTile];
#pragma unroll
  for (int r = 0; r < kOutTile; ++r) w[r] = down + (e * hidden + min(o0 + r, hidden - 1)) * inter;
  for (int s0 = begin; s0 < end; s0 += kSlotTile) {
    const float* hs[kSlotTile];
#pragma unroll
    for (int j = 0; j < kSlotTile; ++j) hs[j] = s0 + j < end ? h + static_cast<std::int64_t>(s0 + j) * inter : nullptr;
    float sums[kOutTile][kSlotTile];
    WarpDots<kOutTile, kSlotTile, Vec>(w, inter, hs, lane, sums);
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < kOutTile; ++r) {
        if (o0 + r >= hidden) break;
#pragma unroll
        for (int j = 0; j < kSlotTile; ++j) {
          if (hs[j] != nullptr) y[static_cast<std::int64_t>(s0 + j) * hidden + o0 + r] = sums[r][j];
        }
      }
    }
  }
}

__global__ void CombineRoutesKernel(const float* y, const std::int32_t* route_slot, const float* weights, std::int64_t rows, int top_k,
                                    std::int64_t hidden, const float* shared, float* out32, double* out64) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * hidden) return;
  const std::int64_t b = i / hidden, o = i % hidden;
  double sum = 0.0;
  for (int k = 0; k < top_k; ++k) {
    const std::int32_t slot = route_slot[b * top_k + k];
    if (slot < 0) continue;
    sum += static_cast<double>(weights[b * top_k + k]) * static_cast<double>(y[static_cast<std::int64_t>(slot) * hidden + o]);
  }
  if (shared != nullptr) sum += shared[i];
  if (out64 != nullptr) {
    out64[i] = sum;
  } else {
    out32[i] = static_cast<float>(sum);
  }
}

template <typename T>
void LaunchGateUp(const MatrixView& gate, const MatrixView& up, std::int64_t experts, std::int64_t inter, std::int64_t hidden,
                  const float* x, const std::int32_t* slot_route, const std::int32_t* offsets, int top_k, float* h, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(experts), Blocks(inter, kWarpsPerBlock * kInterTile));
  const auto* g = static_cast<const T*>(gate.data);
  const auto* u = static_cast<const T*>(up.data);
  if (hidden % 8 == 0) {
    ExpertGateUpKernel<true><<<grid, kThreads, 0, stream>>>(g, u, inter, hidden, x, slot_route, offsets, top_k, h);
  } else {
    ExpertGateUpKernel<false><<<grid, kThreads, 0, stream>>>(g, u, inter, hidden, x, slot_route, offsets, top_k, h);
  }
}

template <typename T>
void LaunchDown(const MatrixView& down, std::int64_t experts, std::int64_t hidden, std::int64_t inter, const float* h,
                const std::int32_t* offsets, float* y, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(experts), Blocks(hidden, kWarpsPerBlock * kOutTile));
  const auto* d = static_cast<const T*>(down.data);
  if (inter % 8 == 0) {
    ExpertDownKernel<true><<<grid, kThreads, 0, stream>>>(d, hidden, inter, h, offsets, y);
  } else {
    ExpertDownKernel<false><<<grid, kThreads, 0, stream>>>(d, hidden, inter, h, offsets, y);
  }
}

}  // namespace

void Route(const float* logits, std::int64_t rows, const RouterParams& params, const float* bias, std::int32_t* experts, float* weights,
           cudaStream_t stream) {
  if (rows == 0) return;
  RouteKernel<<<static_cast<unsigned>(rows), kRouteThreads, 0, stream>>>(logits, params, bias, experts, weights);
  CheckLaunch("Route");
}

void GroupRoutes(const std::int32_t* experts, std::int64_t routes, int expert_begin, int expert_end, std::int32_t* slot_route,
                 std::int32_t* offsets, std::int32_t* route_slot, cudaStream_t stream) {
  GroupRoutesKernel<<<1, 1, 0, stream>>>(experts, routes, expert_begin, expert_end, slot_route, offsets, route_slot);
  CheckLaunch("GroupRoutes");
}

void ExpertGateUp(const MatrixView& gate, const MatrixView& up, std::int64_t experts, std::int64_t inter, std::int64_t hidden,
                  const float* x, const std::int32_t* slot_route, const std::int32_t* offsets, int top_k, float* h, cudaStream_t stream) {
  if (experts == 0 || inter == 0) return;
  if (gate.type == DType::kBF16) {
    LaunchGateUp<std::uint16_t>(gate, up, experts, inter, hidden, x, slot_route, offsets, top_k, h, stream);
  } else {
    LaunchGateUp<float>(gate, up, experts, inter, hidden, x, slot_route, offsets, top_k, h, stream);
  }
  CheckLaunch("ExpertGateUp");
}

void ExpertDown(const MatrixView& down, std::int64_t experts, std::int64_t hidden, std::int64_t inter, const float* h,
                const std::int32_t* offsets, float* y, cudaStream_t stream) {
  if (experts == 0 || inter == 0) return;
  if (down.type == DType::kBF16) {
    LaunchDown<std::uint16_t>(down, experts, hidden, inter, h, offsets, y, stream);
  } else {
    LaunchDown<float>(down, experts, hidden, inter, h, offsets, y, stream);
  }
  CheckLaunch("ExpertDown");
}

void CombineRoutes(const float* y, const std::int32_t* route_slot, const float* weights, std::int64_t rows, int top_k, std::int64_t hidden,
                   const float* shared, float* out32, double* out64, cudaStream_t stream) {
  const std::int64_t n = rows * hidden;
  if (n == 0) return;
  CombineRoutesKernel<<<Blocks(n, kThreads), kThreads, 0, stream>>>(y, route_slot, weights, rows, top_k, hidden, shared, out32, out64);
  CheckLaunch("CombineRoutes");
}

}  // namespace tandem::rt::cuda
