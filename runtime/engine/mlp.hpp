#pragma once

#include <cstdint>
#include <vector>

#include "runtime/kernels/weight_matrix.hpp"

namespace tandem::rt {

class Checkpoint;
class ThreadPool;

// A SwiGLU feed-forward block (dense layer, shared experts, or one routed expert):
// down · (silu(gate · x) ⊙ (up · x)).
struct MlpWeights {
  WeightMatrix gate;  // [intermediate × hidden]
  WeightMatrix up;    // [intermediate × hidden]
  WeightMatrix down;  // [hidden × intermediate]

  // Loads <prefix>.gate_proj.weight, up_proj and down_proj.
  static MlpWeights Load(const Checkpoint& ckpt, const std::string& prefix, std::int64_t hidden, std::int64_t intermediate);
  std::int64_t intermediate() const { return gate.rows; }
};

// out[b] = mlp(x[b]) for b < batch; `scratch` is reused between calls.
void MlpForward(const MlpWeights& w, const float* x, std::int64_t batch, float* out, std::vector<float>& scratch,
                ThreadPool* pool);

// As MlpForward with the down projection accumulated and returned in double (see
// MatMulF64): the experts' form, so that slices of an expert add up exactly.
void MlpForwardF64(const MlpWeights& w, const float* x, std::int64_t batch, double* out, std::vector<float>& scratch,
                   ThreadPool* pool);

}  // namespace tandem::rt
