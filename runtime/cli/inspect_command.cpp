#include <filesystem>
#include <map>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/cli/commands.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/model_revision.hpp"
#include "runtime/model/v41_config.hpp"
#include "runtime/model/v41_tensors.hpp"

namespace tandem::rt::cli {

namespace {

// Parameters of one routed expert of the main model (gate, up, down).
std::int64_t ExpertParameters(const ModelConfig& c) { return 3ll * c.hidden_size * c.moe_intermediate_size; }

double Millions(std::int64_t n) { return static_cast<double>(n) / 1e6; }

// A DeepSeek V4.1 checkpoint: its configuration and what each layer is. The engine does
// not run V4.1 yet, so its tensors are not read here.
void InspectV41(const std::string& dir) {
  const V41Config c = LoadV41Config(dir);
  fmt::print("checkpoint    {}\n", dir);
  fmt::print("architecture  DeepseekV41ForCausalLM (tandem-rt eval and serve run it, in one process on the CPU)\n");
  fmt::print("layers        {}, DSpark stages {}, residual copies (hc_mult) {}\n", c.n_layers, c.n_mtp_layers, c.hc_mult);
  fmt::print("hidden        {}, vocab {}, heads {} of {} (rope {}), one KV head, q_lora {}, o_groups {} (o_lora {}), window {}\n", c.dim,
             c.vocab_size, c.n_heads, c.head_dim, c.rope_head_dim, c.q_lora_rank, c.o_groups, c.o_lora_rank, c.window_size);
  fmt::print("experts       {} routed (top {}, {}), 1 shared, intermediate {}, SwiGLU clamp {}, route scale {}\n", c.n_routed_experts,
             c.n_activated_experts, ToString(c.score_func), c.moe_inter_dim, c.swiglu_limit, c.route_scale);
  if (c.index_n_heads > 0) {
    fmt::print("indexer       {} heads of {}, top {}; candidates: {}\n", c.index_n_heads, c.index_head_dim, c.index_topk,
               c.candidate_source_layer >= 0
                   ? fmt::format("{} blocks of {} from layer {}", c.candidate_topk_blocks, c.candidate_block_size, c.candidate_source_layer)
                   : std::string("none"));
  }
  fmt::print("layer  block                   ratio  compressed KV of  rope                       engram\n");
  for (int l = 0; l < c.n_layers; ++l) {
    const int r = c.compress_ratios[static_cast<std::size_t>(l)];
    const std::string rope = r == 0 ? fmt::format("θ {:g}", c.rope_theta)
                                    : fmt::format("θ {:g}{}", c.compress_rope_theta,
                                                  c.original_seq_len > 0 ? fmt::format(", YaRN ×{:g}", c.rope_factor) : std::string());
    fmt::print("{:>5}  {:<22}  {:>5}  {:>16}  {:<25}  {}\n", l, ToString(c.Block(l)), r,
               r == 0 ? std::string("-") : fmt::format("layer {}", c.KvSourceOf(l)), rope, c.IsEngramLayer(l) ? "yes" : "");
  }
  if (c.dspark_block_size > 0) {
    fmt::print("DSpark        {} stages (mtp.0–{}), block {}, reads layers {}, {} experts top {}\n", c.n_mtp_layers, c.n_mtp_layers - 1,
               c.dspark_block_size, fmt::join(c.dspark_target_layer_ids, ", "), c.dspark_experts(), c.dspark_activated());
  }
  const std::filesystem::path root(dir);
  if (!std::filesystem::exists(root / "model.safetensors") && !std::filesystem::exists(root / "model.safetensors.index.json")) {
    fmt::print("weights       none (a configuration only)\n");
    return;
  }
  // Every tensor the configuration implies, in its published dtype and shape.
  const V41Contents contents = CheckV41Checkpoint(root, c);
  std::int64_t total = 0;
  for (const auto& [dtype, n] : contents.parameters_by_dtype) total += n;
  fmt::print("parameters    {:.3f} M\n", static_cast<double>(total) / 1e6);
  for (const auto& [dtype, n] : contents.parameters_by_dtype)
    fmt::print("dtype         {}: {:.3f} M parameters\n", dtype, static_cast<double>(n) / 1e6);
  fmt::print("weights       {:.1f} MB in {} tensors, each as the configuration needs{}\n", static_cast<double>(contents.bytes) / 1e6,
             contents.tensors, contents.ignored > 0 ? fmt::format(" ({} more not used: vision, tied copies)", contents.ignored) : "");
  fmt::print("revision      {}\n", ModelRevision(dir));
}

void Inspect(const std::string& dir) {
  if (IsV41Checkpoint(dir)) return InspectV41(dir);
  const Checkpoint ckpt = Checkpoint::Open(dir, WeightPlacement::kMapped);
  const ModelConfig& c = ckpt.config();
  std::int64_t total = 0, mtp = 0;
  std::map<std::string, std::int64_t> by_dtype;
  const std::string mtp_prefix = fmt::format("model.layers.{}.", c.num_hidden_layers);
  std::uint64_t bytes = 0, quantized_bytes = 0;
  for (const std::string& name : ckpt.TensorNames()) {
    const TensorInfo& info = ckpt.Info(name);
    bytes += info.end - info.begin;
    const bool quantized = name.ends_with(".qweight") || name.ends_with(".qscales");
    if (quantized) quantized_bytes += info.end - info.begin;
    // Neither fp8 block scales nor group-quantization scales are parameters.
    if (name.ends_with("_scale_inv") || name.ends_with(".qscales")) continue;
    std::int64_t n = info.elements();
    std::string dtype(DTypeName(info.dtype));
    if (quantized) {  // I8: one value per byte; U8: two int4 values per byte
      if (info.dtype == DType::kU8) n *= 2;
      dtype = fmt::format("{} ({})", info.dtype == DType::kU8 ? "int4" : "int8", dtype);
    }
    total += n;
    by_dtype[dtype] += n;
    if (c.num_nextn_predict_layers > 0 && name.starts_with(mtp_prefix)) mtp += n;
  }
  int moe_layers = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) moe_layers += c.IsMoeLayer(l) ? 1 : 0;
  const std::int64_t routed = static_cast<std::int64_t>(moe_layers) * c.n_routed_experts * ExpertParameters(c);
  const std::int64_t active = total - mtp - routed + static_cast<std::int64_t>(moe_layers) * c.num_experts_per_tok * ExpertParameters(c);

