#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/kernels/weight_matrix.hpp"
#include "runtime/kernels/workspace_memory.hpp"

namespace tandem::rt {

class Checkpoint;
class ThreadPool;
enum class WeightPlacement;

// A SwiGLU feed-forward block (dense layer, shared experts, or one routed expert):
// down · (silu(gate · x) ⊙ (up · x)).
struct MlpWeights {
  WeightMatrix gate;  // [intermediate × hidden]
  WeightMatrix up;    // [intermediate × hidden]
  WeightMatrix down;  // [hidden × intermediate]
  // When set (a group-quantized expert computed on the CPU, see MoeSlices), gate's
  // rows then up's as one matrix, read as one product (one stream instead of two
  // short ones); gate and up are then empty. The same bits: rows are independent.
  WeightMatrix gate_up;
  // DeepSeek V4.1's SwiGLU clamp (SwiGluClamped); 0: none.
  float swiglu_limit = 0.0f;

  // Loads <prefix>.gate_proj.weight, up_proj and down_proj, placed as the checkpoint
  // places matrices or as asked.
  static MlpWeights Load(const Checkpoint& ckpt, const std::string& prefix, std::int64_t hidden, std::int64_t intermediate);
  static MlpWeights Load(const Checkpoint& ckpt, const std::string& prefix, std::int64_t hidden, std::int64_t intermediate,
                         WeightPlacement placement);
  std::int64_t intermediate() const { return gate_up.empty() ? gate.rows : gate_up.rows / 2; }
};

// One MLP of MlpForwardMany: its input rows and where its output goes (fp32 `out`,
// or `out64` with the down projection accumulated in double).
struct MlpTask {
  const MlpWeights* w = nullptr;
  const float* x = nullptr;
  std::int64_t batch = 0;
  float* out = nullptr;
  double* out64 = nullptr;
};

// Several MLPs (a MoE layer's experts, each on the rows routed to it) in two
// parallel loops in all: every gate and up projection, then every down
// projection. Results are identical to running each alone; `scratch` is reused.
void MlpForwardMany(std::span<const MlpTask> tasks, Workspace<float>& scratch, ThreadPool* pool);

// out[b] = mlp(x[b]) for b < batch; `scratch` is reused between calls.
void MlpForward(const MlpWeights& w, const float* x, std::int64_t batch, float* out, Workspace<float>& scratch, ThreadPool* pool);

}  // namespace tandem::rt
