// DeepSeek V4.1's engine on the v41-tiny preset (window 16, compression ratios 2 and 1,
// candidate blocks, Engram on two layers): a prompt fed whole, in chunks or token by token
// gives the same bits; a row's logits do not depend on the rows beside it; a forked or
// truncated cache continues as the original. Its arithmetic against an independent numpy
// forward is the CTest v41_reference_forward_*.
#include "runtime/engine/v41_engine.hpp"

#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/kernels/ops.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/v41_checkpoint.hpp"
#include "runtime/model/v41_synthetic.hpp"
#include "tests/runtime/eval_run.hpp"
#include "tests/runtime/tiny_model.hpp"

namespace tandem::rt {
namespace {

const std::filesystem::path& TinyDir() {
  static const std::filesystem::path dir = [] {
    const auto d = testing::TempDir("v41-engine");
    WriteV41SyntheticCheckpoint("v41-tiny", 11, d);
    std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/tests/reference/golden/engram.json");
    EXPECT_TRUE(in) << "tests/reference/golden/engram.json is missing";
    testing::WriteFile(d / "engram.json", nlohmann::json::parse(in).at("engram_json").dump());
    return d;
  }();
  return dir;
}

const V41Checkpoint& Tiny() {
  static const V41Checkpoint ckpt = V41Checkpoint::Open(TinyDir());
  return ckpt;
}

std::vector<TokenId> Prompt(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<TokenId> t;
  for (int i = 0; i < n; ++i) t.push_back(static_cast<TokenId>(rng() % 512));
  return t;
}

// Logits of every position of `tokens` for sequence 1, fed in chunks of `chunk` rows.
std::vector<float> LogitsOf(V41Engine& engine, const std::vector<TokenId>& tokens, std::size_t chunk) {
  engine.kv().Open(1, static_cast<int>(tokens.size()));
  std::vector<float> logits;
  for (std::size_t at = 0; at < tokens.size(); at += chunk) {
    std::vector<Row> rows;
    for (std::size_t i = at; i < std::min(tokens.size(), at + chunk); ++i)
      rows.push_back({1, static_cast<std::int32_t>(i), tokens[i], true});
    ForwardOutput out;
    engine.Forward(rows, out);
    logits.insert(logits.end(), out.logits.begin(), out.logits.end());
  }
  engine.kv().Close(1);
  return logits;
}

TEST(V41Engine, PromptWholeInChunksOrTokenByTokenGivesTheSameBits) {
  V41Engine engine(Tiny(), V41EngineOptions{.threads = 2});
  // 70 positions: past four windows of 16, across ratio-2 groups and candidate blocks.
  const std::vector<TokenId> tokens = Prompt(70, 1);
  const std::vector<float> whole = LogitsOf(engine, tokens, tokens.size());
  ASSERT_EQ(whole.size(), tokens.size() * 512);
  for (float v : whole) ASSERT_TRUE(std::isfinite(v));
  for (std::size_t chunk : {1, 3, 16, 17}) EXPECT_EQ(LogitsOf(engine, tokens, chunk), whole) << "chunks of " << chunk;
  V41Engine one_thread(Tiny(), V41EngineOptions{.threads = 1});
  EXPECT_EQ(LogitsOf(one_thread, tokens, tokens.size()), whole);
}

// Greedy continuations of `prompts`, `steps` tokens each, computed in batches of `batch`
// sequences (prompt rows and decode rows of several sequences in one forward).
std::vector<std::vector<TokenId>> Greedy(V41Engine& engine, const std::vector<std::vector<TokenId>>& prompts, std::size_t batch,
                                         int steps) {
  std::vector<std::vector<TokenId>> out(prompts.size());
  for (std::size_t first = 0; first < prompts.size(); first += batch) {
    const std::size_t last = std::min(prompts.size(), first + batch);
    std::map<SequenceId, TokenId> next;
    std::vector<Row> rows;
    for (std::size_t s = first; s < last; ++s) {
      engine.kv().Open(s + 1, static_cast<int>(prompts[s].size()) + steps);
      for (std::size_t i = 0; i < prompts[s].size(); ++i) {
        rows.push_back({s + 1, static_cast<std::int32_t>(i), prompts[s][i], i + 1 == prompts[s].size()});
      }
    }
    for (int step = 0; step <= steps; ++step) {
      ForwardOutput result;
      engine.Forward(rows, result);
      std::vector<Row> following;
      for (std::size_t i = 0; i < result.logit_rows.size(); ++i) {
        const Row& r = rows[result.logit_rows[i]];
        const TokenId t = ArgMax(result.LogitsOf(i, 512));
        auto& seq = out[r.sequence - 1];
        if (step == steps) continue;
        seq.push_back(t);
        following.push_back({r.sequence, r.position + 1, t, true});
      }
      rows = std::move(following);
    }
    for (std::size_t s = first; s < last; ++s) engine.kv().Close(s + 1);
  }
  return out;
}

TEST(V41Engine, GreedyTokensDoNotDependOnTheBatch) {
  V41Engine engine(Tiny(), V41EngineOptions{.threads = 2});
  std::vector<std::vector<TokenId>> prompts;
  for (unsigned s = 0; s < 16; ++s) prompts.push_back(Prompt(5 + static_cast<int>(s) * 3, 100 + s));
  const auto alone = Greedy(engine, prompts, 1, 20);
  EXPECT_EQ(Greedy(engine, prompts, 4, 20), alone);
  EXPECT_EQ(Greedy(engine, prompts, 16, 20), alone);
  std::set<TokenId> distinct;
  for (const auto& s : alone) distinct.insert(s.begin(), s.end());
  EXPECT_GT(distinct.size(), 20u) << "the continuations should differ from one another";
}

TEST(V41Engine, AForkedOrTruncatedCacheContinuesAsTheOriginal) {
  V41Engine engine(Tiny(), V41EngineOptions{.threads = 2});
  const std::vector<TokenId> tokens = Prompt(60, 7);
  const std::vector<float> reference = LogitsOf(engine, tokens, tokens.size());
  // A prefix of 37 positions (mid ratio-2 group, mid candidate block) reused by another sequence.
  engine.kv().Open(1, 60);
  std::vector<Row> rows;
  for (int i = 0; i < 37; ++i) rows.push_back({1, i, tokens[static_cast<std::size_t>(i)], false});
  ForwardOutput out;
  engine.Forward(rows, out);
  engine.kv().Fork(1, 2, 37, 60);
  // And the original rolled back to 30 (speculative rows rejected), then fed again.
  engine.kv().Get(1).Truncate(30);
  for (SequenceId id : {SequenceId{2}, SequenceId{1}}) {
    const int from = engine.kv().Get(id).length();
    rows.clear();
    for (int i = from; i < 60; ++i) rows.push_back({id, i, tokens[static_cast<std::size_t>(i)], true});
    engine.Forward(rows, out);
    const std::vector<float> expected(reference.begin() + static_cast<std::ptrdiff_t>(from) * 512, reference.end());
    EXPECT_EQ(out.logits, expected) << "sequence " << id;
  }
}

TEST(V41Engine, RowsThatBreakTheRulesAreRefusedByName) {
  V41Engine engine(Tiny(), V41EngineOptions{.threads = 1});
  engine.kv().Open(1, 4);
  ForwardOutput out;
  const auto refusal = [&](std::vector<Row> rows) -> std::string {
    try {
      engine.Forward(rows, out);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(refusal({{1, 1, 5, true}}), "row 0: sequence 1 position 1 but the next position is 0");
  EXPECT_EQ(refusal({{1, 0, 512, true}}), "row 0: token 512 is outside the vocabulary [0, 512)");
  EXPECT_EQ(refusal({{9, 0, 5, true}}), "row 0: sequence 9 has no KV cache open");
  EXPECT_EQ(refusal({{1, 0, 5, false}, {1, 1, 5, false}, {1, 2, 5, false}, {1, 3, 5, false}, {1, 4, 5, true}}),
            "row 4: sequence 1 position 4 exceeds its KV capacity 4");
  EXPECT_EQ(engine.kv().Get(1).length(), 0) << "a refused batch writes nothing";
}

TEST(V41Engine, ACheckpointWithoutItsEngramConstantsNamesTheScript) {
  const auto dir = testing::TempDir("v41-engine-no-engram");
  WriteV41SyntheticCheckpoint("v41-tiny", 11, dir);
  std::filesystem::remove(dir / "engram.json");
  try {
    V41Checkpoint::Open(dir);
    FAIL() << "opened without engram.json";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("models/v41/engram_constants.py"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::rt
