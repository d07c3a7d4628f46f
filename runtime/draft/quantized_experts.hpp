#pragma once

#include <map>
#include <vector>

#include "runtime/engine/expert_executor.hpp"
#include "runtime/kernels/quantized_matrix.hpp"

namespace tandem::rt {

class Checkpoint;
class ThreadPool;

// Every routed and shared expert of every MoE layer, group-quantized (int8 or int4)
// from the checkpoint when constructed, computed in this process with fp32
// accumulation. The replica drafter's experts: close enough to the target's to
// agree on most tokens, and half (int8) or a quarter (int4) of their bf16 bytes.
class QuantizedExpertExecutor : public ExpertExecutor {
 public:
  // Throws std::invalid_argument when the expert widths are not multiples of `group`.
  QuantizedExpertExecutor(const Checkpoint& ckpt, QuantFormat format, int group, ThreadPool* pool);

  void Start(int layer, std::span<const Row> rows, const float* x, std::span<const ExpertRoute> routes) override;
  void Finish(float* out) override;

 private:
  struct Mlp {
    QuantizedMatrix gate, up, down;
  };
  struct Layer {
    std::vector<Mlp> experts;
    Mlp shared;
  };

  void Forward(const Mlp& mlp, const float* x, std::int64_t rows, float* out);

  ThreadPool* pool_;
  std::int64_t hidden_;
  int top_k_;
  std::map<int, Layer> layers_;

  int layer_ = -1;
  std::int64_t rows_ = 0;
  const float* x_ = nullptr;
  std::span<const ExpertRoute> routes_;
  std::vector<float> gathered_, act_, up_, out_, expert_out_;
  std::vector<std::int64_t> slots_;
};

}  // namespace tandem::rt
