#pragma once

#include <optional>
#include <vector>

#include "runtime/engine/mlp.hpp"
#include "runtime/kernels/weight_matrix.hpp"

namespace tandem::rt {

class Checkpoint;

struct AttentionWeights {
  WeightMatrix q_proj;    // [heads·q_head × hidden] when q_lora_rank = 0
  WeightMatrix q_a_proj;  // [q_lora × hidden]
  std::vector<float> q_a_norm;
  WeightMatrix q_b_proj;  // [heads·q_head × q_lora]
  WeightMatrix kv_a_proj;  // [kv_lora + rope × hidden]
  std::vector<float> kv_a_norm;
  WeightMatrix kv_b_proj;  // [heads·(nope + v) × kv_lora]
  WeightMatrix o_proj;     // [hidden × heads·v]
};

struct LayerWeights {
  std::vector<float> input_norm;
  std::vector<float> post_attention_norm;
  AttentionWeights attention;
  bool moe = false;
  MlpWeights dense;             // dense layers
  WeightMatrix router;          // [n_routed × hidden], MoE layers
  std::vector<float> router_bias;  // e_score_correction_bias (noaux_tc), may be empty
};

// Everything the coordinator computes with itself: all weights but the routed and
// shared experts (those belong to an ExpertExecutor).
struct ModelWeights {
  WeightMatrix embed;  // [vocab × hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;
  WeightMatrix lm_head;  // [vocab × hidden]

  static ModelWeights Load(const Checkpoint& ckpt);
};

}  // namespace tandem::rt
