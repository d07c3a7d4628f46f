#include "runtime/engine/engine.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/model/checkpoint.hpp"
#include "runtime/sampling/sampler.hpp"
#include "tests/runtime/engine_rows.hpp"
#include "tests/runtime/tiny_model.hpp"

namespace tandem::rt {
namespace {

using tandem::testing::Prefill;
using tandem::testing::TinyCheckpoint;
using tandem::testing::Tokens;

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override { ckpt_ = std::make_unique<Checkpoint>(Checkpoint::Open(TinyCheckpoint())); }
  int vocab() const { return ckpt_->config().vocab_size; }
  std::unique_ptr<Checkpoint> ckpt_;
};

TEST_F(EngineTest, RowLogitsAreBitIdenticalAloneAndInABatchOf16) {
  Engine engine(*ckpt_, EngineOptions{.threads = 2});
  const auto prompt = Tokens(7, 1, vocab());
  engine.kv().Open(1, 64);
  Prefill(engine, 1, prompt);
  engine.kv().Fork(1, 2, 7, 64);

  const TokenId next = 42;
  const Row alone{1, 7, next, true};
  ForwardOutput out;
  engine.Forward(std::span<const Row>(&alone, 1), out);
  const std::vector<float> single = out.logits;

  // Fifteen other sequences at other positions, and the forked copy in the middle.
  std::vector<Row> batch;
  for (SequenceId s = 10; s < 25; ++s) {
    engine.kv().Open(s, 64);
    Prefill(engine, s, Tokens(static_cast<int>(s % 9) + 1, s, vocab()));
    batch.push_back({s, engine.kv().Get(s).length(), static_cast<TokenId>(s * 7 % vocab()), true});
    if (s == 17) batch.push_back({2, 7, next, true});
  }
  ASSERT_EQ(batch.size(), 16u);
  engine.Forward(batch, out);
  ASSERT_EQ(out.logit_rows.size(), 16u);
  const auto row = std::find(out.logit_rows.begin(), out.logit_rows.end(), 8u) - out.logit_rows.begin();
  const std::span<const float> batched = out.LogitsOf(static_cast<std::size_t>(row), vocab());
  ASSERT_EQ(batch[8].sequence, 2u);
  EXPECT_EQ(std::memcmp(single.data(), batched.data(), single.size() * sizeof(float)), 0)
      << "a row's logits changed when other rows shared its batch";
}

TEST_F(EngineTest, CachedDecodeEqualsRecomputingTheWholePrefix) {
  Engine engine(*ckpt_, EngineOptions{.threads = 2});
  const auto tokens = Tokens(24, 3, vocab());
  // Sequence 1 sees all 24 tokens in one forward (attention's per-head products then
  // take the rows together); sequence 2 one token per step. Every bit agrees.
  engine.kv().Open(1, 32);
  const std::vector<float> full = Prefill(engine, 1, tokens);
  engine.kv().Open(2, 32);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::vector<float> step = Prefill(engine, 2, {tokens[i]});
    EXPECT_EQ(std::memcmp(step.data(), full.data() + i * vocab(), static_cast<std::size_t>(vocab()) * sizeof(float)), 0)
        << "position " << i;
  }
}

TEST_F(EngineTest, TruncateThenRecomputeReproducesTheLogits) {
  Engine engine(*ckpt_, EngineOptions{.threads = 1});
  engine.kv().Open(1, 32);
  const auto tokens = Tokens(10, 5, vocab());
  const std::vector<float> first = Prefill(engine, 1, tokens);
  engine.kv().Get(1).Truncate(6);  // roll back four positions, as a rejected draft would
  const std::vector<float> again = Prefill(engine, 1, std::vector<TokenId>(tokens.begin() + 6, tokens.end()));
  EXPECT_EQ(std::memcmp(first.data() + 6 * vocab(), again.data(), again.size() * sizeof(float)), 0);
}

TEST_F(EngineTest, AWarmUpLeavesNoSequenceAndChangesNoResult) {
  const auto tokens = Tokens(12, 9, vocab());
  Engine cold(*ckpt_, EngineOptions{.threads = 2});
  cold.kv().Open(1, 16);
  const std::vector<float> expected = Prefill(cold, 1, tokens);

  Engine warm(*ckpt_, EngineOptions{.threads = 2});
  warm.WarmUp(100);  // more rows than the prompt: its buffers are larger, its scratch sequence gone
  EXPECT_EQ(warm.kv().size(), 0u);
  warm.kv().Open(1, 16);
  EXPECT_EQ(Prefill(warm, 1, tokens), expected);
  EXPECT_THROW(warm.WarmUp(ckpt_->config().max_position_embeddings + 1), std::invalid_argument);
  EXPECT_EQ(warm.kv().size(), 1u) << "a refused warm-up opens nothing";
}

