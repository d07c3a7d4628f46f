#include "runtime/engine/local_experts.hpp"

#include "runtime/model/checkpoint.hpp"

namespace tandem::rt {

LocalExpertExecutor::LocalExpertExecutor(const Checkpoint& ckpt, ThreadPool* pool, bool exact, std::vector<LayerSlice> layers)
    : slices_(std::make_unique<MoeSlices>(ckpt, layers.empty() ? MoeSlices::Everything(ckpt.config()) : std::move(layers), pool, exact)),
      top_k_(ckpt.config().num_experts_per_tok) {}

LocalExpertExecutor::LocalExpertExecutor(std::unique_ptr<ExpertSlices> slices, int top_k) : slices_(std::move(slices)), top_k_(top_k) {}

void LocalExpertExecutor::Start(int layer, std::span<const Row> rows, const float* x, std::span<const ExpertRoute> routes) {
  layer_ = layer;
  rows_ = static_cast<std::int64_t>(rows.size());
  x_ = x;
  routes_ = routes;
}

void LocalExpertExecutor::Finish(float* out) {
  const std::int64_t width = slices_->PartialWidth(layer_, top_k_);
  sum_.resize(static_cast<std::size_t>(rows_ * width));
  slices_->Compute(layer_, x_, rows_, routes_, top_k_, sum_.data());
  slices_->Reduce(sum_.data(), rows_, width, out);  // rounded once
}

}  // namespace tandem::rt
