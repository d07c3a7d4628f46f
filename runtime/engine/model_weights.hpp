#pragma once

#include <optional>
#include <vector>

#include "runtime/engine/mlp.hpp"
#include "runtime/kernels/quantized_matrix.hpp"
#include "runtime/kernels/weight_matrix.hpp"

namespace tandem::rt {

class Checkpoint;

struct AttentionWeights {
  WeightMatrix q_proj;    // [heads·q_head × hidden] when q_lora_rank = 0
  WeightMatrix q_a_proj;  // [q_lora × hidden]
  std::vector<float> q_a_norm;
  WeightMatrix q_b_proj;   // [heads·q_head × q_lora]
  WeightMatrix kv_a_proj;  // [kv_lora + rope × hidden]
  std::vector<float> kv_a_norm;
  // kv_b_proj [heads·(nope + v) × kv_lora] as per-head row slices, cut once at load
  // (attention uses them per row and head):
  std::vector<WeightMatrix> key_up;    // W_UK[h]: [nope × kv_lora], absorbed into the query
  std::vector<WeightMatrix> value_up;  // W_UV[h]: [v × kv_lora], applied to the attended latent
  WeightMatrix o_proj;                 // [hidden × heads·v]
};

struct LayerWeights {
  int checkpoint_layer = 0;  // its index in the checkpoint (model.layers.N)
  std::vector<float> input_norm;
  std::vector<float> post_attention_norm;
  AttentionWeights attention;
  bool moe = false;
  MlpWeights dense;                // dense layers
  WeightMatrix router;             // [n_routed × hidden], MoE layers
  std::vector<float> router_bias;  // e_score_correction_bias (noaux_tc), may be empty
};

// Everything the coordinator computes with itself: all weights but the routed and
// shared experts (those belong to an ExpertExecutor).
// DeepSeek-V3's MTP input: x = eh_proj · [enorm(embed(token)); hnorm(h)], where h is
// the target's hidden state at the previous position.
struct MtpInputWeights {
  std::vector<float> enorm, hnorm;
  WeightMatrix eh_proj;  // [hidden × 2·hidden]
};

struct ModelWeights {
  WeightMatrix embed;  // [vocab × hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;
  WeightMatrix lm_head;                // [vocab × hidden]
  std::optional<MtpInputWeights> mtp;  // set for the MTP layer

  static ModelWeights Load(const Checkpoint& ckpt);
  // The checkpoint's (first) MTP layer as a one-layer model: its block, its
  // shared_head norm and head, and its input projection. Throws ModelError when the
  // checkpoint has none.
  static ModelWeights LoadMtp(const Checkpoint& ckpt);

  // Gives the large projections (attention but the absorbed kv_b_proj, dense MLPs,
  // the LM head) a group-quantized copy that MatMul reads instead: a drafter's cheap
  // reading of the model. Embedding, norms and routers stay as they are; a matrix
  // whose width is not a multiple of `group` stays too.
  void Quantize(QuantFormat format, int group);
};

}  // namespace tandem::rt
