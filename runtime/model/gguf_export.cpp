#include "runtime/model/gguf_export.hpp"

#include <cstring>
#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/kernels/weight_matrix.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/ggml_blocks.hpp"
#include "runtime/model/json_bounds.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/model_revision.hpp"
#include "runtime/model/text_file.hpp"
#include "runtime/model/tokenizer.hpp"
#include "runtime/numeric/dtype.hpp"

namespace tandem::rt {

namespace {

using json = nlohmann::json;
using Emit = GgufWriter::Emit;

// One row of fp32 values in `type`, appended to `out`.
void EncodeRow(std::span<const float> row, GgmlType type, std::vector<std::byte>& out) {
  const std::size_t at = out.size();
  switch (type) {
    case GgmlType::kF32:
      out.resize(at + row.size() * 4);
      std::memcpy(out.data() + at, row.data(), row.size() * 4);
      return;
    case GgmlType::kF16:
    case GgmlType::kBF16: {
      out.resize(at + row.size() * 2);
      for (std::size_t i = 0; i < row.size(); ++i) {
        const std::uint16_t v = type == GgmlType::kF16 ? F32ToF16(row[i]) : F32ToBf16(row[i]);
        out[at + 2 * i] = static_cast<std::byte>(v & 0xff);
        out[at + 2 * i + 1] = static_cast<std::byte>(v >> 8);
      }
      return;
    }
    case GgmlType::kQ8_0:
      out.resize(at + row.size() / kGgmlBlockValues * kQ8_0BlockBytes);
      EncodeQ8_0(row, std::span(out).subspan(at));
      return;
    case GgmlType::kQ4_0:
      out.resize(at + row.size() / kGgmlBlockValues * kQ4_0BlockBytes);
      EncodeQ4_0(row, std::span(out).subspan(at));
      return;
  }
}

// What one GGUF tensor is made of: HF matrices [rows × cols] (several: the routed
// experts of a layer, stacked) or one HF vector.
struct Source {
  std::vector<std::string> names;
  std::int64_t rows = 0;  // 0: a vector of `cols` values
  std::int64_t cols = 0;
};

struct Planned {
  std::string name;
  GgmlType type;
  std::vector<std::uint64_t> ne;
  Source source;
};

class Plan {
 public:
  Plan(const Checkpoint& ckpt, const GgufExportOptions& options) : ckpt_(ckpt), options_(options) {}

  void Vector(std::string gguf, std::string hf, std::int64_t n) {
    Require(hf);
    tensors_.push_back({std::move(gguf), GgmlType::kF32, {static_cast<std::uint64_t>(n)}, {{std::move(hf)}, 0, n}});
  }
  // `keep_f32`: the router's gate, as llama.cpp's converter keeps it.
  void Matrix(std::string gguf, std::vector<std::string> hf, std::int64_t rows, std::int64_t cols, bool keep_f32 = false) {
    for (const auto& name : hf) Require(name);
    GgmlType type = keep_f32 ? GgmlType::kF32 : options_.matrix_type;
    if (cols % GgmlBlockValues(type) != 0) type = GgmlType::kF32;
    std::vector<std::uint64_t> ne{static_cast<std::uint64_t>(cols), static_cast<std::uint64_t>(rows)};
    if (hf.size() > 1) ne.push_back(hf.size());
    tensors_.push_back({std::move(gguf), type, std::move(ne), {std::move(hf), rows, cols}});
  }

  const std::vector<Planned>& tensors() const { return tensors_; }

  void Produce(const Planned& t, const Emit& emit) const {
    std::vector<std::byte> bytes;
    if (t.source.rows == 0) {
      const std::vector<float> v = ckpt_.Vector(t.source.names[0], t.source.cols);
      EncodeRow(v, GgmlType::kF32, bytes);
      emit(bytes);
      return;
    }
    std::vector<float> row(static_cast<std::size_t>(t.source.cols));
    for (const std::string& name : t.source.names) {
      const WeightMatrix w = ckpt_.Matrix(name, t.source.rows, t.source.cols, WeightPlacement::kMapped);
      for (std::int64_t r = 0; r < w.rows; ++r) {
        CopyRow(w, r, row.data());
        bytes.clear();
        EncodeRow(row, t.type, bytes);
        emit(bytes);
      }
    }
  }

 private:
  // Has() sees the tensors as stored: a quantized matrix is X.qweight.
  void Require(const std::string& name) const {
    constexpr std::string_view kWeight = ".weight";
    const bool quantized = name.ends_with(kWeight) && ckpt_.Has(name.substr(0, name.size() - kWeight.size()) + ".qweight");
    if (!ckpt_.Has(name) && !quantized) throw ModelError(fmt::format("{}: no tensor '{}'", ckpt_.dir().string(), name));
  }

