#include "runtime/engine/local_experts.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "runtime/model/checkpoint.hpp"

namespace tandem::rt {

LocalExpertExecutor::LocalExpertExecutor(const Checkpoint& ckpt, ThreadPool* pool)
    : hidden_(ckpt.config().hidden_size), pool_(pool) {
  const ModelConfig& c = ckpt.config();
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    if (!c.IsMoeLayer(layer)) continue;
    std::vector<MlpWeights>& experts = experts_[layer];
    for (int e = 0; e < c.n_routed_experts; ++e) {
      experts.push_back(MlpWeights::Load(ckpt, fmt::format("model.layers.{}.mlp.experts.{}", layer, e), c.hidden_size,
                                         c.moe_intermediate_size));
    }
  }
}

void LocalExpertExecutor::Run(int layer, const float* x, std::int64_t rows, std::span<const ExpertRoute> routes, int top_k,
                              float* out) {
  const auto it = experts_.find(layer);
  if (it == experts_.end()) throw std::invalid_argument(fmt::format("local experts: layer {} is not a MoE layer", layer));
  const std::vector<MlpWeights>& experts = it->second;
  const std::size_t h = static_cast<std::size_t>(hidden_);

  // results_[r, k] = expert_{routes[r, k]}(x[r]); filled expert by expert.
  results_.resize(static_cast<std::size_t>(rows * top_k) * h);
  std::vector<std::int64_t> slots;  // (r·top_k + k) of the rows routed to the current expert
  for (std::size_t e = 0; e < experts.size(); ++e) {
    slots.clear();
    for (std::int64_t s = 0; s < rows * top_k; ++s) {
      if (static_cast<std::size_t>(routes[static_cast<std::size_t>(s)].expert) == e) slots.push_back(s);
    }
    if (slots.empty()) continue;
    const auto n = static_cast<std::int64_t>(slots.size());
    gathered_.resize(static_cast<std::size_t>(n) * h);
    for (std::int64_t i = 0; i < n; ++i) {
      std::copy_n(x + (slots[i] / top_k) * hidden_, h, gathered_.data() + i * hidden_);
    }
    expert_out_.resize(static_cast<std::size_t>(n) * h);
    MlpForward(experts[e], gathered_.data(), n, expert_out_.data(), scratch_, pool_);
    for (std::int64_t i = 0; i < n; ++i) {
      std::copy_n(expert_out_.data() + i * hidden_, h, results_.data() + slots[i] * hidden_);
    }
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    float* o = out + r * hidden_;
    std::fill_n(o, h, 0.0f);
    for (int k = 0; k < top_k; ++k) {
      const float w = routes[static_cast<std::size_t>(r * top_k + k)].weight;
      const float* v = results_.data() + (r * top_k + k) * hidden_;
      for (std::size_t i = 0; i < h; ++i) o[i] += w * v[i];
    }
  }
}

}  // namespace tandem::rt
