#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/model/model_config.hpp"

namespace tandem::rt {

// One routed expert chosen for a row, with its mixing weight.
struct ExpertRoute {
  std::int32_t expert = 0;
  float weight = 0.0f;
};

// DeepSeek's MoE router, from gate logits to top-k routes:
//  1. scores = softmax | sigmoid | sqrt(softplus) of the logits;
//  2. choice = scores (+ e_score_correction_bias for noaux_tc: selection only);
//  3. group-limited: group score = max (group_limited_greedy) or sum of the top 2
//     (noaux_tc) of choice per group; all experts outside the best topk_group
//     groups get choice −∞;
//  4. top-k experts by choice (ties: lower expert id), in descending order;
//  5. weights = the unbiased scores of those experts; V3: normalised if
//     norm_topk_prob, then × routed_scaling_factor; V2: normalised if
//     norm_topk_prob, otherwise × routed_scaling_factor (as HF's V2 code).
class Router {
 public:
  Router(const ModelConfig& config, std::vector<float> correction_bias);

  // `logits` holds n_routed_experts values; writes num_experts_per_tok routes.
  void Route(std::span<const float> logits, std::span<ExpertRoute> routes) const;

 private:
  const ModelConfig& config_;
  std::vector<float> bias_;
};

}  // namespace tandem::rt
