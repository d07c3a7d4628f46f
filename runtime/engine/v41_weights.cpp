#include "runtime/engine/v41_weights.hpp"

#include <cstring>

#include <fmt/format.h>

#include "runtime/model/model_error.hpp"
#include "runtime/model/v41_checkpoint.hpp"
#include "runtime/numeric/dtype.hpp"

namespace tandem::rt {

namespace {

using Format = MicroscaledMatrix::Format;

class Loader {
 public:
  explicit Loader(const V41Checkpoint& ckpt) : ckpt_(ckpt), c_(ckpt.config()) {}

  MicroscaledMatrix Microscaled(Format format, const std::string& prefix, std::int64_t rows, std::int64_t cols) const {
    try {
      return MicroscaledMatrix::Copy(format, rows, cols, ckpt_.Bytes(prefix + ".weight"), ckpt_.Bytes(prefix + ".scale"));
    } catch (const std::invalid_argument& e) {
      throw ModelError(fmt::format("{}: tensor '{}.weight': {}", ckpt_.dir().string(), prefix, e.what()));
    }
  }
  MicroscaledMatrix Fp8(const std::string& prefix, std::int64_t rows, std::int64_t cols) const {
    return Microscaled(Format::kFp8Block32, prefix, rows, cols);
  }
  MicroscaledMatrix Fp4(const std::string& prefix, std::int64_t rows, std::int64_t cols) const {
    return Microscaled(Format::kFp4Row32, prefix, rows, cols);
  }

  WeightMatrix Bf16(const std::string& name, std::int64_t rows, std::int64_t cols) const {
    const std::span<const std::uint8_t> bytes = ckpt_.Bytes(name);
    if (ckpt_.Info(name).dtype != DType::kBF16 || bytes.size() != static_cast<std::size_t>(rows * cols * 2)) {
      throw ModelError(fmt::format("{}: tensor '{}' is not BF16 [{} × {}]", ckpt_.dir().string(), name, rows, cols));
    }
    std::shared_ptr<std::uint16_t[]> values(new std::uint16_t[static_cast<std::size_t>(rows * cols)]);
    std::memcpy(values.get(), bytes.data(), bytes.size());
    return WeightMatrix::OwnedBf16(rows, cols, std::move(values));
  }

  // An FP8 matrix dequantized to BF16 (exact: an E4M3 value times a power of two).
  WeightMatrix Fp8AsBf16(const std::string& prefix, std::int64_t rows, std::int64_t cols) const {
    const MicroscaledMatrix m = Fp8(prefix, rows, cols);
    std::shared_ptr<std::uint16_t[]> values(new std::uint16_t[static_cast<std::size_t>(rows * cols)]);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t k = 0; k < cols; ++k) values[static_cast<std::size_t>(r * cols + k)] = F32ToBf16(m.At(r, k));
    }
    return WeightMatrix::OwnedBf16(rows, cols, std::move(values));
  }

  std::vector<float> Vec(const std::string& name, std::int64_t n) const { return ckpt_.Vector(name, n); }

  V41HyperConnection Hc(const std::string& p, const char* sub) const {
    const std::int64_t mix = static_cast<std::int64_t>(2 + c_.hc_mult) * c_.hc_mult;
    V41HyperConnection hc;
    hc.fn = Vec(fmt::format("{}hc_{}_fn", p, sub), mix * c_.hc_mult * c_.dim);
    hc.base = Vec(fmt::format("{}hc_{}_base", p, sub), mix);
    hc.scale = Vec(fmt::format("{}hc_{}_scale", p, sub), 3);
    return hc;
  }

  V41Expert Expert(const std::string& p, bool fp4) const {
    const std::int64_t dim = c_.dim, inter = c_.moe_inter_dim;
    const Format f = fp4 ? Format::kFp4Row32 : Format::kFp8Block32;
    return {Microscaled(f, p + "w1", inter, dim), Microscaled(f, p + "w3", inter, dim), Microscaled(f, p + "w2", dim, inter)};
  }

