// DeepSeek V4.1 in the hybrid layout: expert workers holding whole experts (--expert-parallel
// ep) or column slices of every expert (tp), with and without coordinator-resident layers, with
// a peer coordinator rank holding half of those layers' expert columns, give the single
// process's logits and greedy tokens bit for bit; a tp split inside a 32-column block is
// refused by name.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/model/v41_synthetic.hpp"
#include "tests/runtime/eval_run.hpp"
#include "tests/runtime/tiny_model.hpp"
#include "tests/support/run_command.hpp"

namespace tandem::testing {
namespace {

std::filesystem::path Preset(const std::string& preset) {
  const auto dir = TempDir(("v41-hybrid-" + preset).c_str());
  rt::WriteV41SyntheticCheckpoint(preset, 9, dir);
  const CommandResult engram =
      RunCommand("/usr/bin/python3", {std::string(TANDEM_SOURCE_DIR) + "/models/v41/engram_constants.py", dir.string(), "--stub"});
  EXPECT_EQ(engram.exit_code, 0) << engram.err;
  return dir;
}

class V41Hybrid : public ::testing::TestWithParam<std::string> {};

TEST_P(V41Hybrid, ExpertWorkersGiveTheSingleProcessBitForBit) {
  const auto dir = Preset(GetParam());
  const EvalRun single = RunEval(dir, {});
  ASSERT_EQ(single.run.exit_code, 0) << single.run.err;
  ASSERT_EQ(single.tokens.size(), 16u + 64u);
  const std::vector<std::vector<std::string>> layouts = {
      {"--spawn-workers", "4", "--expert-parallel", "tp"},
      {"--spawn-workers", "4", "--expert-parallel", "ep"},
      {"--spawn-workers", "2", "--expert-parallel", "ep", "--local-expert-layers", "3"},
      {"--spawn-workers", "2", "--expert-parallel", "tp", "--local-expert-layers", "2", "--coordinator-ranks", "2"},
  };
  for (const auto& layout : layouts) {
    std::string name;
    for (const std::string& f : layout) name += f + " ";
    const EvalRun hybrid = RunEval(dir, layout);
    ASSERT_EQ(hybrid.run.exit_code, 0) << name << hybrid.run.err;
    EXPECT_EQ(hybrid.tokens, single.tokens) << name;
    EXPECT_TRUE(hybrid.logits == single.logits) << name << ": worst relative difference " << MaxRelativeError(hybrid, single);
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, V41Hybrid, ::testing::Values("v41-tiny", "v41-small"),
                         [](const auto& p) { return p.param == "v41-tiny" ? std::string("tiny") : std::string("small"); });

TEST(V41HybridLayout, CuttingInsideABlockIsRefusedByName) {
  const auto dir = Preset("v41-tiny");  // moe_inter_dim 128: three workers would cut at 43 and 86
  const EvalRun tp = RunEval(dir, {"--spawn-workers", "3", "--expert-parallel", "tp"}, 1);
  EXPECT_EQ(tp.run.exit_code, 2);
  EXPECT_NE(tp.run.err.find("tp over 3 workers splits each routed expert's moe_intermediate_size 128 at column 43, which is not a "
                            "multiple of 32 (DeepSeek V4.1's FP4 scale blocks)"),
            std::string::npos)
      << tp.run.err;
}

}  // namespace
}  // namespace tandem::testing