TEST_F(EngineTest, ThreadCountDoesNotChangeResults) {
  const auto tokens = Tokens(12, 7, vocab());
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    Engine engine(*ckpt_, EngineOptions{.threads = threads});
    engine.kv().Open(1, 16);
    results.push_back(Prefill(engine, 1, tokens));
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST_F(EngineTest, RoutingSpreadsOverExpertsAndActivationsStayOrderOne) {
  Engine engine(*ckpt_, EngineOptions{.threads = 2, .record_routes = true});
  const int n = 1000;
  engine.kv().Open(1, n);
  const auto tokens = Tokens(n, 11, vocab());
  std::vector<Row> rows;
  for (int i = 0; i < n; ++i) rows.push_back({1, i, tokens[i], true});
  ForwardOutput out;
  engine.Forward(rows, out);
  const ModelConfig& c = engine.config();
  ASSERT_EQ(out.routes.size(), 3u);  // the tiny preset's MoE layers
  const double fair = static_cast<double>(n) * c.num_experts_per_tok / c.n_routed_experts;
  for (std::size_t l = 0; l < out.routes.size(); ++l) {
    std::vector<int> count(static_cast<std::size_t>(c.n_routed_experts));
    for (const ExpertRoute& r : out.routes[l]) ++count[static_cast<std::size_t>(r.expert)];
    const int busiest = *std::max_element(count.begin(), count.end());
    EXPECT_LE(busiest, 3.0 * fair) << "MoE layer " << l << ": one expert took " << busiest << " of " << n * c.num_experts_per_tok;
  }
  // Logits neither collapse nor blow up: their spread per row stays O(1).
  for (std::size_t i = 0; i < out.logit_rows.size(); i += 97) {
    const auto row = out.LogitsOf(i, vocab());
    double mean = 0, sq = 0;
    for (float v : row) mean += v;
    mean /= vocab();
    for (float v : row) sq += (v - mean) * (v - mean);
    const double sd = std::sqrt(sq / vocab());
    EXPECT_GT(sd, 0.1) << "row " << i;
    EXPECT_LT(sd, 10.0) << "row " << i;
  }
}

TEST_F(EngineTest, OnlyRowsThatAskForLogitsGetThem) {
  Engine engine(*ckpt_, EngineOptions{.threads = 1});
  engine.kv().Open(1, 8);
  const std::vector<Row> rows = {{1, 0, 5, false}, {1, 1, 6, true}, {1, 2, 7, false}};
  ForwardOutput out;
  engine.Forward(rows, out);
  ASSERT_EQ(out.logit_rows, std::vector<std::size_t>{1});
  EXPECT_EQ(out.logits.size(), static_cast<std::size_t>(vocab()));
}

TEST_F(EngineTest, RejectsRowsThatBreakTheRules) {
  Engine engine(*ckpt_, EngineOptions{.threads = 1});
  engine.kv().Open(1, 4);
  ForwardOutput out;
  const std::vector<Row> unknown = {{9, 0, 1, true}};
  EXPECT_THROW(engine.Forward(unknown, out), std::invalid_argument);
  const std::vector<Row> gap = {{1, 1, 1, true}};
  EXPECT_THROW(engine.Forward(gap, out), std::invalid_argument);
  const std::vector<Row> bad_token = {{1, 0, vocab(), true}};
  EXPECT_THROW(engine.Forward(bad_token, out), std::invalid_argument);
  const std::vector<Row> too_long = {{1, 0, 1, true}, {1, 1, 1, true}, {1, 2, 1, true}, {1, 3, 1, true}, {1, 4, 1, true}};
  EXPECT_THROW(engine.Forward(too_long, out), std::invalid_argument);
  EXPECT_EQ(engine.kv().Get(1).length(), 0) << "a rejected batch must not advance the cache";
}

// A profiled pass charges its time to the regions a tiny MoE model has, the regions
// add up to the passes' time, and a pass that throws counts nothing. The logits do
// not depend on being profiled.
TEST_F(EngineTest, AStepProfilePartitionsEachPassThatFinishes) {
  StepProfile profile;
  Engine profiled(*ckpt_, EngineOptions{.threads = 1, .profile = &profile});
  Engine plain(*ckpt_, EngineOptions{.threads = 1});
  const std::vector<TokenId> tokens = Tokens(12, 3, vocab());
  for (Engine* e : {&profiled, &plain}) e->kv().Open(1, 16);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<float> a = Prefill(profiled, 1, tokens);
  const std::vector<float> b = Prefill(plain, 1, tokens);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(a, b);
  EXPECT_EQ(profile.passes, 1u);
  for (const auto region : {StepProfile::kAttentionProjections, StepProfile::kAttentionCache, StepProfile::kRouter, StepProfile::kExperts,
                            StepProfile::kDenseMlp, StepProfile::kLmHead, StepProfile::kOther}) {
    EXPECT_GT(profile.seconds[region], 0.0) << StepProfile::Name(region);
  }
  EXPECT_LT(profile.TotalSeconds(), wall) << "within the profiled pass";

  const StepProfile before = profile;
  ForwardOutput out;
  const std::vector<Row> gap = {{1, 40, 1, true}};  // not the next position
  EXPECT_THROW(profiled.Forward(gap, out), std::invalid_argument);
  EXPECT_EQ(profile.passes, before.passes);
  EXPECT_EQ(profile.seconds, before.seconds) << "a pass that throws adds nothing";
}

}  // namespace
}  // namespace tandem::rt