  V41Layer Block(const std::string& p, int layer, bool dspark, bool experts = true) const {
    const std::int64_t dim = c_.dim, heads = c_.n_heads, hd = c_.head_dim;
    V41Layer l;
    l.layer = layer;
    l.attn_norm = Vec(p + "attn_norm.weight", dim);
    l.ffn_norm = Vec(p + "ffn_norm.weight", dim);
    l.hc_attn = Hc(p, "attn");
    l.hc_ffn = Hc(p, "ffn");
    V41Attention& a = l.attention;
    a.sink = Vec(p + "attn.attn_sink", heads);
    a.wq_a = Fp8(p + "attn.wq_a", c_.q_lora_rank, dim);
    a.q_norm = Vec(p + "attn.q_norm.weight", c_.q_lora_rank);
    a.wq_b = Fp8(p + "attn.wq_b", heads * hd, c_.q_lora_rank);
    a.wkv = Fp8(p + "attn.wkv", hd, dim);
    a.kv_norm = Vec(p + "attn.kv_norm.weight", hd);
    a.wo_a = Fp8AsBf16(p + "attn.wo_a", static_cast<std::int64_t>(c_.o_groups) * c_.o_lora_rank, heads * hd / c_.o_groups);
    a.wo_b = Fp8(p + "attn.wo_b", dim, static_cast<std::int64_t>(c_.o_groups) * c_.o_lora_rank);
    if (!dspark) {
      if (ckpt_.Has(p + "attn.compressor.wkv.weight")) {
        a.compressor_wkv = Bf16(p + "attn.compressor.wkv.weight", hd, dim);
        if (ckpt_.Has(p + "attn.compressor.wgate.weight")) a.compressor_wgate = Bf16(p + "attn.compressor.wgate.weight", hd, dim);
        a.compressor_norm = Vec(p + "attn.compressor.norm.weight", hd);
      }
      if (ckpt_.Has(p + "attn.indexer.wq_b.weight")) {
        a.index_wq_b = Fp8(p + "attn.indexer.wq_b", static_cast<std::int64_t>(c_.index_n_heads) * c_.index_head_dim, c_.q_lora_rank);
        a.index_weights_proj = Bf16(p + "attn.indexer.weights_proj.weight", c_.index_n_heads, dim);
        if (ckpt_.Has(p + "attn.indexer.wk.weight")) {
          a.index_wk = Bf16(p + "attn.indexer.wk.weight", c_.index_head_dim, hd);
          a.index_k_norm = Vec(p + "attn.indexer.k_norm.weight", c_.index_head_dim);
        }
      }
    }
    const int routed = dspark ? c_.dspark_experts() : c_.n_routed_experts;
    l.moe.gate = Bf16(p + "ffn.gate.weight", routed, dim);
    l.moe.bias = Vec(p + "ffn.gate.bias", routed);
    for (int e = 0; experts && e < routed; ++e) l.moe.experts.push_back(Expert(fmt::format("{}ffn.experts.{}.", p, e), true));
    if (experts) l.moe.shared = Expert(p + "ffn.shared_experts.", false);
    if (!dspark && c_.IsEngramLayer(layer)) {
      std::size_t at = 0;
      while (c_.engram_layer_ids[at] != layer) ++at;
      V41Engram g;
      g.rows = c_.engram_num_embeddings[at];
      g.width = c_.engram_head_dim;
      const auto copy = [&](const std::string& name) {
        const std::span<const std::uint8_t> bytes = ckpt_.Bytes(name);
        std::shared_ptr<std::uint8_t[]> out(new std::uint8_t[bytes.size()]);
        std::memcpy(out.get(), bytes.data(), bytes.size());
        return std::shared_ptr<const std::uint8_t[]>(std::move(out));
      };
      g.table = copy(p + "engram.embed.weight");
      g.table_scales = copy(p + "engram.embed.scale");
      g.wkv = Fp8(p + "engram.wkv", dim * (c_.hc_mult + 1),
                  static_cast<std::int64_t>(c_.engram_max_ngram_size - 1) * c_.engram_n_heads * c_.engram_head_dim);
      g.q_weight = Vec(p + "engram.q_weight", c_.hc_mult * dim);
      g.k_weight = Vec(p + "engram.k_weight", c_.hc_mult * dim);
      l.engram = std::move(g);
    }
    return l;
  }

