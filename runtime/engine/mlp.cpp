#include "runtime/engine/mlp.hpp"

#include "runtime/kernels/matmul.hpp"
#include "runtime/kernels/ops.hpp"
#include "runtime/model/checkpoint.hpp"

namespace tandem::rt {

MlpWeights MlpWeights::Load(const Checkpoint& ckpt, const std::string& prefix, std::int64_t hidden, std::int64_t intermediate) {
  return {ckpt.Matrix(prefix + ".gate_proj.weight", intermediate, hidden),
          ckpt.Matrix(prefix + ".up_proj.weight", intermediate, hidden),
          ckpt.Matrix(prefix + ".down_proj.weight", hidden, intermediate)};
}

namespace {

// silu(gate · x) ⊙ (up · x) for every row: [batch × intermediate], in `scratch`.
float* GatedActivations(const MlpWeights& w, const float* x, std::int64_t batch, std::vector<float>& scratch, ThreadPool* pool) {
  const std::int64_t inter = w.intermediate();
  scratch.resize(static_cast<std::size_t>(2 * batch * inter));
  float* gate = scratch.data();
  float* up = gate + batch * inter;
  MatMul(w.gate, x, batch, gate, pool);
  MatMul(w.up, x, batch, up, pool);
  SwiGlu(gate, up, batch * inter);
  return gate;
}

}  // namespace

void MlpForward(const MlpWeights& w, const float* x, std::int64_t batch, float* out, std::vector<float>& scratch,
                ThreadPool* pool) {
  MatMul(w.down, GatedActivations(w, x, batch, scratch, pool), batch, out, pool);
}

void MlpForwardF64(const MlpWeights& w, const float* x, std::int64_t batch, double* out, std::vector<float>& scratch,
                   ThreadPool* pool) {
  MatMulF64(w.down, GatedActivations(w, x, batch, scratch, pool), batch, out, pool);
}

}  // namespace tandem::rt
