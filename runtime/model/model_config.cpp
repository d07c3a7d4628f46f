#include "runtime/model/model_config.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/model/config_reader.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/text_file.hpp"

namespace tandem::rt {

namespace {

using nlohmann::json;

Architecture ParseArchitecture(const ConfigReader& in) {
  const json& archs = in.Required("architectures");
  if (!archs.is_array() || archs.empty() || !archs[0].is_string()) {
    throw in.Error("architectures", "must be a non-empty list of names");
  }
  const std::string name = archs[0].get<std::string>();
  if (name == "DeepseekV3ForCausalLM") return Architecture::kDeepseekV3;
  if (name == "DeepseekV2ForCausalLM") return Architecture::kDeepseekV2;
  if (name == "DeepseekV41ForCausalLM") {
    throw in.Error("architectures",
                   "names DeepseekV41ForCausalLM, which this command does not run (`tandem-rt eval` and `inspect` do); it runs "
                   "DeepseekV3ForCausalLM and DeepseekV2ForCausalLM");
  }
  throw in.Error("architectures", fmt::format("names '{}'; supported: DeepseekV3ForCausalLM, DeepseekV2ForCausalLM", name));
}

std::optional<YarnScaling> ParseRopeScaling(const ConfigReader& in) {
  const json* v = in.Find("rope_scaling");
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) throw in.Error("rope_scaling", "must be an object or null");
  const ConfigReader scaling(*v, "config.json rope_scaling");
  const std::string type = scaling.String("type", scaling.String("rope_type", std::string("")));
  if (type != "yarn") {
    throw in.Error("rope_scaling", fmt::format("type '{}' is not supported; only 'yarn' (or null)", type));
  }
  YarnScaling y;
  y.factor = scaling.Number("factor");
  y.original_max_position_embeddings = scaling.Number("original_max_position_embeddings", 4096);
  y.beta_fast = scaling.Number("beta_fast", 32);
  y.beta_slow = scaling.Number("beta_slow", 1);
  y.mscale = scaling.Number("mscale", 1);
  y.mscale_all_dim = scaling.Number("mscale_all_dim", 0);
  if (!(y.factor > 0) || !(y.original_max_position_embeddings > 0)) {
    throw in.Error("rope_scaling", "factor and original_max_position_embeddings must be positive");
  }
  return y;
}

std::optional<CheckpointQuantization> ParseQuantization(const ConfigReader& in) {
  const json* v = in.Find("tandem_quantization");
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) throw in.Error("tandem_quantization", fmt::format("must be an object, got {}", v->dump()));
  const ConfigReader q(*v, "config.json tandem_quantization");
  CheckpointQuantization out;
  const std::string format = q.String("format");
  if (format == "int8")
    out.format = QuantFormat::kInt8;
  else if (format == "int4")
    out.format = QuantFormat::kInt4;
  else
    throw in.Error("tandem_quantization.format", fmt::format("'{}' is not a known format (int8, int4)", format));
  out.group_size = q.Int("group_size", std::nullopt, 1);
  if (out.group_size % 32 != 0) {
    throw in.Error("tandem_quantization.group_size",
                   fmt::format("must be a multiple of 32 (the kernels' input block), got {}", out.group_size));
  }
  const std::string tensors = q.String("tensors");
  if (tensors == kRoutedExpertTensors) {
    out.tensors = QuantizedTensors::kRoutedExperts;
  } else if (tensors == kAllExpertTensors) {
    out.tensors = QuantizedTensors::kExperts;
  } else if (tensors == kLinearTensors) {
    out.tensors = QuantizedTensors::kLinear;
  } else {
    throw in.Error("tandem_quantization.tensors",
                   fmt::format("'{}' is not one of '{}', '{}', '{}'", tensors, kRoutedExpertTensors, kAllExpertTensors, kLinearTensors));
  }
  out.embedding = q.Bool("embedding", false);
  return out;
}