 private:
  const V41Checkpoint& ckpt_;
  const V41Config& c_;
};

std::size_t VecBytes(const std::vector<float>& v) { return v.size() * sizeof(float); }

std::size_t LayerBytes(const V41Layer& l) {
  const V41Attention& a = l.attention;
  std::size_t n = VecBytes(l.attn_norm) + VecBytes(l.ffn_norm) + VecBytes(l.hc_attn.fn) + VecBytes(l.hc_ffn.fn);
  n += a.wq_a.bytes() + a.wq_b.bytes() + a.wkv.bytes() + a.wo_a.bytes() + a.wo_b.bytes() + a.index_wq_b.bytes();
  n += a.compressor_wkv.bytes() + a.compressor_wgate.bytes() + a.index_weights_proj.bytes() + a.index_wk.bytes();
  n += l.moe.gate.bytes();
  for (const V41Expert& e : l.moe.experts) n += e.w1.bytes() + e.w2.bytes() + e.w3.bytes();
  n += l.moe.shared.w1.bytes() + l.moe.shared.w2.bytes() + l.moe.shared.w3.bytes();
  if (l.engram) n += static_cast<std::size_t>(l.engram->rows * l.engram->width * 33 / 32) + l.engram->wkv.bytes();
  return n;
}

}  // namespace

V41Expert LoadV41Expert(const V41Checkpoint& ckpt, const std::string& prefix, bool fp4) { return Loader(ckpt).Expert(prefix, fp4); }

V41Weights V41Weights::Load(const V41Checkpoint& ckpt, bool experts) {
  const V41Config& c = ckpt.config();
  const Loader load(ckpt);
  V41Weights w;
  w.embed = load.Bf16("embed.weight", c.vocab_size, c.dim);
  w.norm = load.Vec("norm.weight", c.dim);
  w.head = load.Bf16("head.weight", c.vocab_size, c.dim);
  for (int l = 0; l < c.n_layers; ++l) w.layers.push_back(load.Block(fmt::format("layers.{}.", l), l, false, experts));
  for (int s = 0; s < c.n_mtp_layers && c.dspark_block_size > 0; ++s) {
    const std::string p = fmt::format("mtp.{}.", s);
    V41DraftStage stage;
    stage.block = load.Block(p, c.n_layers + s, true);
    if (s == 0) {
      stage.main_proj =
          load.Fp8(p + "main_proj", c.dim, static_cast<std::int64_t>(c.dim) * static_cast<std::int64_t>(c.dspark_target_layer_ids.size()));
      stage.main_norm = load.Vec(p + "main_norm.weight", c.dim);
    }
    if (s == c.n_mtp_layers - 1) {
      stage.norm = load.Vec(p + "norm.weight", c.dim);
      stage.markov_embed = load.Bf16(p + "markov_head.embed.weight", c.vocab_size, c.dspark_markov_rank);
      stage.markov_head = load.Bf16(p + "markov_head.head.weight", c.vocab_size, c.dspark_markov_rank);
      stage.confidence = load.Bf16(p + "confidence_head.proj.weight", 1, c.dim + c.dspark_markov_rank);
    }
    w.draft_stages.push_back(std::move(stage));
  }
  return w;
}

std::size_t V41Weights::bytes() const {
  std::size_t n = embed.bytes() + head.bytes() + VecBytes(norm);
  for (const V41Layer& l : layers) n += LayerBytes(l);
  for (const V41DraftStage& s : draft_stages)
    n += LayerBytes(s.block) + s.main_proj.bytes() + s.markov_embed.bytes() + s.markov_head.bytes();
  return n;
}

HyperConnectionWeights HcWeightsOf(const V41HyperConnection& hc, int copies, std::int64_t dim, int sinkhorn_iters, double norm_eps,
                                   double hc_eps) {
  return HyperConnectionWeights{.hc = copies,
                                .dim = dim,
                                .fn = hc.fn.data(),
                                .base = hc.base.data(),
                                .scale = hc.scale.data(),
                                .sinkhorn_iters = sinkhorn_iters,
                                .norm_eps = static_cast<float>(norm_eps),
                                .hc_eps = static_cast<float>(hc_eps)};
}

}  // namespace tandem::rt
