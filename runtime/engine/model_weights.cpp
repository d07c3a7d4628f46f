#include "runtime/engine/model_weights.hpp"

#include <fmt/format.h>

#include "runtime/model/checkpoint.hpp"
#include "runtime/model/model_error.hpp"

namespace tandem::rt {

namespace {

AttentionWeights LoadAttention(const Checkpoint& ckpt, const std::string& p) {
  const ModelConfig& c = ckpt.config();
  const std::int64_t h = c.hidden_size;
  const std::int64_t heads = c.num_attention_heads;
  AttentionWeights a;
  if (c.q_lora_rank > 0) {
    a.q_a_proj = ckpt.Matrix(p + ".q_a_proj.weight", c.q_lora_rank, h);
    a.q_a_norm = ckpt.Vector(p + ".q_a_layernorm.weight", c.q_lora_rank);
    a.q_b_proj = ckpt.Matrix(p + ".q_b_proj.weight", heads * c.q_head_dim(), c.q_lora_rank);
  } else {
    a.q_proj = ckpt.Matrix(p + ".q_proj.weight", heads * c.q_head_dim(), h);
  }
  a.kv_a_proj = ckpt.Matrix(p + ".kv_a_proj_with_mqa.weight", c.kv_lora_rank + c.qk_rope_head_dim, h);
  a.kv_a_norm = ckpt.Vector(p + ".kv_a_layernorm.weight", c.kv_lora_rank);
  const WeightMatrix kv_b_proj = ckpt.Matrix(p + ".kv_b_proj.weight", heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank);
  // Every head's key slice, then every head's value slice: a quantized slice is a copy
  // of its tiles, so in weight memory the key slices a step absorbs one after another
  // follow each other (one stream the hardware prefetcher keeps up with, rather than
  // eight 8 KiB pieces a value slice apart), and so do the value slices (Zen 5, one
  // thread, all-layer int8: decode ×1.00–1.06 in four alternating runs, 51 of 82 rounds
  // above).
  for (std::int64_t head = 0; head < heads; ++head) {
    a.key_up.push_back(kv_b_proj.RowSlice(head * (c.qk_nope_head_dim + c.v_head_dim), c.qk_nope_head_dim));
  }
  for (std::int64_t head = 0; head < heads; ++head) {
    a.value_up.push_back(kv_b_proj.RowSlice(head * (c.qk_nope_head_dim + c.v_head_dim) + c.qk_nope_head_dim, c.v_head_dim));
  }
  a.o_proj = ckpt.Matrix(p + ".o_proj.weight", h, heads * c.v_head_dim);
  return a;
}

LayerWeights LoadLayer(const Checkpoint& ckpt, int l) {
  const ModelConfig& c = ckpt.config();
  const std::string p = fmt::format("model.layers.{}", l);
  LayerWeights layer;
  layer.checkpoint_layer = l;
  layer.input_norm = ckpt.Vector(p + ".input_layernorm.weight", c.hidden_size);
  layer.post_attention_norm = ckpt.Vector(p + ".post_attention_layernorm.weight", c.hidden_size);
  layer.attention = LoadAttention(ckpt, p + ".self_attn");
  layer.moe = c.IsMoeLayer(l);
  if (layer.moe) {
    layer.router = ckpt.Matrix(p + ".mlp.gate.weight", c.n_routed_experts, c.hidden_size);
    if (c.topk_method == TopkMethod::kNoauxTc) {
      layer.router_bias = ckpt.Vector(p + ".mlp.gate.e_score_correction_bias", c.n_routed_experts);
    }
  } else {
    layer.dense = MlpWeights::Load(ckpt, p + ".mlp", c.hidden_size, c.intermediate_size);
  }
  return layer;
}

}  // namespace

ModelWeights ModelWeights::Load(const Checkpoint& ckpt) {
  const ModelConfig& c = ckpt.config();
  ModelWeights w;
  // Placed like every weight (copied unless --map-weights), although a step reads
  // a few rows: a view of the file would fault (SIGBUS) once it is truncated under us.
  w.embed = ckpt.Matrix("model.embed_tokens.weight", c.vocab_size, c.hidden_size);
  for (int l = 0; l < c.num_hidden_layers; ++l) w.layers.push_back(LoadLayer(ckpt, l));
  w.final_norm = ckpt.Vector("model.norm.weight", c.hidden_size);
  // Tied embeddings win over a stray lm_head tensor, as in HF's loader.
  w.lm_head = c.tie_word_embeddings ? w.embed : ckpt.Matrix("lm_head.weight", c.vocab_size, c.hidden_size);
  return w;
}

void ModelWeights::Quantize(QuantFormat format, int group) {
  const auto quantize = [&](WeightMatrix& m) {
    if (m.empty() || m.cols % group != 0) return;
    m.quantized = std::make_shared<const QuantizedMatrix>(QuantizedMatrix::Quantize(m, format, group));
  };
  for (LayerWeights& l : layers) {
    for (WeightMatrix* m : {&l.attention.q_proj, &l.attention.q_a_proj, &l.attention.q_b_proj, &l.attention.kv_a_proj, &l.attention.o_proj,
                            &l.dense.gate, &l.dense.up, &l.dense.down}) {
      quantize(*m);
    }
  }
  quantize(lm_head);
}

ModelWeights ModelWeights::LoadMtp(const Checkpoint& ckpt) {
  const ModelConfig& c = ckpt.config();
  if (c.num_nextn_predict_layers < 1) {
    throw ModelError(fmt::format("{}: the checkpoint has no MTP layer (num_nextn_predict_layers is 0)", ckpt.dir().string()));
  }
  const int l = c.num_hidden_layers;
  const std::string p = fmt::format("model.layers.{}", l);
  ModelWeights w;
  // DeepSeek-V3 checkpoints give the MTP layer copies of the embedding and head;
  // others share the model's.
  w.embed = ckpt.Matrix(ckpt.Has(p + ".embed_tokens.weight") ? p + ".embed_tokens.weight" : "model.embed_tokens.weight", c.vocab_size,
                        c.hidden_size);
  w.layers.push_back(LoadLayer(ckpt, l));
  w.final_norm = ckpt.Vector(p + ".shared_head.norm.weight", c.hidden_size);
  w.lm_head = ckpt.Has(p + ".shared_head.head.weight") ? ckpt.Matrix(p + ".shared_head.head.weight", c.vocab_size, c.hidden_size)
              : c.tie_word_embeddings                  ? w.embed
                                                       : ckpt.Matrix("lm_head.weight", c.vocab_size, c.hidden_size);
  w.mtp = MtpInputWeights{ckpt.Vector(p + ".enorm.weight", c.hidden_size), ckpt.Vector(p + ".hnorm.weight", c.hidden_size),
                          ckpt.Matrix(p + ".eh_proj.weight", c.hidden_size, 2 * static_cast<std::int64_t>(c.hidden_size))};
  return w;
}

}  // namespace tandem::rt
