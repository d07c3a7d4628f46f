#include "runtime/model/v41_tensors.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/model/mapped_file.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/shard_index.hpp"
#include "runtime/model/v41_config.hpp"

namespace tandem::rt {

namespace {

constexpr std::int64_t kBlock = 32;

std::int64_t Blocks(std::int64_t n) { return (n + kBlock - 1) / kBlock; }

class Builder {
 public:
  explicit Builder(std::vector<V41Tensor>& out) : out_(out) {}

  void Add(std::string name, DType dtype, std::vector<std::int64_t> shape) { out_.push_back({std::move(name), dtype, std::move(shape)}); }
  void Bf16(const std::string& name, std::vector<std::int64_t> shape) { Add(name, DType::kBF16, std::move(shape)); }
  void F32(const std::string& name, std::vector<std::int64_t> shape) { Add(name, DType::kF32, std::move(shape)); }
  // An FP8 linear layer [out × in] and its 32×32 block scales.
  void Fp8(const std::string& prefix, std::int64_t out, std::int64_t in) {
    Add(prefix + ".weight", DType::kF8E4M3, {out, in});
    Add(prefix + ".scale", DType::kF8E8M0, {Blocks(out), Blocks(in)});
  }
  // An FP4 linear layer [out × in]: two values a byte, a scale per 32 inputs of a row.
  void Fp4(const std::string& prefix, std::int64_t out, std::int64_t in) {
    Add(prefix + ".weight", DType::kI8, {out, in / 2});
    Add(prefix + ".scale", DType::kF8E8M0, {out, Blocks(in)});
  }

