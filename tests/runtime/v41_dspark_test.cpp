// DeepSeek V4.1's drafter (the checkpoint's DSpark stages) against DeepSeek's own code:
// golden drafts, draft logits and confidence that its inference/model.py forward_spec made
// on the presets (tests/reference/v41_official_golden.py), step by step after a prompt.
#include "runtime/engine/v41_dspark.hpp"

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/engine/v41_engine.hpp"
#include "runtime/kernels/ops.hpp"
#include "runtime/model/v41_checkpoint.hpp"
#include "runtime/model/v41_synthetic.hpp"
#include "tests/runtime/eval_run.hpp"
#include "tests/runtime/tiny_model.hpp"
#include "tests/support/run_command.hpp"

namespace tandem::rt {
namespace {

const std::string kGolden = std::string(TANDEM_SOURCE_DIR) + "/tests/reference/golden/v41_official_";

// v41-tiny's decode stays within 0.3% of the reference's through these positions; v41-small's
// departs by a few percent from position 4 on (an ulp of the reference's fp32 order carried
// through the activations' FP8 rounding, as in its logit figures), so near-ties there can
// fall the other way.
struct Limits {
  std::string preset;
  double target_agreement;  // the target's greedy tokens
  double draft_agreement;
  double worst_logits;  // relative to the row's largest
  double confidence;    // absolute
};

class V41DSparkGolden : public ::testing::TestWithParam<Limits> {};

TEST_P(V41DSparkGolden, DraftsAsDeepSeeksOwnCode) {
  const Limits& limits = GetParam();
  std::ifstream in(kGolden + limits.preset + ".json");
  ASSERT_TRUE(in) << kGolden + limits.preset + ".json is missing";
  const nlohmann::json golden = nlohmann::json::parse(in);
  const auto dir = testing::TempDir(("v41-dspark-" + limits.preset).c_str());
  WriteV41SyntheticCheckpoint(golden.at("preset"), golden.at("seed"), dir);
  const auto engram =
      testing::RunCommand("/usr/bin/python3", {std::string(TANDEM_SOURCE_DIR) + "/models/v41/engram_constants.py", dir.string(), "--stub"});
  ASSERT_EQ(engram.exit_code, 0) << engram.err;
  const V41Checkpoint ckpt = V41Checkpoint::Open(dir);
  const int vocab = ckpt.config().vocab_size, block = ckpt.config().dspark_block_size;
  std::ifstream logits_file(kGolden + limits.preset + ".dspark.f32", std::ios::binary);
  std::vector<float> golden_logits(static_cast<std::size_t>(golden.at("dspark").at("steps").size()) * block * vocab);
  logits_file.read(reinterpret_cast<char*>(golden_logits.data()), static_cast<std::streamsize>(golden_logits.size() * sizeof(float)));
  ASSERT_TRUE(logits_file) << "the golden draft logits are missing or short";

  V41Engine target(ckpt, V41EngineOptions{.threads = 1, .keep_hidden = true});
  V41DSpark dspark(target, &target.pool());
  const std::vector<int> tokens = golden.at("tokens");
  target.kv().Open(1, 64);
  dspark.kv().Open(1, 64);
  const int prompt = golden.at("dspark").at("prompt");
  std::vector<Row> rows;
  for (int i = 0; i < prompt; ++i) rows.push_back({1, i, tokens[static_cast<std::size_t>(i)], i + 1 == prompt});
  ForwardOutput out;
  target.Forward(rows, out);
  dspark.Observe(rows, out.hidden.data());
  double worst = 0.0, worst_confidence = 0.0;
  int drafts = 0, agreeing = 0, steps = 0, targets_agreeing = 0;
  std::size_t step_index = 0;
  for (const auto& step : golden.at("dspark").at("steps")) {
    const int position = step.at("position");
    const Row row{1, position, tokens[static_cast<std::size_t>(position)], true};
    target.Forward(std::span<const Row>(&row, 1), out);
    ++steps;
    targets_agreeing += ArgMax(out.LogitsOf(0, vocab)) == step.at("next").get<int>() ? 1 : 0;
    dspark.Observe(std::span<const Row>(&row, 1), out.hidden.data());
    const DSparkDraft d = dspark.Draft(1, position, step.at("next").get<int>());
    const std::vector<int> expected = step.at("drafts");
    for (int j = 0; j < block; ++j) {
      ++drafts;
      agreeing += d.tokens[static_cast<std::size_t>(j)] == expected[static_cast<std::size_t>(j)] ? 1 : 0;
      const float* theirs = golden_logits.data() + (step_index * block + j) * vocab;
      const float* ours = d.logits.data() + static_cast<std::ptrdiff_t>(j) * vocab;
      double scale = 0.0, diff = 0.0;
      for (int v = 0; v < vocab; ++v) {
        scale = std::max(scale, std::fabs(static_cast<double>(theirs[v])));
        diff = std::max(diff, std::fabs(static_cast<double>(ours[v]) - theirs[v]));
      }
      worst = std::max(worst, diff / scale);
      worst_confidence = std::max(worst_confidence, std::fabs(d.confidence[static_cast<std::size_t>(j)] -
                                                              step.at("confidence")[static_cast<std::size_t>(j)].get<double>()));
    }
    ++step_index;
  }
  // The same drafts, the logits to the reference's fp32 summation order (its layers agree
  // bit for bit but for an ulp now and then: docs/v41-attention.md).
  EXPECT_GE(targets_agreeing, limits.target_agreement * steps) << targets_agreeing << " of " << steps << " target tokens agree";
  EXPECT_GE(agreeing, limits.draft_agreement * drafts) << agreeing << " of " << drafts << " drafts agree with the reference";
  EXPECT_LE(worst, limits.worst_logits) << "worst draft-logit difference relative to the row's largest";
  EXPECT_LE(worst_confidence, limits.confidence) << "worst confidence difference";
  RecordProperty("drafts_agreeing", std::to_string(agreeing) + "/" + std::to_string(drafts));
  RecordProperty("worst_relative_error", std::to_string(worst));
  RecordProperty("worst_confidence_difference", std::to_string(worst_confidence));
}

INSTANTIATE_TEST_SUITE_P(Presets, V41DSparkGolden,
                         ::testing::Values(Limits{"tiny", 1.0, 1.0, 0.02, 0.05}, Limits{"small", 0.8, 0.9, 0.1, 0.3}),
                         [](const auto& p) { return p.param.preset; });

}  // namespace
}  // namespace tandem::rt
