#include "runtime/engine/cuda/device_router.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace tandem::rt::cuda {

RouterParams RouterParamsOf(const ModelConfig& c) {
  if (c.n_routed_experts > kMaxRoutedExperts) {
    throw std::invalid_argument(
        fmt::format("--device cuda: {} routed experts; the device router takes at most {}", c.n_routed_experts, kMaxRoutedExperts));
  }
  RouterParams p;
  p.experts = c.n_routed_experts;
  p.top_k = c.num_experts_per_tok;
  p.groups = c.n_group;
  p.top_groups = c.topk_group;
  p.scoring = static_cast<int>(c.scoring_func);
  p.topk_method = static_cast<int>(c.topk_method);
  p.norm_topk_prob = c.norm_topk_prob;
  // As Router::Route: V3 always scales; V2 scales when it does not normalise.
  const bool normalise = p.top_k > 1 && c.norm_topk_prob;
  p.scale = c.architecture == Architecture::kDeepseekV3 || !normalise;
  p.routed_scaling_factor = c.routed_scaling_factor;
  return p;
}

}  // namespace tandem::rt::cuda
