#include "runtime/model/v41_config.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/model/config_reader.hpp"
#include "runtime/model/engram_layout.hpp"
#include "runtime/model/json_bounds.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/text_file.hpp"

namespace tandem::rt {

namespace {

using nlohmann::json;

constexpr std::string_view kArchitecture = "DeepseekV41ForCausalLM";

// FP8 weights carry one scale per 32×32 block, FP4 experts one per 32 inputs.
constexpr int kBlock = 32;

std::vector<int> Ints(const std::vector<std::int64_t>& v) { return {v.begin(), v.end()}; }

ScoringFunc ParseScoreFunc(const ConfigReader& in) {
  const std::string name = in.String("score_func", std::string("sqrtsoftplus"));
  if (const std::optional<ScoringFunc> f = ScoringFuncFromName(name)) return *f;
  throw in.Error("score_func", fmt::format("'{}' is not sqrtsoftplus, sigmoid or softmax", name));
}

// The latest element of the sorted `layers` at or before `layer`; -1 when none.
int LatestAtOrBefore(const std::vector<int>& layers, int layer) {
  int latest = -1;
  for (int l : layers) {
    if (l <= layer) latest = l;
  }
  return latest;
}

void Validate(const V41Config& c, const ConfigReader& in) {
  auto need = [&](bool ok, std::string_view key, const std::string& why) {
    if (!ok) throw in.Error(key, why);
  };
  auto multiple = [&](int value, std::string_view key) {
    need(value > 0 && value % kBlock == 0, key,
         fmt::format("must be a positive multiple of {} (the FP8 and FP4 blocks), got {}", kBlock, value));
  };
  need(c.n_layers > 0, "n_layers", "must be positive");
  need(c.vocab_size > 0, "vocab_size", "must be positive");
  need(c.n_heads > 0, "n_heads", "must be positive");
  multiple(c.dim, "dim");
  multiple(c.moe_inter_dim, "moe_inter_dim");
  multiple(c.q_lora_rank, "q_lora_rank");
  multiple(c.head_dim, "head_dim");
  multiple(c.o_lora_rank, "o_lora_rank");
  need(c.rope_head_dim > 0 && c.rope_head_dim % 2 == 0 && c.rope_head_dim <= c.head_dim, "rope_head_dim",
       fmt::format("must be positive, even and at most head_dim {}, got {}", c.head_dim, c.rope_head_dim));
  need(c.o_groups > 0 && c.n_heads % c.o_groups == 0, "o_groups", fmt::format("must divide n_heads {}, got {}", c.n_heads, c.o_groups));
  multiple(c.n_heads / c.o_groups * c.head_dim, "o_groups");
  need(c.n_routed_experts > 0, "n_routed_experts", "must be positive");
  need(c.n_activated_experts > 0 && c.n_activated_experts <= c.n_routed_experts, "n_activated_experts",
       fmt::format("must be in [1, n_routed_experts {}], got {}", c.n_routed_experts, c.n_activated_experts));
  need(c.n_shared_experts == 1, "n_shared_experts", fmt::format("must be 1 (as the reference asserts), got {}", c.n_shared_experts));
  need(c.window_size > 0, "window_size", "must be positive");
  need(c.norm_eps > 0, "norm_eps", "must be positive");
  need(c.hc_mult > 0, "hc_mult", "must be positive");
  need(c.hc_sinkhorn_iters > 0, "hc_sinkhorn_iters", "must be positive");
  need(c.gate_temp > 0, "gate_temp", "must be positive");
  need(c.swiglu_limit >= 0, "swiglu_limit", "must not be negative");
  need(c.rope_theta > 0, "rope_theta", "must be positive");
  need(c.compress_rope_theta > 0, "compress_rope_theta", "must be positive");
  need(c.rope_factor > 0, "rope_factor", "must be positive");

  // Ratios: one per layer, the DSpark stages' included (window-only).
  const int all_layers = c.n_layers + c.n_mtp_layers;
  need(static_cast<int>(c.compress_ratios.size()) == all_layers, "compress_ratios",
       fmt::format("has {} entries; one per layer is needed: n_layers {} + n_mtp_layers {} = {}", c.compress_ratios.size(), c.n_layers,
                   c.n_mtp_layers, all_layers));
  for (int l = 0; l < all_layers; ++l) {
    const int r = c.compress_ratios[static_cast<std::size_t>(l)];
    need(r == 0 || r == 1 || r == 2, "compress_ratios", fmt::format("entry {} is {}; a ratio is 0, 1 or 2", l, r));
    need(l < c.n_layers || r == 0, "compress_ratios",
         fmt::format("entry {} (a DSpark stage) is {}; DSpark stages are window-only (0)", l, r));
  }
  auto layer_list = [&](const std::vector<int>& list, std::string_view key) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      need(list[i] >= 0 && list[i] < c.n_layers, key, fmt::format("names layer {}, not in [0, n_layers {})", list[i], c.n_layers));
      need(i == 0 || list[i] > list[i - 1], key, fmt::format("must be ascending without repeats, got {}", fmt::join(list, ", ")));
    }
  };
  layer_list(c.kv_source_layers, "kv_source_layers");
  layer_list(c.index_source_layers, "index_source_layers");
  for (int l : c.kv_source_layers) {
    need(c.compress_ratios[static_cast<std::size_t>(l)] > 0, "kv_source_layers",
         fmt::format("names layer {}, whose compress ratio is 0 (a source compresses)", l));
    need(std::binary_search(c.index_source_layers.begin(), c.index_source_layers.end(), l), "kv_source_layers",
         fmt::format("names layer {}, which is not in index_source_layers (every KV source indexes)", l));
  }
  for (int l : c.index_source_layers) {
    need(c.compress_ratios[static_cast<std::size_t>(l)] > 0, "index_source_layers",
         fmt::format("names layer {}, whose compress ratio is 0 (nothing to index)", l));
  }
  const bool candidates = c.candidate_source_layer >= 0;
  if (candidates) {
    need(std::binary_search(c.kv_source_layers.begin(), c.kv_source_layers.end(), c.candidate_source_layer), "candidate_source_layer",
         fmt::format("is layer {}, which is not in kv_source_layers", c.candidate_source_layer));
    need(c.candidate_topk_blocks > 0, "candidate_topk_blocks", "must be positive with a candidate source");
    need(c.candidate_block_size > 0, "candidate_block_size", "must be positive with a candidate source");
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const int r = c.compress_ratios[static_cast<std::size_t>(l)];
    if (r == 0) continue;
    const int source = LatestAtOrBefore(c.kv_source_layers, l);
    need(source >= 0, "kv_source_layers",
         fmt::format("has no layer at or before layer {} (ratio {}), whose compressed KV comes from one", l, r));
    need(c.compress_ratios[static_cast<std::size_t>(source)] == r, "compress_ratios",
         fmt::format("layer {} has ratio {} but reads the compressed KV of layer {}, of ratio {}", l, r, source,
                     c.compress_ratios[static_cast<std::size_t>(source)]));
    const bool indexes = std::binary_search(c.index_source_layers.begin(), c.index_source_layers.end(), l);
    const bool kv = std::binary_search(c.kv_source_layers.begin(), c.kv_source_layers.end(), l);
    if (indexes && !kv) {
      need(candidates && c.candidate_source_layer < l, "index_source_layers",
           fmt::format("names layer {}, which is not a KV source: it needs a candidate_source_layer before it", l));
    }
  }
  if (!c.index_source_layers.empty() || !c.kv_source_layers.empty()) {
    need(c.index_n_heads > 0, "index_n_heads", "must be positive with index sources");
    multiple(c.index_head_dim, "index_head_dim");
    need(c.rope_head_dim <= c.index_head_dim, "index_head_dim", fmt::format("must be at least rope_head_dim {}", c.rope_head_dim));
    need(c.index_topk > 0, "index_topk", "must be positive with index sources");
  }