  const Checkpoint& ckpt_;
  const GgufExportOptions& options_;
  std::vector<Planned> tensors_;
};

void PlanTensors(Plan& plan, const Checkpoint& ckpt) {
  const ModelConfig& c = ckpt.config();
  const std::int64_t hidden = c.hidden_size, heads = c.num_attention_heads;
  plan.Matrix("token_embd.weight", {"model.embed_tokens.weight"}, c.vocab_size, hidden);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string hf = fmt::format("model.layers.{}.", l), blk = fmt::format("blk.{}.", l);
    plan.Vector(blk + "attn_norm.weight", hf + "input_layernorm.weight", hidden);
    if (c.q_lora_rank > 0) {
      plan.Matrix(blk + "attn_q_a.weight", {hf + "self_attn.q_a_proj.weight"}, c.q_lora_rank, hidden);
      plan.Vector(blk + "attn_q_a_norm.weight", hf + "self_attn.q_a_layernorm.weight", c.q_lora_rank);
      plan.Matrix(blk + "attn_q_b.weight", {hf + "self_attn.q_b_proj.weight"}, heads * c.q_head_dim(), c.q_lora_rank);
    } else {
      plan.Matrix(blk + "attn_q.weight", {hf + "self_attn.q_proj.weight"}, heads * c.q_head_dim(), hidden);
    }
    plan.Matrix(blk + "attn_kv_a_mqa.weight", {hf + "self_attn.kv_a_proj_with_mqa.weight"}, c.kv_lora_rank + c.qk_rope_head_dim, hidden);
    plan.Vector(blk + "attn_kv_a_norm.weight", hf + "self_attn.kv_a_layernorm.weight", c.kv_lora_rank);
    plan.Matrix(blk + "attn_kv_b.weight", {hf + "self_attn.kv_b_proj.weight"}, heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank);
    plan.Matrix(blk + "attn_output.weight", {hf + "self_attn.o_proj.weight"}, hidden, heads * c.v_head_dim);
    plan.Vector(blk + "ffn_norm.weight", hf + "post_attention_layernorm.weight", hidden);
    if (!c.IsMoeLayer(l)) {
      plan.Matrix(blk + "ffn_gate.weight", {hf + "mlp.gate_proj.weight"}, c.intermediate_size, hidden);
      plan.Matrix(blk + "ffn_up.weight", {hf + "mlp.up_proj.weight"}, c.intermediate_size, hidden);
      plan.Matrix(blk + "ffn_down.weight", {hf + "mlp.down_proj.weight"}, hidden, c.intermediate_size);
      continue;
    }
    plan.Matrix(blk + "ffn_gate_inp.weight", {hf + "mlp.gate.weight"}, c.n_routed_experts, hidden, /*keep_f32=*/true);
    if (ckpt.Has(hf + "mlp.gate.e_score_correction_bias")) {
      plan.Vector(blk + "exp_probs_b.bias", hf + "mlp.gate.e_score_correction_bias", c.n_routed_experts);
    }
    for (const auto& [gguf, proj] : {std::pair{"ffn_gate_exps", "gate_proj"}, {"ffn_up_exps", "up_proj"}, {"ffn_down_exps", "down_proj"}}) {
      std::vector<std::string> experts;
      for (int e = 0; e < c.n_routed_experts; ++e) experts.push_back(fmt::format("{}mlp.experts.{}.{}.weight", hf, e, proj));
      const bool down = std::string_view(proj) == "down_proj";
      plan.Matrix(blk + gguf + ".weight", std::move(experts), down ? hidden : c.moe_intermediate_size,
                  down ? c.moe_intermediate_size : hidden);
    }
    if (c.n_shared_experts > 0) {
      const std::int64_t shared = static_cast<std::int64_t>(c.moe_intermediate_size) * c.n_shared_experts;
      plan.Matrix(blk + "ffn_gate_shexp.weight", {hf + "mlp.shared_experts.gate_proj.weight"}, shared, hidden);
      plan.Matrix(blk + "ffn_up_shexp.weight", {hf + "mlp.shared_experts.up_proj.weight"}, shared, hidden);
      plan.Matrix(blk + "ffn_down_shexp.weight", {hf + "mlp.shared_experts.down_proj.weight"}, hidden, shared);
    }
  }
  plan.Vector("output_norm.weight", "model.norm.weight", hidden);
  // Tied embeddings: the head is written out, so the file needs no runtime's tying rule.
  plan.Matrix("output.weight", {c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"}, c.vocab_size, hidden);
}

// A JSON object from a file, within the project's nesting and size bounds.
json ReadJsonObject(const std::filesystem::path& path) {
  const std::string text = ReadTextFile(path);
  if (FindJsonExcess(text, JsonBounds{})) throw ModelError(fmt::format("{}: nested or sized beyond limits", path.string()));
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) throw ModelError(fmt::format("{}: not a JSON object", path.string()));
  return doc;
}

// tokenizer.json's vocabulary as GGUF lists: tokens (byte-level strings, by id; ids
// nothing names become "[PAD<id>]"), their types and the merges.
void SetTokenizer(GgufWriter& w, const std::filesystem::path& dir, const ModelConfig& c, const GgufExportOptions& options) {
  const std::filesystem::path path = dir / "tokenizer.json";
  if (!std::filesystem::exists(path)) throw ModelError(fmt::format("{}: no tokenizer.json (a GGUF carries its tokenizer)", dir.string()));
  (void)Tokenizer::Load(path);  // the checks the runtime makes of it
  const json doc = ReadJsonObject(path);
  // GGUF token types (llama.cpp's llama_token_type): normal, control, user-defined, unused.
  constexpr std::int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;
  std::vector<std::string> tokens(static_cast<std::size_t>(c.vocab_size));
  std::vector<std::int32_t> types(tokens.size(), kUnused);
  auto place = [&](const std::string& content, std::int64_t id, std::int32_t type) {
    if (id < 0 || id >= c.vocab_size) {
      throw ModelError(
          fmt::format("{}: token '{}' has id {}, outside config.json's vocab_size {}", path.string(), content, id, c.vocab_size));
    }
    tokens[static_cast<std::size_t>(id)] = content;
    types[static_cast<std::size_t>(id)] = type;
  };
  for (const auto& [content, id] : doc.at("model").at("vocab").items()) place(content, id.get<std::int64_t>(), kNormal);
  for (const json& a : doc.value("added_tokens", json::array())) {
    place(a.at("content").get<std::string>(), a.at("id").get<std::int64_t>(), a.value("special", false) ? kControl : kUserDefined);
  }
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    if (types[id] == kUnused) tokens[id] = fmt::format("[PAD{}]", id);
  }
  std::vector<std::string> merges;
  for (const json& m : doc.at("model").at("merges")) {
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  }
  w.Set("tokenizer.ggml.model", std::string("gpt2"));
  w.Set("tokenizer.ggml.pre", options.tokenizer_pre);
  w.Set("tokenizer.ggml.tokens", std::move(tokens));
  w.Set("tokenizer.ggml.token_type", std::move(types));
  w.Set("tokenizer.ggml.merges", std::move(merges));
  w.Set("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(c.bos_token_id));
  w.Set("tokenizer.ggml.eos_token_id", static_cast<std::uint32_t>(c.eos_token_id));
  bool add_bos = true;
  const std::filesystem::path config_path = dir / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    const json config = ReadJsonObject(config_path);
    if (config.contains("add_bos_token") && config["add_bos_token"].is_boolean()) add_bos = config["add_bos_token"].get<bool>();
    if (config.contains("chat_template") && config["chat_template"].is_string()) {
      w.Set("tokenizer.chat_template", config["chat_template"].get<std::string>());
    }
  }
  w.Set("tokenizer.ggml.add_bos_token", add_bos);
  w.Set("tokenizer.ggml.add_eos_token", false);
}

void SetHyperparameters(GgufWriter& w, const ModelConfig& c, GgmlType type, const std::string& name, const std::string& revision) {
  const std::string a = "deepseek2.";
  auto u32 = [](auto v) { return static_cast<std::uint32_t>(v); };
  w.Set("general.architecture", std::string("deepseek2"));
  w.Set("general.name", name);
  w.Set("general.file_type", GgmlFileType(type));
  if (type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0) w.Set("general.quantization_version", std::uint32_t{2});
  w.Set("tandem.model_revision", revision);
  w.Set(a + "block_count", u32(c.num_hidden_layers));
  w.Set(a + "context_length", u32(c.max_position_embeddings));
  w.Set(a + "embedding_length", u32(c.hidden_size));
  w.Set(a + "feed_forward_length", u32(c.intermediate_size));
  w.Set(a + "attention.head_count", u32(c.num_attention_heads));
  w.Set(a + "attention.head_count_kv", u32(c.num_attention_heads));
  w.Set(a + "rope.freq_base", static_cast<float>(c.rope_theta));
  w.Set(a + "attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  w.Set(a + "expert_used_count", u32(c.num_experts_per_tok));
  w.Set(a + "leading_dense_block_count", u32(c.first_k_dense_replace));
  w.Set(a + "vocab_size", u32(c.vocab_size));
  if (c.q_lora_rank > 0) w.Set(a + "attention.q_lora_rank", u32(c.q_lora_rank));
  w.Set(a + "attention.kv_lora_rank", u32(c.kv_lora_rank));
  w.Set(a + "attention.key_length", u32(c.q_head_dim()));
  w.Set(a + "attention.value_length", u32(c.v_head_dim));
  w.Set(a + "expert_feed_forward_length", u32(c.moe_intermediate_size));
  w.Set(a + "expert_count", u32(c.n_routed_experts));
  w.Set(a + "expert_shared_count", u32(c.n_shared_experts));
  w.Set(a + "expert_weights_scale", static_cast<float>(c.routed_scaling_factor));
  w.Set(a + "expert_weights_norm", c.norm_topk_prob);
  // llama.cpp's gating function codes: softmax 1, sigmoid 2, sqrt-softplus 4.
  w.Set(a + "expert_gating_func", std::uint32_t{c.scoring_func == ScoringFunc::kSoftmax   ? 1u
                                                : c.scoring_func == ScoringFunc::kSigmoid ? 2u
                                                                                          : 4u});
  if (c.n_group > 1) {
    w.Set(a + "expert_group_count", u32(c.n_group));
    w.Set(a + "expert_group_used_count", u32(c.topk_group));
  }
  w.Set(a + "rope.dimension_count", u32(c.qk_rope_head_dim));
  if (c.rope_scaling) {
    w.Set(a + "rope.scaling.type", std::string("yarn"));
    w.Set(a + "rope.scaling.factor", static_cast<float>(c.rope_scaling->factor));
    w.Set(a + "rope.scaling.original_context_length", u32(c.rope_scaling->original_max_position_embeddings));
    w.Set(a + "rope.scaling.yarn_log_multiplier", static_cast<float>(0.1 * c.rope_scaling->mscale_all_dim));
  }
}

}  // namespace

GgufExportReport ExportGguf(const std::filesystem::path& in, const std::filesystem::path& out, const GgufExportOptions& options,
                            const std::function<void(const std::string&)>& progress) {
  if (std::filesystem::exists(out)) throw std::invalid_argument(fmt::format("{} exists; the export writes a new file", out.string()));
  const Checkpoint ckpt = Checkpoint::Open(in, WeightPlacement::kMapped);
  const ModelConfig& c = ckpt.config();
  if (c.rope_scaling && c.rope_scaling->mscale != c.rope_scaling->mscale_all_dim) {
    // llama.cpp-family runtimes take one YaRN attention scale (from mscale_all_dim) and
    // leave the rotary part unscaled, which equals HF's only when the two are equal.
    throw ModelError(fmt::format("{}/config.json: rope_scaling.mscale {} differs from mscale_all_dim {}, which GGUF cannot express",
                                 in.string(), c.rope_scaling->mscale, c.rope_scaling->mscale_all_dim));
  }
  GgufWriter w;
  const std::string name = std::filesystem::absolute(in).lexically_normal().filename().string();
  SetHyperparameters(w, c, options.matrix_type, name.empty() ? std::string("model") : name, ModelRevision(in));
  try {
    SetTokenizer(w, in, c, options);
  } catch (const nlohmann::json::exception& e) {
    throw ModelError(fmt::format("{}/tokenizer.json: unexpected structure: {}", in.string(), e.what()));
  }
  Plan plan(ckpt, options);
  PlanTensors(plan, ckpt);
  std::map<std::string, const Planned*, std::less<>> by_name;
  for (const Planned& t : plan.tensors()) {
    w.AddTensor(t.name, t.type, t.ne);
    by_name[t.name] = &t;
  }
  GgufExportReport report;
  report.tensors = static_cast<int>(plan.tensors().size());
  report.data_bytes = w.DataBytes();
  if (c.num_nextn_predict_layers > 0) report.skipped.push_back(fmt::format("{} MTP layer(s)", c.num_nextn_predict_layers));
  int done = 0;
  w.Write(out, [&](const std::string& tensor, const Emit& emit) {
    plan.Produce(*by_name.at(tensor), emit);
    if (progress && ++done % 64 == 0) progress(fmt::format("{} of {} tensors", done, report.tensors));
  });
  return report;
}

}  // namespace tandem::rt
