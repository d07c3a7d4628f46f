#include "runtime/engine/mlp.hpp"

#include <algorithm>

#include "runtime/kernels/matmul.hpp"
#include "runtime/kernels/ops.hpp"
#include "runtime/model/checkpoint.hpp"

namespace tandem::rt {

MlpWeights MlpWeights::Load(const Checkpoint& ckpt, const std::string& prefix, std::int64_t hidden, std::int64_t intermediate) {
  return Load(ckpt, prefix, hidden, intermediate, ckpt.placement());
}

MlpWeights MlpWeights::Load(const Checkpoint& ckpt, const std::string& prefix, std::int64_t hidden, std::int64_t intermediate,
                            WeightPlacement placement) {
  return {ckpt.Matrix(prefix + ".gate_proj.weight", intermediate, hidden, placement),
          ckpt.Matrix(prefix + ".up_proj.weight", intermediate, hidden, placement),
          ckpt.Matrix(prefix + ".down_proj.weight", hidden, intermediate, placement)};
}

void MlpForwardMany(std::span<const MlpTask> tasks, Workspace<float>& scratch, ThreadPool* pool) {
  // scratch: per task, its gate activations [batch × intermediate] then its up ones.
  std::size_t size = 0;
  for (const MlpTask& t : tasks) size += static_cast<std::size_t>(2 * t.batch * t.w->intermediate());
  scratch.resize(size);
  // A fused gate_up product writes each row's gate then up ([batch × 2·intermediate]).
  thread_local std::vector<MatMulTask> products;
  products.clear();
  std::size_t offset = 0;
  for (const MlpTask& t : tasks) {
    float* gate = scratch.data() + offset;
    float* up = gate + t.batch * t.w->intermediate();
    if (!t.w->gate_up.empty()) {
      products.push_back({&t.w->gate_up, t.x, t.batch, gate, nullptr});
    } else {
      products.push_back({&t.w->gate, t.x, t.batch, gate, nullptr});
      products.push_back({&t.w->up, t.x, t.batch, up, nullptr});
    }
    offset += static_cast<std::size_t>(2 * t.batch * t.w->intermediate());
  }
  MatMulMany(products, pool);
  products.clear();
  offset = 0;
  for (const MlpTask& t : tasks) {
    const std::int64_t inter = t.w->intermediate(), n = t.batch * inter;
    float* gate = scratch.data() + offset;
    if (!t.w->gate_up.empty()) {
      // Row by row, then packed to [batch × intermediate] for the down projection
      // (row b moves down to b·inter from 2b·inter: never onto rows not yet read).
      for (std::int64_t b = 0; b < t.batch; ++b) {
        float* row = gate + 2 * b * inter;
        SwiGlu(row, row + inter, inter);
        if (b > 0) std::copy_n(row, inter, gate + b * inter);
      }
    } else {
      SwiGlu(gate, gate + n, n);
    }
    products.push_back({&t.w->down, gate, t.batch, t.out, t.out64});
    offset += static_cast<std::size_t>(2 * n);
  }
  MatMulMany(products, pool);
}

void MlpForward(const MlpWeights& w, const float* x, std::int64_t batch, float* out, Workspace<float>& scratch, ThreadPool* pool) {
  const MlpTask task{&w, x, batch, out, nullptr};
  MlpForwardMany(std::span<const MlpTask>(&task, 1), scratch, pool);
}

}  // namespace tandem::rt