void Validate(const ModelConfig& c, const ConfigReader& in) {
  auto need = [&](bool ok, std::string_view key, std::string_view why) {
    if (!ok) throw in.Error(key, why);
  };
  need(c.hidden_size > 0, "hidden_size", "must be positive");
  need(c.num_hidden_layers > 0, "num_hidden_layers", "must be positive");
  need(c.vocab_size > 0, "vocab_size", "must be positive");
  need(c.num_attention_heads > 0, "num_attention_heads", "must be positive");
  need(c.kv_lora_rank > 0, "kv_lora_rank", "must be positive");
  need(c.qk_rope_head_dim > 0 && c.qk_rope_head_dim % 2 == 0, "qk_rope_head_dim", "must be positive and even");
  need(c.v_head_dim > 0, "v_head_dim", "must be positive");
  need(c.moe_layer_freq > 0, "moe_layer_freq", "must be positive");
  need(c.rms_norm_eps > 0, "rms_norm_eps", "must be positive");
  need(c.rope_theta > 0, "rope_theta", "must be positive");
  need(c.bos_token_id < c.vocab_size, "bos_token_id", "must be below vocab_size");
  need(c.eos_token_id < c.vocab_size, "eos_token_id", "must be below vocab_size");
  const bool has_dense = c.first_k_dense_replace > 0 || c.n_routed_experts == 0 || c.moe_layer_freq > 1;
  if (has_dense) need(c.intermediate_size > 0, "intermediate_size", "must be positive (the model has dense layers)");
  if (c.n_routed_experts > 0) {
    need(c.moe_intermediate_size > 0, "moe_intermediate_size", "must be positive");
    need(c.num_experts_per_tok > 0 && c.num_experts_per_tok <= c.n_routed_experts, "num_experts_per_tok",
         "must be in [1, n_routed_experts]");
    need(c.n_group > 0 && c.n_routed_experts % c.n_group == 0, "n_group", "must divide n_routed_experts");
    need(c.topk_group > 0 && c.topk_group <= c.n_group, "topk_group", "must be in [1, n_group]");
    if (c.topk_method != TopkMethod::kGreedy) {
      need(c.topk_group * (c.n_routed_experts / c.n_group) >= c.num_experts_per_tok, "topk_group",
           "leaves fewer experts than num_experts_per_tok");
    }
  }
  if (c.quantization) {
    const int g = c.quantization->group_size;
    need(c.n_routed_experts > 0, "tandem_quantization", "quantizes routed experts but the model has none");
    need(c.hidden_size % g == 0, "tandem_quantization.group_size",
         fmt::format("{} does not divide hidden_size {} (the columns of gate_proj and up_proj)", g, c.hidden_size));
    need(c.moe_intermediate_size % g == 0, "tandem_quantization.group_size",
         fmt::format("{} does not divide moe_intermediate_size {} (the columns of down_proj)", g, c.moe_intermediate_size));
  }
}

}  // namespace

std::string_view ToString(ScoringFunc scoring) {
  switch (scoring) {
    case ScoringFunc::kSoftmax:
      return "softmax";
    case ScoringFunc::kSigmoid:
      return "sigmoid";
    case ScoringFunc::kSqrtSoftplus:
      return "sqrtsoftplus";
  }
  return "?";
}

std::optional<ScoringFunc> ScoringFuncFromName(std::string_view name) {
  for (const ScoringFunc f : {ScoringFunc::kSoftmax, ScoringFunc::kSigmoid, ScoringFunc::kSqrtSoftplus}) {
    if (ToString(f) == name) return f;
  }
  return std::nullopt;
}

std::string_view ModelConfig::architecture_name() const {
  return architecture == Architecture::kDeepseekV3 ? "DeepseekV3ForCausalLM" : "DeepseekV2ForCausalLM";
}

ModelConfig ParseModelConfig(std::string_view json_text, std::string_view source) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {
    throw ModelError(fmt::format("{}: not valid JSON: {}", source, e.what()));
  }
  if (!doc.is_object()) throw ModelError(fmt::format("{}: expected a JSON object", source));
  const ConfigReader in(doc, source);

  ModelConfig c;
  c.architecture = ParseArchitecture(in);
  c.hidden_size = in.Int("hidden_size");
  c.num_hidden_layers = in.Int("num_hidden_layers");
  c.vocab_size = in.Int("vocab_size");
  c.num_attention_heads = in.Int("num_attention_heads");
  c.n_routed_experts = in.Int("n_routed_experts", 0);
  c.first_k_dense_replace = in.Int("first_k_dense_replace", 0);
  c.moe_layer_freq = in.Int("moe_layer_freq", 1);
  c.intermediate_size = in.Int("intermediate_size", 0);  // Validate() requires it when a dense layer exists
  if (c.n_routed_experts > 0) {
    c.moe_intermediate_size = in.Int("moe_intermediate_size");
    c.n_shared_experts = in.Int("n_shared_experts", 0);
    c.num_experts_per_tok = in.Int("num_experts_per_tok");
    c.n_group = in.Int("n_group", 1, 1);
    c.topk_group = in.Int("topk_group", 1, 1);
    // Defaults are those of HF's DeepseekV3Config / DeepseekV2Config.
    const bool v3 = c.architecture == Architecture::kDeepseekV3;
    const std::string method = in.String("topk_method", std::string(v3 ? "noaux_tc" : "greedy"));
    if (method == "greedy")
      c.topk_method = TopkMethod::kGreedy;
    else if (method == "group_limited_greedy")
      c.topk_method = TopkMethod::kGroupLimitedGreedy;
    else if (method == "noaux_tc")
      c.topk_method = TopkMethod::kNoauxTc;
    else
      throw in.Error("topk_method", fmt::format("'{}' is not one of greedy, group_limited_greedy, noaux_tc", method));
    const std::string scoring = in.String("scoring_func", std::string(v3 ? "sigmoid" : "softmax"));
    const std::optional<ScoringFunc> func = ScoringFuncFromName(scoring);
    if (!func) throw in.Error("scoring_func", fmt::format("'{}' is not one of softmax, sigmoid, sqrtsoftplus", scoring));
    c.scoring_func = *func;
    c.routed_scaling_factor = in.Number("routed_scaling_factor", v3 ? 2.5 : 1.0);
    c.norm_topk_prob = in.Bool("norm_topk_prob", v3);
  }
  c.q_lora_rank = in.Int("q_lora_rank", 0);
  c.kv_lora_rank = in.Int("kv_lora_rank");
  c.qk_nope_head_dim = in.Int("qk_nope_head_dim");
  c.qk_rope_head_dim = in.Int("qk_rope_head_dim");
  c.v_head_dim = in.Int("v_head_dim");
  c.rope_theta = in.Number("rope_theta", 10000.0);
  c.rope_scaling = ParseRopeScaling(in);
  c.rms_norm_eps = in.Number("rms_norm_eps", 1e-6);
  c.max_position_embeddings = in.Int("max_position_embeddings", 4096, 1);
  c.num_nextn_predict_layers = in.Int("num_nextn_predict_layers", 0);
  c.bos_token_id = in.TokenId("bos_token_id", 0);
  c.eos_token_id = in.TokenId("eos_token_id", 1);
  c.tie_word_embeddings = in.Bool("tie_word_embeddings", false);
  c.quantization = ParseQuantization(in);
  Validate(c, in);
  return c;
}

