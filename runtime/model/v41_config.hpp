#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/model/model_config.hpp"

// DeepSeek V4.1 (DeepseekV41ForCausalLM): a different model from V3, not V3 with other
// sizes — a residual stream of hc_mult copies mixed by hyper-connections, window
// attention with a sink in every layer, compressed KV built on source layers and read
// by the layers after them, an indexer, Engram n-gram memory, clamped FP4 experts, and
// the DSpark draft stages (mtp.*). The keys and their meaning are those of the official
// reference's ModelArgs (inference/config.json of the checkpoint, which the reference
// itself reads); docs/checkpoints.md lists them.
namespace tandem::rt {

// What a layer of V4.1 is, from compress_ratios and the source lists.
enum class V41Block {
  kSlidingWindow,         // ratio 0: window attention only
  kKvIndexSource,         // builds the compressed KV and the index keys, picks its own top-k
  kCandidateSource,       // a KV source that also publishes candidate blocks
  kCandidateIndexSource,  // its own index queries, scored over the candidate source's keys and blocks
  kConsumerRatio2,        // reads the latest source's compressed KV (one entry per 2 tokens) and top-k
  kConsumerRatio1,        // the same, one entry per token
};

struct V41Config {
  int vocab_size = 0;
  int dim = 0;
  int moe_inter_dim = 0;
  int n_layers = 0;
  int n_mtp_layers = 0;
  int n_heads = 0;
  int n_routed_experts = 0;
  int n_shared_experts = 1;
  int n_activated_experts = 0;
  ScoringFunc score_func = ScoringFunc::kSqrtSoftplus;
  double gate_temp = 1.0;
  bool norm_topk_prob = true;
  double route_scale = 1.0;
  double swiglu_limit = 0.0;  // 0: no clamp
  int q_lora_rank = 0;
  int head_dim = 0;  // the KV latent's width, used as K and V
  int rope_head_dim = 0;
  double norm_eps = 1e-20;
  int o_groups = 1;
  int o_lora_rank = 0;
  int window_size = 0;
  std::vector<int> compress_ratios;  // one per layer, the DSpark stages' included
  std::vector<int> kv_source_layers;
  std::vector<int> index_source_layers;
  double compress_rope_theta = 40000.0;
  int original_seq_len = 0;  // YaRN on compressed layers when > 0
  double rope_theta = 10000.0;
  double rope_factor = 40.0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  int candidate_source_layer = -1;  // < 0: no candidates
  int candidate_topk_blocks = 0;
  int candidate_block_size = 0;
  int hc_mult = 1;
  int hc_sinkhorn_iters = 1;
  double hc_eps = 1e-6;
  std::vector<int> engram_layer_ids;
  std::vector<std::int64_t> engram_num_embeddings;
  int engram_max_ngram_size = 1;
  std::int64_t engram_vocab_size = 0;
  int engram_n_heads = 0;
  int engram_head_dim = 0;
  int engram_pad_id = 2;
  int engram_compressed_vocab_size = 0;
  int dspark_block_size = 0;  // 0: no DSpark
  int dspark_noise_token_id = 0;
  std::vector<int> dspark_target_layer_ids;
  int dspark_markov_rank = 0;
  int dspark_n_routed_experts = 0;  // 0: n_routed_experts
  int dspark_n_activated_experts = 0;
  std::int64_t bos_token_id = 0;
  std::int64_t eos_token_id = 1;
  int max_position_embeddings = 0;

  V41Block Block(int layer) const;  // layer < n_layers
  bool IsEngramLayer(int layer) const;
  // The KV source whose compressed KV layer `layer` (ratio > 0) reads: the latest at or
  // before it.
  int KvSourceOf(int layer) const;
  // DSpark's MoE: its own expert count and top-k, or (0 in the config) the backbone's.
  int dspark_experts() const { return dspark_n_routed_experts > 0 ? dspark_n_routed_experts : n_routed_experts; }
  int dspark_activated() const { return dspark_n_activated_experts > 0 ? dspark_n_activated_experts : n_activated_experts; }
};

const char* ToString(V41Block block);

// Whether a config.json names DeepseekV41ForCausalLM (architectures[0]).
bool IsV41Checkpoint(const std::filesystem::path& checkpoint_dir);

// Parses the reference's ModelArgs keys (`json_text`, an object, or an object holding
// them under "text_config") and validates them: every list consistent with the layer
// count, KV sources among the index sources and each layer's source of the same ratio,
// dimensions that the 32-wide FP8 and FP4 blocks divide, …; a ModelError names `source`
// and the key.
V41Config ParseV41Config(std::string_view json_text, std::string_view source);
// inference/config.json when the checkpoint has it (the official layout), else
// config.json's text_config.
V41Config LoadV41Config(const std::filesystem::path& checkpoint_dir);

// The MoE of a V4.1 block (the backbone's, or a DSpark stage's with `dspark`) as the
// shared Router and expert code read a model: scores by score_func, the gate's bias
// selecting only, the chosen scores normalised (norm_topk_prob) then × route_scale.
// (gate_temp divides the gate's logits before they reach the Router.)
ModelConfig V41MoeConfig(const V41Config& config, bool dspark = false);

// The ModelArgs keys of `config`, as a JSON object (what ParseV41Config reads back).
std::string V41ConfigJson(const V41Config& config);

}  // namespace tandem::rt
