// DeepSeek V4.1's configuration: the reference's ModelArgs keys, the block type each
// layer's lists give it, and a refusal naming the key for every inconsistency.
#include "runtime/model/v41_config.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/engine/router.hpp"
#include "runtime/model/engram_layout.hpp"
#include "runtime/model/model_error.hpp"
#include "tests/runtime/eval_run.hpp"
#include "tests/runtime/tiny_model.hpp"
#include "tests/support/run_command.hpp"

namespace tandem::rt {
namespace {

using nlohmann::json;

// DeepSeek-V4.1-Flash's inference/config.json values (vision keys left out).
json FlashArgs() {
  std::vector<int> ratios = {0, 0};
  for (int i = 0; i < 18; ++i) ratios.push_back(2);
  for (int i = 0; i < 20; ++i) ratios.push_back(1);
  for (int i = 0; i < 3; ++i) ratios.push_back(0);
  return {{"vocab_size", 129280},
          {"dim", 5120},
          {"moe_inter_dim", 2304},
          {"n_layers", 40},
          {"n_mtp_layers", 3},
          {"n_heads", 64},
          {"n_routed_experts", 384},
          {"n_shared_experts", 1},
          {"n_activated_experts", 6},
          {"score_func", "sqrtsoftplus"},
          {"route_scale", 1.5},
          {"swiglu_limit", 10.0},
          {"q_lora_rank", 1280},
          {"head_dim", 512},
          {"rope_head_dim", 64},
          {"norm_eps", 1e-20},
          {"o_groups", 8},
          {"o_lora_rank", 1024},
          {"window_size", 128},
          {"kv_source_layers", {2, 8, 14, 20}},
          {"index_source_layers", {2, 8, 14, 20, 24, 28, 32, 36}},
          {"original_seq_len", 65536},
          {"rope_theta", 10000},
          {"rope_factor", 16},
          {"beta_fast", 32},
          {"beta_slow", 1},
          {"index_n_heads", 32},
          {"index_head_dim", 128},
          {"index_topk", 512},
          {"candidate_source_layer", 20},
          {"candidate_topk_blocks", 2048},
          {"candidate_block_size", 8},
          {"hc_mult", 4},
          {"hc_sinkhorn_iters", 20},
          {"hc_eps", 1e-6},
          {"engram_layer_ids", {1, 14}},
          {"engram_vocab_size", 16000000},
          {"engram_num_embeddings", {384006168, 384016682}},
          {"engram_max_ngram_size", 4},
          {"engram_pad_id", 2},
          {"engram_compressed_vocab_size", 99092},
          {"dtype", "fp8"},
          {"expert_dtype", "fp4"},
          {"compress_rope_theta", 160000},
          {"compress_ratios", ratios},
          {"engram_n_heads", 8},
          {"engram_head_dim", 256},
          {"dspark_block_size", 5},
          {"dspark_noise_token_id", 128799},
          {"dspark_target_layer_ids", {37, 38, 39}},
          {"dspark_markov_rank", 256},
          {"dspark_n_routed_experts", 128},
          {"dspark_n_activated_experts", 3}};
}

// The reference's small test model: one layer of each block type and one DSpark stage.
json SmallArgs() {
  return {{"vocab_size", 512},
          {"dim", 256},
          {"moe_inter_dim", 128},
          {"n_layers", 6},
          {"n_mtp_layers", 1},
          {"n_heads", 4},
          {"n_routed_experts", 4},
          {"n_activated_experts", 2},
          {"route_scale", 1.5},
          {"swiglu_limit", 10.0},
          {"q_lora_rank", 64},
          {"head_dim", 64},
          {"rope_head_dim", 16},
          {"o_groups", 2},
          {"o_lora_rank", 64},
          {"window_size", 16},
          {"compress_ratios", {0, 2, 2, 1, 1, 1, 0}},
          {"kv_source_layers", {1, 3}},
          {"index_source_layers", {1, 3, 5}},
          {"compress_rope_theta", 160000.0},
          {"original_seq_len", 32},
          {"rope_factor", 4},
          {"index_n_heads", 4},
          {"index_head_dim", 64},
          {"index_topk", 8},
          {"candidate_source_layer", 3},
          {"candidate_topk_blocks", 3},
          {"candidate_block_size", 4},
          {"hc_mult", 4},
          {"hc_sinkhorn_iters", 20},
          {"engram_layer_ids", {0, 1}},
          {"engram_num_embeddings", {660, 864}},
          {"engram_max_ngram_size", 4},
          {"engram_vocab_size", 100},
          {"engram_n_heads", 2},
          {"engram_head_dim", 32},
          {"engram_compressed_vocab_size", 256},
          {"dspark_block_size", 2},
          {"dspark_noise_token_id", 511},
          {"dspark_target_layer_ids", {4, 5}},
          {"dspark_markov_rank", 32}};
}

std::vector<V41Block> Schedule(const V41Config& c) {
  std::vector<V41Block> blocks;
  for (int l = 0; l < c.n_layers; ++l) blocks.push_back(c.Block(l));
  return blocks;
}

// Why `args` is refused, or "" when it is not.
std::string Refusal(const json& args) {
  try {
    ParseV41Config(args.dump(), "config.json");
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

TEST(V41Config, FlashHasItsPublishedSchedule) {
  const V41Config c = ParseV41Config(FlashArgs().dump(), "inference/config.json");
  EXPECT_EQ(c.dim, 5120);
  EXPECT_EQ(c.compress_ratios.size(), 43u);
  EXPECT_EQ(c.score_func, ScoringFunc::kSqrtSoftplus);
  std::vector<V41Block> expected;
  for (int l = 0; l < 40; ++l) {
    V41Block b = l < 2 ? V41Block::kSlidingWindow : l < 20 ? V41Block::kConsumerRatio2 : V41Block::kConsumerRatio1;
    if (l == 2 || l == 8 || l == 14) b = V41Block::kKvIndexSource;
    if (l == 20) b = V41Block::kCandidateSource;
    if (l == 24 || l == 28 || l == 32 || l == 36) b = V41Block::kCandidateIndexSource;
    expected.push_back(b);
  }
  EXPECT_EQ(Schedule(c), expected);
  EXPECT_EQ(c.KvSourceOf(19), 14);
  EXPECT_EQ(c.KvSourceOf(39), 20);
  EXPECT_TRUE(c.IsEngramLayer(14));
  EXPECT_FALSE(c.IsEngramLayer(2));
}

TEST(V41Config, TheSmallTestModelHasOneLayerOfEachBlockType) {
  const V41Config c = ParseV41Config(SmallArgs().dump(), "config.json");
  EXPECT_EQ(Schedule(c), (std::vector<V41Block>{V41Block::kSlidingWindow, V41Block::kKvIndexSource, V41Block::kConsumerRatio2,
                                                V41Block::kCandidateSource, V41Block::kConsumerRatio1, V41Block::kCandidateIndexSource}));
  EXPECT_EQ(c.candidate_source_layer, 3);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_TRUE(c.norm_topk_prob);
}

// The prime layout reproduces the table sizes DeepSeek published for Flash (a config
// whose sizes differ is refused), and the reference's small model's primes.
TEST(V41Config, EngramTablesFollowThePrimeLayout) {
  const std::vector<EngramLayerLayout> flash = EngramLayout(ParseV41Config(FlashArgs().dump(), "config.json"));
  ASSERT_EQ(flash.size(), 2u);
  EXPECT_EQ(flash[0].rows, 384006168);
  EXPECT_EQ(flash[1].rows, 384016682);
  EXPECT_EQ(std::vector<std::int64_t>(flash[0].primes.begin(), flash[0].primes.begin() + 9),
            (std::vector<std::int64_t>{16000057, 16000079, 16000081, 16000097, 16000121, 16000129, 16000133, 16000183, 16000189}));
  EXPECT_EQ(flash[1].primes.front(), 16000477);
  EXPECT_EQ(flash[0].offsets[1], 16000057);
  EXPECT_EQ(flash[1].offsets.back(), 368015793);
  const std::vector<EngramLayerLayout> small = EngramLayout(ParseV41Config(SmallArgs().dump(), "config.json"));
  EXPECT_EQ(small[0].primes, (std::vector<std::int64_t>{101, 103, 107, 109, 113, 127}));
  EXPECT_EQ(small[1].primes, (std::vector<std::int64_t>{131, 137, 139, 149, 151, 157}));
  EXPECT_EQ(small[1].offsets, (std::vector<std::int64_t>{0, 131, 268, 407, 556, 707}));
}

TEST(V41Config, TheArgsMayBeNestedUnderTextConfig) {
  const json doc = {{"architectures", {"DeepseekV41ForCausalLM"}}, {"model_type", "deepseek_v41"}, {"text_config", SmallArgs()}};
  EXPECT_EQ(ParseV41Config(doc.dump(), "config.json").n_layers, 6);
  json broken = doc;
  broken["text_config"].erase("dim");
  EXPECT_EQ(Refusal(broken), "config.json text_config: 'dim' is missing");
}

TEST(V41Config, EveryInconsistencyIsRefusedNamingTheKey) {
  struct Case {
    const char* key;
    json value;
    std::string refusal;
  };
  const std::vector<Case> cases = {
      {"compress_ratios",
       {0, 2, 2, 1, 1, 1},
       "config.json: 'compress_ratios' has 6 entries; one per layer is needed: n_layers 6 + n_mtp_layers 1 = 7"},
      {"compress_ratios",
       {0, 2, 2, 1, 1, 1, 2},
       "config.json: 'compress_ratios' entry 6 (a DSpark stage) is 2; DSpark stages are window-only (0)"},
      {"compress_ratios", {0, 2, 2, 1, 1, 3, 0}, "config.json: 'compress_ratios' entry 5 is 3; a ratio is 0, 1 or 2"},
      {"compress_ratios",
       {0, 2, 1, 1, 1, 1, 0},
       "config.json: 'compress_ratios' layer 2 has ratio 1 but reads the compressed KV of layer 1, of ratio 2"},
      {"kv_source_layers",
       {1, 4},
       "config.json: 'kv_source_layers' names layer 4, which is not in index_source_layers (every KV source indexes)"},
      {"kv_source_layers", {3, 1}, "config.json: 'kv_source_layers' must be ascending without repeats, got 3, 1"},
      {"kv_source_layers", {1, 9}, "config.json: 'kv_source_layers' names layer 9, not in [0, n_layers 6)"},
      {"kv_source_layers",
       {3},
       "config.json: 'kv_source_layers' has no layer at or before layer 1 (ratio 2), whose compressed KV comes from one"},
      {"index_source_layers",
       {0, 1, 3, 5},
       "config.json: 'index_source_layers' names layer 0, whose compress ratio is 0 (nothing to index)"},
      {"candidate_source_layer", 1, ""},  // a KV source: allowed (then layer 5's candidates come from layer 1)
      {"candidate_source_layer", 2, "config.json: 'candidate_source_layer' is layer 2, which is not in kv_source_layers"},
      {"candidate_source_layer", -1,
       "config.json: 'index_source_layers' names layer 5, which is not a KV source: it needs a candidate_source_layer before it"},
      {"dim", 250, "config.json: 'dim' must be a positive multiple of 32 (the FP8 and FP4 blocks), got 250"},
      {"o_groups", 3, "config.json: 'o_groups' must divide n_heads 4, got 3"},
      {"rope_head_dim", 15, "config.json: 'rope_head_dim' must be positive, even and at most head_dim 64, got 15"},
      {"n_activated_experts", 5, "config.json: 'n_activated_experts' must be in [1, n_routed_experts 4], got 5"},
      {"n_shared_experts", 2, "config.json: 'n_shared_experts' must be 1 (as the reference asserts), got 2"},
      {"engram_num_embeddings", {660}, "config.json: 'engram_num_embeddings' has 1 entries for 2 engram_layer_ids"},
      {"engram_num_embeddings",
       {660, 865},
       "config.json: 'engram_num_embeddings' entry 1 (layer 1) is 865; engram_vocab_size 100, engram_n_heads 2 and "
       "engram_max_ngram_size 4 give 864 rows"},
      {"engram_head_dim", 48, "config.json: 'engram_head_dim' must be a positive multiple of 32 (the FP8 and FP4 blocks), got 48"},
      {"dspark_target_layer_ids", {4, 7}, "config.json: 'dspark_target_layer_ids' names layer 7, not in [0, n_layers 6)"},
      {"dspark_noise_token_id", 512, "config.json: 'dspark_noise_token_id' must be a token id"},
      {"score_func", "relu", "config.json: 'score_func' 'relu' is not sqrtsoftplus, sigmoid or softmax"},
      {"window_size", "16", "config.json: 'window_size' must be an integer, got \"16\""},
  };
  for (const Case& c : cases) {
    json args = SmallArgs();
    args[c.key] = c.value;
    EXPECT_EQ(Refusal(args), c.refusal) << c.key << " = " << c.value.dump();
  }
  EXPECT_EQ(Refusal(json::array()), "config.json: must be a JSON object");
  EXPECT_NE(Refusal(json("{")).find("config.json: must be a JSON object"), std::string::npos);
}

TEST(V41Config, InspectDescribesEveryLayerAndEvalNamesTheMissingWeights) {
  const auto dir = testing::TempDir("v41-config");
  testing::WriteFile(
      dir / "config.json",
      json{{"architectures", {"DeepseekV41ForCausalLM"}}, {"model_type", "deepseek_v41"}, {"text_config", SmallArgs()}}.dump());
  const auto inspect = testing::RunCommand(TANDEM_RT_BIN, {"inspect", dir.string()});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  for (const char* line : {"    1  kv+index source             2           layer 1  θ 160000, YaRN ×4          yes",
                           "    5  candidate index source      1           layer 3  θ 160000, YaRN ×4",
                           "DSpark        1 stages (mtp.0–0), block 2, reads layers 4, 5, 4 experts top 2"}) {
    EXPECT_NE(inspect.out.find(line), std::string::npos) << line << "\n" << inspect.out;
  }
  // The official layout's inference/config.json is what the reference reads: it wins.
  json official = SmallArgs();
  official["window_size"] = 32;
  std::filesystem::create_directories(dir / "inference");
  testing::WriteFile(dir / "inference" / "config.json", official.dump());
  EXPECT_EQ(LoadV41Config(dir).window_size, 32);
  const auto eval = testing::RunCommand(
      TANDEM_RT_BIN, {"eval", "--model", dir.string(), "--tokens", "1,2", "--logits-out", (dir / "logits.bin").string()});
  EXPECT_EQ(eval.exit_code, 2);
  EXPECT_NE(eval.err.find("has neither model.safetensors nor model.safetensors.index.json"), std::string::npos) << eval.err;
}

}  // namespace
}  // namespace tandem::rt

namespace tandem::rt {
namespace {

// V4.1's gate through the shared Router, against the reference's formula in float64:
// s = sqrt(softplus(logit)), the top k of s + bias, weights s / (Σ s + 1e-20) · route_scale.
TEST(V41Config, TheMoeRoutesAsTheReferenceGate) {
  const V41Config c = ParseV41Config(FlashArgs().dump(), "config.json");
  const ModelConfig moe = V41MoeConfig(c);
  EXPECT_EQ(V41MoeConfig(c, true).n_routed_experts, 128);
  EXPECT_EQ(V41MoeConfig(c, true).num_experts_per_tok, 3);
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> bias(static_cast<std::size_t>(c.n_routed_experts));
  for (float& b : bias) b = normal(rng) * 0.05f;
  const Router router(moe, bias);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> logits(static_cast<std::size_t>(c.n_routed_experts));
    for (float& l : logits) l = normal(rng);
    std::vector<ExpertRoute> routes(static_cast<std::size_t>(c.n_activated_experts));
    router.Route(logits, routes);
    std::vector<double> s(logits.size());
    for (std::size_t e = 0; e < s.size(); ++e)
      s[e] = std::sqrt(logits[e] > 20 ? logits[e] : std::log1p(std::exp(static_cast<double>(logits[e]))));
    std::vector<int> order(s.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return s[a] + bias[a] > s[b] + bias[b]; });
    double sum = 0;
    for (int i = 0; i < c.n_activated_experts; ++i) sum += s[static_cast<std::size_t>(order[i])];
    for (int i = 0; i < c.n_activated_experts; ++i) {
      EXPECT_EQ(routes[i].expert, order[i]) << "trial " << trial;
      EXPECT_NEAR(routes[i].weight, s[static_cast<std::size_t>(order[i])] / (sum + 1e-20) * 1.5, 1e-6) << "trial " << trial;
    }
  }
}

}  // namespace
}  // namespace tandem::rt