  // Engram.
  layer_list(c.engram_layer_ids, "engram_layer_ids");
  need(c.engram_num_embeddings.size() == c.engram_layer_ids.size(), "engram_num_embeddings",
       fmt::format("has {} entries for {} engram_layer_ids", c.engram_num_embeddings.size(), c.engram_layer_ids.size()));
  if (!c.engram_layer_ids.empty()) {
    need(c.engram_max_ngram_size >= 2, "engram_max_ngram_size", "must be at least 2 (n-grams of 2 and more tokens)");
    need(c.engram_n_heads > 0, "engram_n_heads", "must be positive with Engram layers");
    multiple(c.engram_head_dim, "engram_head_dim");
    need(c.engram_vocab_size > 0, "engram_vocab_size", "must be positive with Engram layers");
    need(c.engram_compressed_vocab_size > 0, "engram_compressed_vocab_size", "must be positive with Engram layers");
    need(c.engram_pad_id >= 0 && c.engram_pad_id < c.vocab_size, "engram_pad_id", "must be a token id");
    need(c.engram_vocab_size < (std::int64_t{1} << 40), "engram_vocab_size", "must be below 2^40");
    // The table sizes follow from the prime layout; a mismatch would index outside a table.
    const std::vector<EngramLayerLayout> layout = EngramLayout(c);
    for (std::size_t i = 0; i < layout.size(); ++i) {
      need(c.engram_num_embeddings[i] == layout[i].rows, "engram_num_embeddings",
           fmt::format("entry {} (layer {}) is {}; engram_vocab_size {}, engram_n_heads {} and engram_max_ngram_size {} give {} rows", i,
                       layout[i].layer, c.engram_num_embeddings[i], c.engram_vocab_size, c.engram_n_heads, c.engram_max_ngram_size,
                       layout[i].rows));
    }
  }

