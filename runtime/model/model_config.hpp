#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/kernels/quantized_matrix.hpp"

// A checkpoint's config.json, in the HF names of DeepseekV3ForCausalLM and
// DeepseekV2ForCausalLM.
namespace tandem::rt {

enum class Architecture { kDeepseekV2, kDeepseekV3 };
enum class ScoringFunc { kSoftmax, kSigmoid, kSqrtSoftplus };
// "softmax", "sigmoid", "sqrtsoftplus" (config.json's names), and back.
std::string_view ToString(ScoringFunc scoring);
std::optional<ScoringFunc> ScoringFuncFromName(std::string_view name);
enum class TopkMethod { kGreedy, kGroupLimitedGreedy, kNoauxTc };

struct YarnScaling {
  double factor = 1.0;
  double original_max_position_embeddings = 4096;
  double beta_fast = 32;
  double beta_slow = 1;
  double mscale = 1;
  double mscale_all_dim = 0;
};

// Which matrices `tandem-rt quantize` group-quantized.
enum class QuantizedTensors {
  kRoutedExperts,  // "routed_experts"
  kExperts,        // "experts": the shared experts too
  kLinear,         // "linear": every linear layer but the router and kv_b_proj (see quantize_checkpoint.hpp)
};

// `tandem_quantization` in config.json, written by `tandem-rt quantize`:
// {"format": "int8"|"int4", "group_size": G, "tensors": "routed_experts"|"experts"|"linear",
//  "embedding": bool (optional, default false)}.
// The quantized matrices' `X.weight` are stored as `X.qweight` + `X.qscales` (see
// Checkpoint::Matrix).
struct CheckpointQuantization {
  QuantFormat format = QuantFormat::kInt8;
  int group_size = 32;
  QuantizedTensors tensors = QuantizedTensors::kRoutedExperts;
  bool embedding = false;  // the token embeddings too

  bool shared_experts() const { return tensors != QuantizedTensors::kRoutedExperts; }
};

struct ModelConfig {
  Architecture architecture = Architecture::kDeepseekV3;
  int hidden_size = 0;
  int num_hidden_layers = 0;
  int first_k_dense_replace = 0;
  int moe_layer_freq = 1;
  int intermediate_size = 0;
  int moe_intermediate_size = 0;
  int n_routed_experts = 0;
  int n_shared_experts = 0;
  int num_experts_per_tok = 0;
  int n_group = 1;
  int topk_group = 1;
  TopkMethod topk_method = TopkMethod::kGreedy;
  ScoringFunc scoring_func = ScoringFunc::kSoftmax;
  double routed_scaling_factor = 1.0;
  bool norm_topk_prob = false;
  int num_attention_heads = 0;
  int q_lora_rank = 0;  // 0: plain q_proj
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  double rope_theta = 10000.0;
  std::optional<YarnScaling> rope_scaling;
  double rms_norm_eps = 1e-6;
  int max_position_embeddings = 4096;
  int num_nextn_predict_layers = 0;
  int vocab_size = 0;
  std::int64_t bos_token_id = 0;
  std::int64_t eos_token_id = 1;
  bool tie_word_embeddings = false;
  std::optional<CheckpointQuantization> quantization;  // set for a `tandem-rt quantize` output

  bool IsMoeLayer(int layer) const { return n_routed_experts > 0 && layer >= first_k_dense_replace && layer % moe_layer_freq == 0; }
  int q_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  std::string_view architecture_name() const;
};

// Parses config.json text. Unknown architecture, a missing required key, a value
// of the wrong type or an inconsistent value → ModelError naming `source` and the key.
ModelConfig ParseModelConfig(std::string_view json_text, std::string_view source);
ModelConfig LoadModelConfig(const std::filesystem::path& checkpoint_dir);

// The `tandem_quantization` object of config.json, and its "tensors" values.
std::string QuantizationJson(const CheckpointQuantization& q);
inline constexpr std::string_view kRoutedExpertTensors = "routed_experts";
inline constexpr std::string_view kAllExpertTensors = "experts";
inline constexpr std::string_view kLinearTensors = "linear";
std::string_view ToString(QuantizedTensors tensors);

// The config.json text for `config` (used by the synthetic checkpoint writer).
std::string ModelConfigJson(const ModelConfig& config);

}  // namespace tandem::rt
