#include "runtime/model/synthetic_checkpoint.hpp"

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "runtime/model/model_error.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/model/seeded_stream.hpp"
#include "runtime/model/synthetic_tokenizer.hpp"
#include "runtime/numeric/dtype.hpp"

namespace tandem::rt {

namespace {

ModelConfig BaseConfig() {
  ModelConfig c;
  c.architecture = Architecture::kDeepseekV3;
  c.first_k_dense_replace = 1;
  c.n_shared_experts = 1;
  c.topk_method = TopkMethod::kNoauxTc;
  c.scoring_func = ScoringFunc::kSigmoid;
  c.routed_scaling_factor = 2.5;
  c.norm_topk_prob = true;
  c.rope_theta = 10000.0;
  c.rms_norm_eps = 1e-6;
  c.num_nextn_predict_layers = 1;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  return c;
}

// How one tensor is initialised.
struct Init {
  enum class Kind { kUniform, kNorm, kBias } kind = Kind::kUniform;
  double std = 1.0;
};

struct TensorSpec {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<std::int64_t> shape;
  Init init;
};

class SpecList {
 public:
  explicit SpecList(const ModelConfig& c)
      : c_(c), residual_scale_(1.0 / std::sqrt(2.0 * (c.num_hidden_layers + c.num_nextn_predict_layers))) {}

  void Linear(const std::string& name, std::int64_t out, std::int64_t in, bool residual = false) {
    specs_.push_back(
        {name, DType::kBF16, {out, in}, {Init::Kind::kUniform, (residual ? residual_scale_ : 1.0) / std::sqrt(static_cast<double>(in))}});
  }
  void Norm(const std::string& name, std::int64_t n) { specs_.push_back({name, DType::kBF16, {n}, {Init::Kind::kNorm, 0.1}}); }
  void Mlp(const std::string& p, std::int64_t inter) {
    Linear(p + ".gate_proj.weight", inter, c_.hidden_size);
    Linear(p + ".up_proj.weight", inter, c_.hidden_size);
    Linear(p + ".down_proj.weight", c_.hidden_size, inter, true);
  }
  void Block(int layer) {
    const std::string p = fmt::format("model.layers.{}", layer);
    const std::int64_t h = c_.hidden_size, heads = c_.num_attention_heads;
    Norm(p + ".input_layernorm.weight", h);
    Norm(p + ".post_attention_layernorm.weight", h);
    const std::string a = p + ".self_attn";
    Linear(a + ".q_a_proj.weight", c_.q_lora_rank, h);
    Norm(a + ".q_a_layernorm.weight", c_.q_lora_rank);
    Linear(a + ".q_b_proj.weight", heads * c_.q_head_dim(), c_.q_lora_rank);
    Linear(a + ".kv_a_proj_with_mqa.weight", c_.kv_lora_rank + c_.qk_rope_head_dim, h);
    Norm(a + ".kv_a_layernorm.weight", c_.kv_lora_rank);
    Linear(a + ".kv_b_proj.weight", heads * (c_.qk_nope_head_dim + c_.v_head_dim), c_.kv_lora_rank);
    Linear(a + ".o_proj.weight", h, heads * c_.v_head_dim, true);
    if (layer < c_.first_k_dense_replace) {
      Mlp(p + ".mlp", c_.intermediate_size);
      return;
    }
    Linear(p + ".mlp.gate.weight", c_.n_routed_experts, h);
    specs_.push_back({p + ".mlp.gate.e_score_correction_bias", DType::kF32, {c_.n_routed_experts}, {Init::Kind::kBias, 0.02}});
    for (int e = 0; e < c_.n_routed_experts; ++e) Mlp(fmt::format("{}.mlp.experts.{}", p, e), c_.moe_intermediate_size);
    Mlp(p + ".mlp.shared_experts", static_cast<std::int64_t>(c_.moe_intermediate_size) * c_.n_shared_experts);
  }
  void Model() {
    const std::int64_t h = c_.hidden_size, v = c_.vocab_size;
    specs_.push_back({"model.embed_tokens.weight", DType::kBF16, {v, h}, {Init::Kind::kUniform, 1.0}});
    for (int l = 0; l < c_.num_hidden_layers; ++l) Block(l);
    Norm("model.norm.weight", h);
    Linear("lm_head.weight", v, h);
    // DeepSeek-V3's MTP layer: its own embedding and head, enorm/hnorm, eh_proj, one block.
    for (int m = 0; m < c_.num_nextn_predict_layers; ++m) {
      const int layer = c_.num_hidden_layers + m;
      const std::string p = fmt::format("model.layers.{}", layer);
      specs_.push_back({p + ".embed_tokens.weight", DType::kBF16, {v, h}, {Init::Kind::kUniform, 1.0}});
      Norm(p + ".enorm.weight", h);
      Norm(p + ".hnorm.weight", h);
      Linear(p + ".eh_proj.weight", h, 2 * h);
      Norm(p + ".shared_head.norm.weight", h);
      Linear(p + ".shared_head.head.weight", v, h);
      Block(layer);
    }
  }
  const std::vector<TensorSpec>& specs() const { return specs_; }

