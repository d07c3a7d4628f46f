#pragma once

#include <cstdint>
#include <span>

#include "runtime/kernels/weight_matrix.hpp"

namespace tandem::rt {

class ThreadPool;

// Y[b, o] = Σ_i W[o, i] · X[b, i] for b < batch: X is [batch × W.cols], Y is
// [batch × W.rows], fp32 accumulation. Each output is a dot product with a fixed
// summation order, so a row's result never depends on the batch around it, and
// threads split outputs, never a sum. `pool` may be null (one thread).
void MatMul(const WeightMatrix& w, const float* x, std::int64_t batch, float* y, ThreadPool* pool);

// MatMul with double accumulation and double output. Splitting such a sum (the
// intermediate dimension over tensor-parallel ranks) and adding the parts in
// double gives, once rounded to float, the same value as the whole sum: this is
// what makes a hybrid layout reproduce a single process.
void MatMulF64(const WeightMatrix& w, const float* x, std::int64_t batch, double* y, ThreadPool* pool);

// One product of MatMulMany: fp32 output into `y`, or (exact) double into `y64`.
struct MatMulTask {
  const WeightMatrix* w = nullptr;
  const float* x = nullptr;
  std::int64_t batch = 0;
  float* y = nullptr;
  double* y64 = nullptr;
};

// Several independent products as one parallel loop over all their output rows:
// one hand-off to the pool instead of one per matrix, which is what a MoE layer's
// small expert matrices need. Results are identical to MatMul / MatMulF64 on each.
void MatMulMany(std::span<const MatMulTask> tasks, ThreadPool* pool);

// Y[b, c] = Σ_r W[r, c] · X[b, r]: the product with Wᵀ (X is [batch × W.rows],
// Y is [batch × W.cols]); sums run over r in order, each product rounded before it
// is added (a group-quantized W: q · (scale · x), the scale's product rounded first;
// its input is not quantized, unlike MatMul's).
void MatMulTransposed(const WeightMatrix& w, const float* x, std::int64_t batch, float* y, ThreadPool* pool);

// Starts reading into L2 the bytes a product over `w` reads (software prefetches;
// results are unaffected). For several small products run one after another, whose
// own prefetches each start only when the product does: a decode row's per-head
// absorptions wait on memory for every head in turn.
void PrefetchWeights(const WeightMatrix& w);

// Σ a[i]·b[i] over fp32 vectors, with the same fixed summation order as MatMul.
float Dot(const float* a, const float* b, std::int64_t n);

}  // namespace tandem::rt
