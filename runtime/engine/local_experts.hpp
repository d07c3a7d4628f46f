#pragma once

#include <map>
#include <vector>

#include "runtime/engine/expert_executor.hpp"
#include "runtime/engine/mlp.hpp"

namespace tandem::rt {

class Checkpoint;
class ThreadPool;

// Runs routed experts in this process, from the checkpoint's weights. Rows routed
// to the same expert are gathered and computed together.
class LocalExpertExecutor : public ExpertExecutor {
 public:
  // Loads the routed experts of every MoE layer.
  LocalExpertExecutor(const Checkpoint& ckpt, ThreadPool* pool);

  void Run(int layer, const float* x, std::int64_t rows, std::span<const ExpertRoute> routes, int top_k,
           float* out) override;

 private:
  std::int64_t hidden_;
  ThreadPool* pool_;
  std::map<int, std::vector<MlpWeights>> experts_;  // layer → experts
  std::vector<float> gathered_, results_, expert_out_, scratch_;
};

}  // namespace tandem::rt