  fmt::print("checkpoint    {}\n", dir);
  fmt::print("architecture  {}\n", c.architecture_name());
  fmt::print("layers        {} ({} dense, {} MoE), MTP layers {}\n", c.num_hidden_layers, c.num_hidden_layers - moe_layers, moe_layers,
             c.num_nextn_predict_layers);
  fmt::print("hidden        {}, vocab {}, heads {} (nope {}, rope {}, v {}), q_lora {}, kv_lora {}\n", c.hidden_size, c.vocab_size,
             c.num_attention_heads, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim, c.q_lora_rank, c.kv_lora_rank);
  if (c.n_routed_experts > 0) {
    fmt::print("experts       {} routed (top {}, {} groups, top {} groups), {} shared, intermediate {}\n", c.n_routed_experts,
               c.num_experts_per_tok, c.n_group, c.topk_group, c.n_shared_experts, c.moe_intermediate_size);
  }
  fmt::print("parameters    {:.3f} M total ({:.3f} M in MTP), {:.3f} M active per token\n", Millions(total), Millions(mtp),
             Millions(active));
  for (const auto& [dtype, n] : by_dtype) fmt::print("dtype         {}: {:.3f} M parameters\n", dtype, Millions(n));
  if (c.quantization) {
    const QuantizedTensors t = c.quantization->tensors;
    fmt::print("quantization  {}{} {}, group {} ({:.1f} MB)\n",
               t == QuantizedTensors::kRoutedExperts ? "routed experts"
               : t == QuantizedTensors::kExperts     ? "experts"
                                                     : "linear layers",
               c.quantization->embedding ? " and embeddings" : "", ToString(c.quantization->format), c.quantization->group_size,
               static_cast<double>(quantized_bytes) / 1e6);
  }
  fmt::print("weights       {:.1f} MB\n", static_cast<double>(bytes) / 1e6);
  fmt::print("revision      {}\n", ModelRevision(ckpt.dir()));
}

}  // namespace

void AddInspectCommand(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("inspect", "Print a checkpoint's architecture, parameter counts, dtypes and revision");
  cmd->add_option("model", *dir, "Checkpoint directory")->required();
  cmd->callback([dir] { Inspect(*dir); });
}

}  // namespace tandem::rt::cli