  // DSpark.
  if (c.dspark_block_size > 0) {
    need(c.n_mtp_layers > 0, "n_mtp_layers", "must be positive with DSpark (dspark_block_size > 0)");
    need(!c.dspark_target_layer_ids.empty(), "dspark_target_layer_ids", "must name the layers DSpark reads");
    layer_list(c.dspark_target_layer_ids, "dspark_target_layer_ids");
    need(c.dspark_noise_token_id >= 0 && c.dspark_noise_token_id < c.vocab_size, "dspark_noise_token_id", "must be a token id");
    need(c.dspark_markov_rank > 0, "dspark_markov_rank", "must be positive with DSpark");
    need(c.dspark_activated() <= c.dspark_experts(), "dspark_n_activated_experts",
         fmt::format("must be at most DSpark's {} experts, got {}", c.dspark_experts(), c.dspark_activated()));
  }
  need(c.bos_token_id < c.vocab_size, "bos_token_id", "must be below vocab_size");
  need(c.eos_token_id < c.vocab_size, "eos_token_id", "must be below vocab_size");
}

}  // namespace

const char* ToString(V41Block block) {
  switch (block) {
    case V41Block::kSlidingWindow:
      return "window";
    case V41Block::kKvIndexSource:
      return "kv+index source";
    case V41Block::kCandidateSource:
      return "candidate source";
    case V41Block::kCandidateIndexSource:
      return "candidate index source";
    case V41Block::kConsumerRatio2:
      return "consumer, ratio 2";
    case V41Block::kConsumerRatio1:
      return "consumer, ratio 1";
  }
  return "?";
}

