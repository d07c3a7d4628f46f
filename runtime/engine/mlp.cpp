#include "runtime/engine/mlp.hpp"

#include <algorithm>

#include "runtime/kernels/matmul.hpp"
#include "runtime/kernels/ops.hpp"
#include "runtime/kernels/thread_pool.hpp"
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
  // scratch: per task, its gate activations [batch × intermediate] then its up ones
  // (a fused gate_up product writes each row's gate then up: [batch × 2·intermediate]),
  // then, for a fused one, the SwiGLU of each row packed to [batch × intermediate] for
  // the down projection.
  thread_local std::vector<std::size_t> first;       // per task, where its scratch starts
  thread_local std::vector<std::int64_t> row_start;  // per task, its first row over all tasks
  first.assign(tasks.size() + 1, 0);
  row_start.assign(tasks.size() + 1, 0);
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const MlpTask& t = tasks[i];
    const std::int64_t n = t.batch * t.w->intermediate();
    first[i + 1] = first[i] + static_cast<std::size_t>((t.w->gate_up.empty() ? 2 : 3) * n);
    row_start[i + 1] = row_start[i] + t.batch;
  }
  scratch.resize(first.back());
  thread_local std::vector<MatMulTask> products;
  products.clear();
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const MlpTask& t = tasks[i];
    float* gate = scratch.data() + first[i];
    if (!t.w->gate_up.empty()) {
      products.push_back({&t.w->gate_up, t.x, t.batch, gate, nullptr});
    } else {
      products.push_back({&t.w->gate, t.x, t.batch, gate, nullptr});
      products.push_back({&t.w->up, t.x, t.batch, gate + t.batch * t.w->intermediate(), nullptr});
    }
  }
  MatMulMany(products, pool);

  // SwiGLU row by row over every task's rows (each row alone: the same bits on any
  // thread), on the pool when a prompt brings many.
  // (The pool's threads read the caller's thread_local vectors through these references.)
  const std::vector<std::size_t>& scratch_at = first;
  const std::vector<std::int64_t>& rows_at = row_start;
  const auto activate = [&](std::int64_t begin, std::int64_t end) {
    auto i = static_cast<std::size_t>(std::upper_bound(rows_at.begin(), rows_at.end(), begin) - rows_at.begin()) - 1;
    for (std::int64_t r = begin; r < end; ++r) {
      while (r >= rows_at[i + 1]) ++i;
      const MlpTask& t = tasks[i];
      const std::int64_t inter = t.w->intermediate(), b = r - rows_at[i];
      float* gate = scratch.data() + scratch_at[i];
      const float limit = t.w->swiglu_limit;
      const auto activate_row = [limit](float* g, const float* u, std::int64_t count) {
        if (limit > 0.0f) {
          SwiGluClamped(g, u, count, limit);
        } else {
          SwiGlu(g, u, count);
        }
      };
      if (!t.w->gate_up.empty()) {
        float* row = gate + 2 * b * inter;
        activate_row(row, row + inter, inter);
        std::copy_n(row, inter, gate + 2 * t.batch * inter + b * inter);
      } else {
        activate_row(gate + b * inter, gate + t.batch * inter + b * inter, inter);
      }
    }
  };
  constexpr std::int64_t kRowsPerShare = 16;
  ForShares(pool, row_start.back(), kRowsPerShare, activate);

  products.clear();
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const MlpTask& t = tasks[i];
    const std::int64_t n = t.batch * t.w->intermediate();
    const float* act = scratch.data() + first[i] + (t.w->gate_up.empty() ? 0 : 2 * n);
    products.push_back({&t.w->down, act, t.batch, t.out, t.out64});
  }
  MatMulMany(products, pool);
}

void MlpForward(const MlpWeights& w, const float* x, std::int64_t batch, float* out, Workspace<float>& scratch, ThreadPool* pool) {
  const MlpTask task{&w, x, batch, out, nullptr};
  MlpForwardMany(std::span<const MlpTask>(&task, 1), scratch, pool);
}

}  // namespace tandem::rt