 private:
  std::vector<V41Tensor>& out_;
};

// A block's tensors: hyper-connections, attention (with what its type adds), the MoE,
// and Engram where the layer has it.
void AddBlock(Builder& b, const V41Config& c, const std::string& p, int layer, bool dspark) {
  const std::int64_t dim = c.dim, mix = static_cast<std::int64_t>(2 + c.hc_mult) * c.hc_mult;
  b.Bf16(p + "attn_norm.weight", {dim});
  b.Bf16(p + "ffn_norm.weight", {dim});
  for (const char* sub : {"attn", "ffn"}) {
    b.F32(fmt::format("{}hc_{}_fn", p, sub), {mix, c.hc_mult * dim});
    b.F32(fmt::format("{}hc_{}_base", p, sub), {mix});
    b.F32(fmt::format("{}hc_{}_scale", p, sub), {3});
  }
  b.F32(p + "attn.attn_sink", {c.n_heads});
  b.Fp8(p + "attn.wq_a", c.q_lora_rank, dim);
  b.Bf16(p + "attn.q_norm.weight", {c.q_lora_rank});
  b.Fp8(p + "attn.wq_b", static_cast<std::int64_t>(c.n_heads) * c.head_dim, c.q_lora_rank);
  b.Fp8(p + "attn.wkv", c.head_dim, dim);
  b.Bf16(p + "attn.kv_norm.weight", {c.head_dim});
  b.Fp8(p + "attn.wo_a", static_cast<std::int64_t>(c.o_groups) * c.o_lora_rank,
        static_cast<std::int64_t>(c.n_heads) * c.head_dim / c.o_groups);
  b.Fp8(p + "attn.wo_b", dim, static_cast<std::int64_t>(c.o_groups) * c.o_lora_rank);
  if (!dspark) {
    const V41Block type = c.Block(layer);
    const bool kv_source = type == V41Block::kKvIndexSource || type == V41Block::kCandidateSource;
    const bool index_source = kv_source || type == V41Block::kCandidateIndexSource;
    const int ratio = c.compress_ratios[static_cast<std::size_t>(layer)];
    if (kv_source) {
      b.Bf16(p + "attn.compressor.wkv.weight", {c.head_dim, dim});
      if (ratio > 1) b.Bf16(p + "attn.compressor.wgate.weight", {c.head_dim, dim});
      b.Bf16(p + "attn.compressor.norm.weight", {c.head_dim});
    }
    if (index_source) {
      b.Fp8(p + "attn.indexer.wq_b", static_cast<std::int64_t>(c.index_n_heads) * c.index_head_dim, c.q_lora_rank);
      b.Bf16(p + "attn.indexer.weights_proj.weight", {c.index_n_heads, dim});
      if (kv_source) {
        b.Bf16(p + "attn.indexer.wk.weight", {c.index_head_dim, c.head_dim});
        b.Bf16(p + "attn.indexer.k_norm.weight", {c.index_head_dim});
      }
    }
  }
  const int experts = dspark ? c.dspark_experts() : c.n_routed_experts;
  b.Bf16(p + "ffn.gate.weight", {experts, dim});
  b.F32(p + "ffn.gate.bias", {experts});
  for (int e = 0; e < experts; ++e) {
    const std::string expert = fmt::format("{}ffn.experts.{}.", p, e);
    b.Fp4(expert + "w1", c.moe_inter_dim, dim);
    b.Fp4(expert + "w2", dim, c.moe_inter_dim);
    b.Fp4(expert + "w3", c.moe_inter_dim, dim);
  }
  b.Fp8(p + "ffn.shared_experts.w1", c.moe_inter_dim, dim);
  b.Fp8(p + "ffn.shared_experts.w2", dim, c.moe_inter_dim);
  b.Fp8(p + "ffn.shared_experts.w3", c.moe_inter_dim, dim);
  if (!dspark && c.IsEngramLayer(layer)) {
    std::size_t at = 0;
    while (c.engram_layer_ids[at] != layer) ++at;
    const std::int64_t rows = c.engram_num_embeddings[at];
    b.Add(p + "engram.embed.weight", DType::kF8E4M3, {rows, c.engram_head_dim});
    b.Add(p + "engram.embed.scale", DType::kF8E8M0, {rows, Blocks(c.engram_head_dim)});
    b.Fp8(p + "engram.wkv", dim * (c.hc_mult + 1),
          static_cast<std::int64_t>(c.engram_max_ngram_size - 1) * c.engram_n_heads * c.engram_head_dim);
    b.Bf16(p + "engram.q_weight", {c.hc_mult, dim});
    b.Bf16(p + "engram.k_weight", {c.hc_mult, dim});
  }
}

std::string Shape(const std::vector<std::int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

}  // namespace

std::vector<V41Tensor> V41Tensors(const V41Config& c) {
  std::vector<V41Tensor> out;
  Builder b(out);
  b.Bf16("embed.weight", {c.vocab_size, c.dim});
  b.Bf16("norm.weight", {c.dim});
  b.Bf16("head.weight", {c.vocab_size, c.dim});
  for (int l = 0; l < c.n_layers; ++l) AddBlock(b, c, fmt::format("layers.{}.", l), l, false);
  for (int s = 0; s < c.n_mtp_layers && c.dspark_block_size > 0; ++s) {
    const std::string p = fmt::format("mtp.{}.", s);
    AddBlock(b, c, p, c.n_layers + s, true);
    if (s == 0) {
      b.Fp8(p + "main_proj", c.dim, static_cast<std::int64_t>(c.dim) * static_cast<std::int64_t>(c.dspark_target_layer_ids.size()));
      b.Bf16(p + "main_norm.weight", {c.dim});
    }
    if (s == c.n_mtp_layers - 1) {
      b.Bf16(p + "norm.weight", {c.dim});
      b.Bf16(p + "markov_head.embed.weight", {c.vocab_size, c.dspark_markov_rank});
      b.Bf16(p + "markov_head.head.weight", {c.vocab_size, c.dspark_markov_rank});
      b.Bf16(p + "confidence_head.proj.weight", {1, c.dim + c.dspark_markov_rank});
    }
  }
  return out;
}

bool IsIgnoredV41Tensor(const std::string& name) {
  if (name.starts_with("vision.") || name.starts_with("aligner.") || name.starts_with("image_")) return true;
  if (name.ends_with(".ffn.gate.bias_vl")) return true;
  if (name.starts_with("mtp.") && (name.ends_with(".embed.weight") || name.ends_with(".head.weight"))) {
    return name.find(".markov_head.") == std::string::npos;  // the stages' tied copies, not the Markov head's own
  }
  return false;
}

V41Contents CheckV41Checkpoint(const std::filesystem::path& dir, const V41Config& config) {
  std::map<std::string, const V41Tensor*> expected;
  const std::vector<V41Tensor> tensors = V41Tensors(config);
  for (const V41Tensor& t : tensors) expected[t.name] = &t;
  V41Contents contents;
  std::map<std::string, std::string> found;  // name → file
  for (const std::string& file : ReadShardIndex(dir).files) {
    const MappedFile mapping(dir / file);
    const SafetensorsHeader header = ParseSafetensorsHeader(mapping.bytes(), (dir / file).string());
    for (const auto& [name, info] : header.tensors) {
      if (const auto [at, fresh] = found.emplace(name, file); !fresh) {
        throw ModelError(fmt::format("{}: tensor '{}' is also in {}", (dir / file).string(), name, at->second));
      }
      contents.bytes += info.end - info.begin;
      const auto it = expected.find(name);
      if (it == expected.end()) {
        if (IsIgnoredV41Tensor(name)) {
          ++contents.ignored;
          continue;
        }
        throw ModelError(fmt::format("{}: tensor '{}' is not a tensor of this DeepSeek V4.1 configuration", (dir / file).string(), name));
      }
      const V41Tensor& want = *it->second;
      if (info.dtype != want.dtype || info.shape != want.shape) {
        throw ModelError(fmt::format("{}: tensor '{}' is {} {}; this configuration needs {} {}", (dir / file).string(), name,
                                     DTypeName(info.dtype), Shape(info.shape), DTypeName(want.dtype), Shape(want.shape)));
      }
      ++contents.tensors;
      if (want.dtype == DType::kF8E8M0) continue;  // scales, not parameters
      std::int64_t n = info.elements();
      std::string kind(DTypeName(want.dtype));
      if (want.dtype == DType::kI8) {
        n *= 2;
        kind = "FP4 (I8)";
      }
      contents.parameters_by_dtype[kind] += n;
    }
  }
  for (const V41Tensor& t : tensors) {
    if (!found.contains(t.name)) {
      throw ModelError(
          fmt::format("{}: tensor '{}' ({} {}) is missing from the checkpoint", dir.string(), t.name, DTypeName(t.dtype), Shape(t.shape)));
    }
  }
  return contents;
}

}  // namespace tandem::rt
