#include "runtime/engine/local_experts.hpp"

#include "runtime/model/checkpoint.hpp"

namespace tandem::rt {

LocalExpertExecutor::LocalExpertExecutor(const Checkpoint& ckpt, ThreadPool* pool)
    : slices_(ckpt, MoeSlices::Everything(ckpt.config()), pool), top_k_(ckpt.config().num_experts_per_tok) {}

void LocalExpertExecutor::Start(int layer, std::span<const Row> rows, const float* x, std::span<const ExpertRoute> routes) {
  layer_ = layer;
  rows_ = static_cast<std::int64_t>(rows.size());
  x_ = x;
  routes_ = routes;
}

void LocalExpertExecutor::Finish(float* out) { slices_.Compute(layer_, x_, rows_, routes_, top_k_, out); }

}  // namespace tandem::rt
