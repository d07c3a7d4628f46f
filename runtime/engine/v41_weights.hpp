#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/engine/hyper_connections.hpp"
#include "runtime/kernels/microscaled_matrix.hpp"
#include "runtime/kernels/weight_matrix.hpp"

// The weights of a DeepSeek V4.1 model as its forward reads them: FP8 and FP4 matrices as
// the checkpoint stores them (MicroscaledMatrix), BF16 ones as WeightMatrix, small
// parameters as fp32 vectors. The one exception follows the reference: `wo_a` is stored
// FP8 but the reference computes with its exact BF16 dequantization (a grouped einsum,
// not an FP8 GEMM), and so does this engine.
namespace tandem::rt {

class V41Checkpoint;

struct V41HyperConnection {
  std::vector<float> fn;     // [(2 + hc)·hc × hc·dim]
  std::vector<float> base;   // [(2 + hc)·hc]
  std::vector<float> scale;  // [3]
};

struct V41Attention {
  std::vector<float> sink;  // [heads]
  MicroscaledMatrix wq_a;   // [q_lora × dim]
  std::vector<float> q_norm;
  MicroscaledMatrix wq_b;  // [heads·head_dim × q_lora]
  MicroscaledMatrix wkv;   // [head_dim × dim]: the one KV head
  std::vector<float> kv_norm;
  WeightMatrix wo_a;       // BF16 [groups·o_lora × heads·head_dim/groups]: group g's rows read its heads only
  MicroscaledMatrix wo_b;  // [dim × groups·o_lora]
  // KV sources: the compressor (wgate for a ratio above 1).
  WeightMatrix compressor_wkv, compressor_wgate;  // BF16 [head_dim × dim]
  std::vector<float> compressor_norm;
  // Index sources: the indexer's queries and weights; its keys where the layer is a KV source.
  MicroscaledMatrix index_wq_b;     // [index_heads·index_head_dim × q_lora]
  WeightMatrix index_weights_proj;  // BF16 [index_heads × dim]
  WeightMatrix index_wk;            // BF16 [index_head_dim × head_dim]
  std::vector<float> index_k_norm;
};

struct V41Expert {
  MicroscaledMatrix w1, w3;  // gate and up [inter × dim]
  MicroscaledMatrix w2;      // down [dim × inter]
};

struct V41Moe {
  WeightMatrix gate;        // BF16 [experts × dim], computed in fp32
  std::vector<float> bias;  // selection only
  std::vector<V41Expert> experts;
  V41Expert shared;  // FP8
};

// Engram's table (E4M3 rows with an E8M0 scale per 32 values) and its projections.
struct V41Engram {
  std::int64_t rows = 0, width = 0;
  std::shared_ptr<const std::uint8_t[]> table, table_scales;
  MicroscaledMatrix wkv;                  // [(hc + 1)·dim × (max_ngram − 1)·heads·width]
  std::vector<float> q_weight, k_weight;  // [hc × dim]
};

struct V41Layer {
  int layer = 0;
  std::vector<float> attn_norm, ffn_norm;
  V41HyperConnection hc_attn, hc_ffn;
  V41Attention attention;
  V41Moe moe;
  std::optional<V41Engram> engram;
};

// A DSpark stage (mtp.k): a window-only block with its own MoE, and the extras of the first
// stage (main_proj, main_norm) and the last (norm, the Markov head, the confidence head).
// Loaded and kept; the drafter that computes with them is separate.
struct V41DraftStage {
  V41Layer block;
  MicroscaledMatrix main_proj;
  std::vector<float> main_norm;
  std::vector<float> norm;
  WeightMatrix markov_embed, markov_head, confidence;
};

struct V41Weights {
  WeightMatrix embed;  // BF16 [vocab × dim]
  std::vector<V41Layer> layers;
  std::vector<float> norm;
  WeightMatrix head;  // BF16 [vocab × dim], computed in fp32
  std::vector<V41DraftStage> draft_stages;

  // `experts`: also the backbone's routed and shared experts (V41MoeSlices holds them
  // when an ExpertExecutor computes the MoE); the gate and its bias always.
  static V41Weights Load(const V41Checkpoint& ckpt, bool experts = true);
  std::size_t bytes() const;
};

// One expert of a checkpoint: <prefix>w1, w3, w2 — FP4 (routed) or FP8 (shared).
V41Expert LoadV41Expert(const V41Checkpoint& ckpt, const std::string& prefix, bool fp4);

// The hyper-connection parameters of `hc` as HcMixes reads them.
HyperConnectionWeights HcWeightsOf(const V41HyperConnection& hc, int copies, std::int64_t dim, int sinkhorn_iters, double norm_eps,
                                   double hc_eps);

}  // namespace tandem::rt