V41Block V41Config::Block(int layer) const {
  const int r = compress_ratios.at(static_cast<std::size_t>(layer));
  if (r == 0) return V41Block::kSlidingWindow;
  if (layer == candidate_source_layer) return V41Block::kCandidateSource;
  if (std::binary_search(kv_source_layers.begin(), kv_source_layers.end(), layer)) return V41Block::kKvIndexSource;
  if (std::binary_search(index_source_layers.begin(), index_source_layers.end(), layer)) return V41Block::kCandidateIndexSource;
  return r == 2 ? V41Block::kConsumerRatio2 : V41Block::kConsumerRatio1;
}

bool V41Config::IsEngramLayer(int layer) const { return std::binary_search(engram_layer_ids.begin(), engram_layer_ids.end(), layer); }

int V41Config::KvSourceOf(int layer) const { return LatestAtOrBefore(kv_source_layers, layer); }

V41Config ParseV41Config(std::string_view json_text, std::string_view source) {
  // A configuration: a few levels (text_config, lists), a few hundred keys and entries.
  if (FindJsonExcess(json_text, JsonBounds{.max_depth = 8, .max_object_members = 4096, .max_array_elements = 4096})) {
    throw ModelError(fmt::format("{}: nested or sized beyond limits (8 levels, 4096 keys or elements)", source));
  }
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {
    throw ModelError(fmt::format("{}: not valid JSON: {}", source, e.what()));
  }
  if (!doc.is_object()) throw ModelError(fmt::format("{}: must be a JSON object", source));
  std::string where(source);
  if (const auto text = doc.find("text_config"); text != doc.end()) {
    if (!text->is_object()) throw ModelError(fmt::format("{}: 'text_config' must be an object", source));
    const json outer = std::move(doc);
    doc = outer["text_config"];
    where += " text_config";
  }
  const ConfigReader in(doc, where);
  constexpr int kMax = 1'000'000'000;
  V41Config c;
  c.vocab_size = in.Int("vocab_size");
  c.dim = in.Int("dim");
  c.moe_inter_dim = in.Int("moe_inter_dim");
  c.n_layers = in.Int("n_layers");
  c.n_mtp_layers = in.Int("n_mtp_layers", 0);
  c.n_heads = in.Int("n_heads");
  c.n_routed_experts = in.Int("n_routed_experts");
  c.n_shared_experts = in.Int("n_shared_experts", 1);
  c.n_activated_experts = in.Int("n_activated_experts");
  c.score_func = ParseScoreFunc(in);
  c.gate_temp = in.Number("gate_temp", 1.0);
  c.norm_topk_prob = in.Bool("norm_topk_prob", true);
  c.route_scale = in.Number("route_scale", 1.0);
  c.swiglu_limit = in.Number("swiglu_limit", 0.0);
  c.q_lora_rank = in.Int("q_lora_rank");
  c.head_dim = in.Int("head_dim");
  c.rope_head_dim = in.Int("rope_head_dim");
  c.norm_eps = in.Number("norm_eps", 1e-20);
  c.o_groups = in.Int("o_groups");
  c.o_lora_rank = in.Int("o_lora_rank");
  c.window_size = in.Int("window_size");
  c.compress_ratios = Ints(in.IntList("compress_ratios", std::nullopt, 0, 1024));
  c.kv_source_layers = Ints(in.IntList("kv_source_layers", std::vector<std::int64_t>{}, 0, kMax));
  c.index_source_layers = Ints(in.IntList("index_source_layers", std::vector<std::int64_t>{}, 0, kMax));
  c.compress_rope_theta = in.Number("compress_rope_theta", 40000.0);
  c.original_seq_len = in.Int("original_seq_len", 0);
  c.rope_theta = in.Number("rope_theta", 10000.0);
  c.rope_factor = in.Number("rope_factor", 40.0);
  c.beta_fast = in.Number("beta_fast", 32.0);
  c.beta_slow = in.Number("beta_slow", 1.0);
  c.index_n_heads = in.Int("index_n_heads", 0);
  c.index_head_dim = in.Int("index_head_dim", 0);
  c.index_topk = in.Int("index_topk", 0);
  const json* candidate = in.Find("candidate_source_layer");
  if (candidate != nullptr && !(candidate->is_number_integer() && candidate->get<std::int64_t>() == -1)) {
    c.candidate_source_layer = in.Int("candidate_source_layer");
  }
  c.candidate_topk_blocks = in.Int("candidate_topk_blocks", 0);
  c.candidate_block_size = in.Int("candidate_block_size", 0);
  c.hc_mult = in.Int("hc_mult", 1);
  c.hc_sinkhorn_iters = in.Int("hc_sinkhorn_iters", 1);
  c.hc_eps = in.Number("hc_eps", 1e-6);
  c.engram_layer_ids = Ints(in.IntList("engram_layer_ids", std::vector<std::int64_t>{}, 0, kMax));
  c.engram_num_embeddings = in.IntList("engram_num_embeddings", std::vector<std::int64_t>{}, 1, std::int64_t{1} << 40);
  c.engram_max_ngram_size = in.Int("engram_max_ngram_size", 1);
  const json* engram_vocab = in.Find("engram_vocab_size");
  if (engram_vocab != nullptr) {
    if (!engram_vocab->is_number_integer() || engram_vocab->get<std::int64_t>() < 0)
      throw in.Error("engram_vocab_size", fmt::format("must be a non-negative integer, got {}", engram_vocab->dump()));
    c.engram_vocab_size = engram_vocab->get<std::int64_t>();
  }
  c.engram_n_heads = in.Int("engram_n_heads", 0);
  c.engram_head_dim = in.Int("engram_head_dim", 0);
  c.engram_pad_id = in.Int("engram_pad_id", 2);
  c.engram_compressed_vocab_size = in.Int("engram_compressed_vocab_size", 0);
  c.dspark_block_size = in.Int("dspark_block_size", 0);
  c.dspark_noise_token_id = in.Int("dspark_noise_token_id", 0);
  c.dspark_target_layer_ids = Ints(in.IntList("dspark_target_layer_ids", std::vector<std::int64_t>{}, 0, kMax));
  c.dspark_markov_rank = in.Int("dspark_markov_rank", 256);
  c.dspark_n_routed_experts = in.Int("dspark_n_routed_experts", 0);
  c.dspark_n_activated_experts = in.Int("dspark_n_activated_experts", 0);
  c.bos_token_id = in.TokenId("bos_token_id", 0);
  c.eos_token_id = in.TokenId("eos_token_id", 1);
  c.max_position_embeddings = in.Int("max_position_embeddings", 1 << 20, 1);
  Validate(c, in);
  return c;
}