ModelConfig LoadModelConfig(const std::filesystem::path& checkpoint_dir) {
  const std::filesystem::path path = checkpoint_dir / "config.json";
  if (!std::filesystem::is_regular_file(path)) {
    throw ModelError(fmt::format("{}: cannot open (is {} a checkpoint directory?)", path.string(), checkpoint_dir.string()));
  }
  return ParseModelConfig(ReadTextFile(path), path.string());
}

std::string_view ToString(QuantizedTensors tensors) {
  switch (tensors) {
    case QuantizedTensors::kRoutedExperts:
      return kRoutedExpertTensors;
    case QuantizedTensors::kExperts:
      return kAllExpertTensors;
    case QuantizedTensors::kLinear:
      return kLinearTensors;
  }
  return "?";
}

std::string QuantizationJson(const CheckpointQuantization& q) {
  json j{{"format", ToString(q.format)}, {"group_size", q.group_size}, {"tensors", ToString(q.tensors)}};
  if (q.embedding) j["embedding"] = true;
  return j.dump();
}

std::string ModelConfigJson(const ModelConfig& c) {
  json j = {
      {"architectures", {std::string(c.architecture_name())}},
      {"model_type", c.architecture == Architecture::kDeepseekV3 ? "deepseek_v3" : "deepseek_v2"},
      {"hidden_size", c.hidden_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"first_k_dense_replace", c.first_k_dense_replace},
      {"moe_layer_freq", c.moe_layer_freq},
      {"intermediate_size", c.intermediate_size},
      {"moe_intermediate_size", c.moe_intermediate_size},
      {"n_routed_experts", c.n_routed_experts},
      {"n_shared_experts", c.n_shared_experts},
      {"num_experts_per_tok", c.num_experts_per_tok},
      {"n_group", c.n_group},
      {"topk_group", c.topk_group},
      {"topk_method", c.topk_method == TopkMethod::kNoauxTc              ? "noaux_tc"
                      : c.topk_method == TopkMethod::kGroupLimitedGreedy ? "group_limited_greedy"
                                                                         : "greedy"},
      {"scoring_func", ToString(c.scoring_func)},
      {"routed_scaling_factor", c.routed_scaling_factor},
      {"norm_topk_prob", c.norm_topk_prob},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_attention_heads},
      {"q_lora_rank", c.q_lora_rank > 0 ? json(c.q_lora_rank) : json(nullptr)},
      {"kv_lora_rank", c.kv_lora_rank},
      {"qk_nope_head_dim", c.qk_nope_head_dim},
      {"qk_rope_head_dim", c.qk_rope_head_dim},
      {"v_head_dim", c.v_head_dim},
      {"rope_theta", c.rope_theta},
      {"rms_norm_eps", c.rms_norm_eps},
      {"max_position_embeddings", c.max_position_embeddings},
      {"num_nextn_predict_layers", c.num_nextn_predict_layers},
      {"vocab_size", c.vocab_size},
      {"bos_token_id", c.bos_token_id},
      {"eos_token_id", c.eos_token_id},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"hidden_act", "silu"},
      {"torch_dtype", "bfloat16"},
  };
  if (c.rope_scaling) {
    j["rope_scaling"] = {{"type", "yarn"},
                         {"factor", c.rope_scaling->factor},
                         {"original_max_position_embeddings", c.rope_scaling->original_max_position_embeddings},
                         {"beta_fast", c.rope_scaling->beta_fast},
                         {"beta_slow", c.rope_scaling->beta_slow},
                         {"mscale", c.rope_scaling->mscale},
                         {"mscale_all_dim", c.rope_scaling->mscale_all_dim}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  if (c.quantization) j["tandem_quantization"] = json::parse(QuantizationJson(*c.quantization));
  return j.dump(2) + "\n";
}

}  // namespace tandem::rt