 private:
  const ModelConfig& c_;
  double residual_scale_;
  std::vector<TensorSpec> specs_;
};

void Fill(const TensorSpec& spec, std::uint64_t seed, std::vector<char>& bytes) {
  std::int64_t n = 1;
  for (std::int64_t d : spec.shape) n *= d;
  bytes.resize(static_cast<std::size_t>(n) * DTypeSize(spec.dtype));
  std::uint64_t state = StreamSeed(seed, spec.name);
  const double a = std::sqrt(3.0) * spec.init.std;  // uniform(−a, a) has this std
  for (std::int64_t i = 0; i < n; ++i) {
    const double u = NextSymmetric(state);
    double value = 0.0;
    switch (spec.init.kind) {
      case Init::Kind::kUniform:
        value = a * u;
        break;
      case Init::Kind::kNorm:
        value = 1.0 + spec.init.std * u;
        break;
      case Init::Kind::kBias:
        value = spec.init.std * u;
        break;
    }
    if (spec.dtype == DType::kF32) {
      const auto f = static_cast<float>(value);
      std::memcpy(bytes.data() + 4 * i, &f, 4);
    } else {
      const std::uint16_t b = F32ToBf16(static_cast<float>(value));
      bytes[static_cast<std::size_t>(2 * i)] = static_cast<char>(b & 0xff);
      bytes[static_cast<std::size_t>(2 * i + 1)] = static_cast<char>(b >> 8);
    }
  }
}

void WriteText(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw ModelError(fmt::format("{}: cannot write", path.string()));
}

}  // namespace

SyntheticPreset FindPreset(const std::string& name) {
  SyntheticPreset p;
  p.name = name;
  ModelConfig& c = p.config = BaseConfig();
  if (name == "tiny") {
    c.hidden_size = 128;
    c.num_hidden_layers = 4;
    c.intermediate_size = 256;
    c.moe_intermediate_size = 64;
    c.n_routed_experts = 16;
    c.num_experts_per_tok = 4;
    c.n_group = 4;
    c.topk_group = 2;
    c.num_attention_heads = 4;
    c.q_lora_rank = 64;
    c.kv_lora_rank = 32;
    c.qk_nope_head_dim = 16;
    c.qk_rope_head_dim = 8;
    c.v_head_dim = 16;
    c.max_position_embeddings = 2048;
    c.rope_scaling = YarnScaling{
        .factor = 4, .original_max_position_embeddings = 512, .beta_fast = 32, .beta_slow = 1, .mscale = 1, .mscale_all_dim = 1};
    p.tokenizer_merges = 2000;
  } else if (name == "small") {
    c.hidden_size = 512;
    c.num_hidden_layers = 12;
    c.intermediate_size = 1024;
    c.moe_intermediate_size = 128;
    c.n_routed_experts = 64;
    c.num_experts_per_tok = 6;
    c.n_group = 8;
    c.topk_group = 4;
    c.num_attention_heads = 8;
    c.q_lora_rank = 256;
    c.kv_lora_rank = 128;
    c.qk_nope_head_dim = 64;
    c.qk_rope_head_dim = 32;
    c.v_head_dim = 64;
    c.max_position_embeddings = 8192;
    c.rope_scaling = YarnScaling{
        .factor = 4, .original_max_position_embeddings = 2048, .beta_fast = 32, .beta_slow = 1, .mscale = 1, .mscale_all_dim = 1};
    p.tokenizer_merges = 16000;
  } else {
    throw ModelError(fmt::format("init-model: unknown preset '{}' (tiny, small)", name));
  }
  return p;
}

SyntheticCheckpointReport WriteSyntheticCheckpoint(const SyntheticPreset& preset, std::uint64_t seed, const std::filesystem::path& out_dir,
                                                   const std::filesystem::path& tokenizer_source) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw ModelError(fmt::format("{}: cannot create: {}", out_dir.string(), ec.message()));

  const SyntheticTokenizerFiles tokenizer = DeriveSyntheticTokenizer(tokenizer_source, preset.tokenizer_merges);
  SyntheticCheckpointReport report;
  report.config = preset.config;
  report.config.vocab_size = tokenizer.vocab_size;
  report.tokenizer = tokenizer.description;

  SpecList specs(report.config);
  specs.Model();
  SafetensorsWriter writer;
  writer.SetMetadata("format", "pt");
  writer.SetMetadata("tandem_preset", preset.name);
  writer.SetMetadata("tandem_seed", std::to_string(seed));
  std::map<std::string, const TensorSpec*> by_name;
  for (const TensorSpec& s : specs.specs()) {
    writer.Add(s.name, s.dtype, s.shape);
    by_name[s.name] = &s;
  }

  std::vector<char> bytes;
  writer.Write(out_dir / "model.safetensors", [&](const std::string& name) {
    Fill(*by_name.at(name), seed, bytes);
    return std::as_bytes(std::span<const char>(bytes));
  });
  report.weight_bytes = writer.DataBytes();
  WriteText(out_dir / "config.json", ModelConfigJson(report.config));
  WriteText(out_dir / "tokenizer.json", tokenizer.tokenizer_json);
  WriteText(out_dir / "tokenizer_config.json", tokenizer.tokenizer_config_json);
  return report;
}

}  // namespace tandem::rt
