#pragma once

#include <memory>

#include "runtime/engine/expert_executor.hpp"
#include "runtime/engine/moe_slices.hpp"

namespace tandem::rt {

class Checkpoint;
class ThreadPool;

// Runs every routed and shared expert in this process, from the checkpoint.
// `exact` as for MoeSlices: what a like-for-like comparison with a hybrid run needs.
class LocalExpertExecutor : public ExpertExecutor {
 public:
  // `layers`: what to hold; empty means every MoE layer of the model.
  LocalExpertExecutor(const Checkpoint& ckpt, ThreadPool* pool, bool exact = false, std::vector<LayerSlice> layers = {});
  // Any architecture's slices (V41MoeSlices::Everything for DeepSeek V4.1).
  LocalExpertExecutor(std::unique_ptr<ExpertSlices> slices, int top_k);

  void Start(int layer, std::span<const Row> rows, const float* x, std::span<const ExpertRoute> routes) override;
  void Finish(float* out) override;

 private:
  std::unique_ptr<ExpertSlices> slices_;
  int top_k_;
  int layer_ = -1;
  std::int64_t rows_ = 0;
  const float* x_ = nullptr;
  std::span<const ExpertRoute> routes_;
  Workspace<double> sum_;
};

}  // namespace tandem::rt