ModelConfig V41MoeConfig(const V41Config& c, bool dspark) {
  ModelConfig m;
  m.architecture = Architecture::kDeepseekV3;  // normalised, then scaled
  m.hidden_size = c.dim;
  m.num_hidden_layers = c.n_layers;
  m.moe_intermediate_size = c.moe_inter_dim;
  m.n_routed_experts = dspark ? c.dspark_experts() : c.n_routed_experts;
  m.num_experts_per_tok = dspark ? c.dspark_activated() : c.n_activated_experts;
  m.n_shared_experts = c.n_shared_experts;
  m.n_group = 1;
  m.topk_group = 1;
  m.topk_method = TopkMethod::kNoauxTc;
  m.scoring_func = c.score_func;
  m.routed_scaling_factor = c.route_scale;
  m.norm_topk_prob = c.norm_topk_prob;
  m.vocab_size = c.vocab_size;
  return m;
}

std::string V41ConfigJson(const V41Config& c) {
  json j = {{"vocab_size", c.vocab_size},
            {"dim", c.dim},
            {"moe_inter_dim", c.moe_inter_dim},
            {"n_layers", c.n_layers},
            {"n_mtp_layers", c.n_mtp_layers},
            {"n_heads", c.n_heads},
            {"n_routed_experts", c.n_routed_experts},
            {"n_shared_experts", c.n_shared_experts},
            {"n_activated_experts", c.n_activated_experts},
            {"score_func", ToString(c.score_func)},
            {"gate_temp", c.gate_temp},
            {"norm_topk_prob", c.norm_topk_prob},
            {"route_scale", c.route_scale},
            {"swiglu_limit", c.swiglu_limit},
            {"q_lora_rank", c.q_lora_rank},
            {"head_dim", c.head_dim},
            {"rope_head_dim", c.rope_head_dim},
            {"norm_eps", c.norm_eps},
            {"o_groups", c.o_groups},
            {"o_lora_rank", c.o_lora_rank},
            {"window_size", c.window_size},
            {"compress_ratios", c.compress_ratios},
            {"kv_source_layers", c.kv_source_layers},
            {"index_source_layers", c.index_source_layers},
            {"compress_rope_theta", c.compress_rope_theta},
            {"original_seq_len", c.original_seq_len},
            {"rope_theta", c.rope_theta},
            {"rope_factor", c.rope_factor},
            {"beta_fast", c.beta_fast},
            {"beta_slow", c.beta_slow},
            {"index_n_heads", c.index_n_heads},
            {"index_head_dim", c.index_head_dim},
            {"index_topk", c.index_topk},
            {"candidate_source_layer", c.candidate_source_layer},
            {"candidate_topk_blocks", c.candidate_topk_blocks},
            {"candidate_block_size", c.candidate_block_size},
            {"hc_mult", c.hc_mult},
            {"hc_sinkhorn_iters", c.hc_sinkhorn_iters},
            {"hc_eps", c.hc_eps},
            {"engram_layer_ids", c.engram_layer_ids},
            {"engram_num_embeddings", c.engram_num_embeddings},
            {"engram_max_ngram_size", c.engram_max_ngram_size},
            {"engram_vocab_size", c.engram_vocab_size},
            {"engram_n_heads", c.engram_n_heads},
            {"engram_head_dim", c.engram_head_dim},
            {"engram_pad_id", c.engram_pad_id},
            {"engram_compressed_vocab_size", c.engram_compressed_vocab_size},
            {"dspark_block_size", c.dspark_block_size},
            {"dspark_noise_token_id", c.dspark_noise_token_id},
            {"dspark_target_layer_ids", c.dspark_target_layer_ids},
            {"dspark_markov_rank", c.dspark_markov_rank},
            {"dspark_n_routed_experts", c.dspark_n_routed_experts},
            {"dspark_n_activated_experts", c.dspark_n_activated_experts},
            {"bos_token_id", c.bos_token_id},
            {"eos_token_id", c.eos_token_id},
            {"max_position_embeddings", c.max_position_embeddings},
            {"dtype", "fp8"},
            {"expert_dtype", "fp4"}};
  return j.dump(1);
}

bool IsV41Checkpoint(const std::filesystem::path& dir) {
  try {
    const std::string text = ReadTextFile(dir / "config.json");
    if (FindJsonExcess(text, JsonBounds{.max_depth = 8, .max_object_members = 4096, .max_array_elements = 4096}))
      return false;  // the V3 loader says why
    const json doc = json::parse(text);
    const auto archs = doc.find("architectures");
    return archs != doc.end() && archs->is_array() && !archs->empty() && (*archs)[0] == kArchitecture;
  } catch (const std::exception&) {
    return false;  // not readable as a V4.1 config: the V3 loader says why
  }
}

V41Config LoadV41Config(const std::filesystem::path& dir) {
  const auto official = dir / "inference" / "config.json";
  if (std::filesystem::exists(official)) return ParseV41Config(ReadTextFile(official), official.string());
  const auto config = dir / "config.json";
  return ParseV41Config(ReadTextFile(config), config.string());
}

}  // namespace tandem::rt
