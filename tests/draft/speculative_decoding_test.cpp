// Speculative decoding in the scheduler, in process on the tiny preset: drafts never
// change what is generated (greedy or seeded sampled), an oracle drafter is always
// accepted and a random one almost never.
#include <memory>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/draft/draft_policy.hpp"
#include "runtime/draft/mtp_drafter.hpp"
#include "runtime/draft/ngram_drafter.hpp"
#include "runtime/draft/quantized_experts.hpp"
#include "runtime/draft/replica_drafter.hpp"
#include "runtime/engine/engine.hpp"
#include "runtime/engine/local_experts.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/serve/scheduler.hpp"
#include "tests/draft/drafting_run.hpp"
#include "tests/runtime/stream_output.hpp"
#include "tests/runtime/tiny_model.hpp"

namespace tandem::rt {
namespace {

using namespace std::chrono_literals;

// Test only: proposes uniformly random tokens.
class RandomDrafter : public Drafter {
 public:
  explicit RandomDrafter(int vocab) : vocab_(vocab) {}
  std::string_view name() const override { return "random"; }
  void Propose(std::span<const DraftRequest> requests, const DraftMore& more, std::vector<Draft>& drafts) override {
    drafts.assign(requests.size(), {});
    std::uniform_int_distribution<TokenId> token(2, vocab_ - 1);
    for (std::size_t r = 0; r < requests.size(); ++r) {
      while (static_cast<int>(drafts[r].tokens.size()) < requests[r].max_drafts) {
        drafts[r].tokens.push_back(token(rng_));
        drafts[r].confidence.push_back(0.5f);
        if (!more(r, drafts[r])) break;
      }
    }
  }

 private:
  int vocab_;
  std::mt19937 rng_{5};
};

using Generated = testing::DraftingRun;

class SpeculativeDecoding : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ckpt_ = new Checkpoint(Checkpoint::Open(testing::TinyCheckpoint()));
    tokenizer_ = new Tokenizer(Tokenizer::Load(testing::TinyCheckpoint() / "tokenizer.json"));
    // Prompts of 3..60 tokens, some repeating themselves (so prompt lookup finds
    // something); half greedy, half seeded sampled.
    std::mt19937 rng(11);
    for (int i = 0; i < 16; ++i) {
      Submission s;
      const int length = 3 + (i * 7) % 58;
      std::uniform_int_distribution<TokenId> token(2, ckpt_->config().vocab_size - 1);
      for (int t = 0; t < length; ++t) s.prompt.push_back(token(rng));
      if (i % 4 == 1) s.prompt.insert(s.prompt.end(), s.prompt.begin(), s.prompt.end());
      s.max_new_tokens = 24 + i * 3;
      s.ignore_eos = i % 3 != 0;
      if (i % 2 == 1) s.sampling = {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .seed = static_cast<std::uint64_t>(1000 + i)};
      submissions_.push_back(s);
    }
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete ckpt_;
  }

  // Every submission at once, through a scheduler with this drafter (null: none).
  static Generated Generate(const testing::DrafterFactory& make_drafter, const std::string& policy, bool keep_hidden = false,
                            const std::vector<Submission>* submissions = nullptr) {
    return testing::RunDrafting(*ckpt_, *tokenizer_, submissions ? *submissions : submissions_, make_drafter, policy, keep_hidden, 512);
  }

  static const Generated& TargetOnly() {
    static const Generated run = Generate(nullptr, "adaptive");
    return run;
  }

  static void ExpectSameOutputs(const Generated& run, const Generated& plain = TargetOnly()) {
    testing::ExpectSameOutputs(run, plain,
                               [](std::size_t i) { return "request " + std::to_string(i) + (i % 2 ? " (sampled)" : " (greedy)"); });
  }

  static double Acceptance(const Generated& run) { return testing::Acceptance(run); }

  static Checkpoint* ckpt_;
  static Tokenizer* tokenizer_;
  static std::vector<Submission> submissions_;
};

Checkpoint* SpeculativeDecoding::ckpt_ = nullptr;
Tokenizer* SpeculativeDecoding::tokenizer_ = nullptr;
std::vector<Submission> SpeculativeDecoding::submissions_;

TEST_F(SpeculativeDecoding, TargetOnlyVerifiesNothing) {
  const Generated& run = TargetOnly();
  EXPECT_EQ(run.draft["mode"], "off");
  EXPECT_EQ(run.draft["verified_drafts"], 0);
  int tokens = 0;
  for (const testing::StreamOutput& o : run.outputs) tokens += o.completion_tokens;
  EXPECT_EQ(run.draft["request_rounds"], tokens) << "one round per token without drafts";
}

TEST_F(SpeculativeDecoding, AnOracleDrafterIsAlwaysAccepted) {
  // The target's own computation as the drafter: it proposes the target's continuation.
  const Generated run = Generate(
      [](Engine& target) {
        const Checkpoint& ckpt = *ckpt_;
        return std::make_unique<ReplicaDrafter>(
            ckpt, &target.pool(), [&ckpt](ThreadPool& p) { return std::make_shared<LocalExpertExecutor>(ckpt, &p); }, "oracle");
      },
      "fixed:4");
  ExpectSameOutputs(run);
  EXPECT_GT(run.draft["verified_drafts"].get<int>(), 100);
  EXPECT_EQ(run.draft["accepted_drafts"], run.draft["verified_drafts"]) << run.draft.dump();
  EXPECT_GT(run.draft["tokens_per_request_round"].get<double>(), 3.0) << run.draft.dump();
}

TEST_F(SpeculativeDecoding, StructuredOutputsDraftUnderTheirGrammar) {
  // JSON objects, greedy and sampled: the oracle drafts under each request's grammar,
  // as the target samples, so it proposes exactly the target's continuation (unmasked,
  // the random-weight model's favourite tokens are rarely valid JSON).
  std::vector<Submission> structured;
  for (int i = 0; i < 6; ++i) {
    Submission s{.prompt = tokenizer_->Encode("an object " + std::to_string(i)), .max_new_tokens = 40, .grammar = JsonGrammar::AnyObject()};
    if (i % 2 == 1) s.sampling = {.temperature = 0.9f, .seed = static_cast<std::uint64_t>(300 + i)};
    structured.push_back(s);
  }
  const Generated plain = Generate(nullptr, "adaptive", false, &structured);
  const Generated run = Generate(
      [](Engine& target) {
        const Checkpoint& ckpt = *ckpt_;
        return std::make_unique<ReplicaDrafter>(
            ckpt, &target.pool(), [&ckpt](ThreadPool& p) { return std::make_shared<LocalExpertExecutor>(ckpt, &p); }, "oracle");
      },
      "fixed:4", false, &structured);
  ExpectSameOutputs(run, plain);
  EXPECT_GT(run.draft["verified_drafts"].get<int>(), 50);
  EXPECT_EQ(run.draft["accepted_drafts"], run.draft["verified_drafts"]) << run.draft.dump();
  EXPECT_GT(run.draft["tokens_per_request_round"].get<double>(), 3.0) << run.draft.dump();
}

TEST_F(SpeculativeDecoding, ARandomDrafterIsAlmostNeverAcceptedAndChangesNothing) {
  const Generated run = Generate([](Engine& e) { return std::make_unique<RandomDrafter>(e.config().vocab_size); }, "fixed:3");
  ExpectSameOutputs(run);
  EXPECT_GT(run.draft["verified_drafts"].get<int>(), 100);
  EXPECT_LT(Acceptance(run), 0.02) << run.draft.dump();
}

TEST_F(SpeculativeDecoding, QuantizedReplicasAreLossless) {
  for (const auto& [format, policy] : {std::pair{QuantFormat::kInt8, "fixed:4"}, std::pair{QuantFormat::kInt4, "fixed:2"}}) {
    SCOPED_TRACE(std::string(ToString(format)) + " " + policy);
    const QuantFormat f = format;
    const Generated run = Generate(testing::ReplicaDrafterOf(*ckpt_, f), policy);
    ExpectSameOutputs(run);
    EXPECT_GT(run.draft["verified_drafts"].get<int>(), 50);
    // A quantized copy of the same weights agrees with the target most of the time.
    EXPECT_GT(Acceptance(run), f == QuantFormat::kInt8 ? 0.6 : 0.3) << run.draft.dump();
  }
}

TEST_F(SpeculativeDecoding, PromptLookupIsLossless) {
  const Generated run = Generate([](Engine&) { return std::make_unique<NgramDrafter>(1, 4); }, "fixed:4");
  ExpectSameOutputs(run);
  EXPECT_GT(run.draft["verified_drafts"].get<int>(), 0);
}

TEST_F(SpeculativeDecoding, TheMtpLayerIsLossless) {
  const Generated run = Generate(testing::MtpDrafterOf(*ckpt_), "fixed:3", true);
  ExpectSameOutputs(run);
  EXPECT_EQ(run.draft["mode"], "mtp");
  // Random MTP weights predict nothing in particular, but it must draft every round.
  EXPECT_GT(run.draft["verified_drafts"].get<int>(), 200) << run.draft.dump();
}

TEST_F(SpeculativeDecoding, AnMtpDrafterNeedsTheTargetsHiddenStates) {
  EXPECT_THROW(Generate(
                   [](Engine& target) {
                     const Checkpoint& ckpt = *ckpt_;
                     return std::make_unique<MtpDrafter>(ckpt, &target.pool(), Engine::ExpertExecutorFactory{});
                   },
                   "fixed:3", false),
               std::invalid_argument);
}

TEST_F(SpeculativeDecoding, StatsDescribeTheDrafting) {
  const Generated run = Generate(testing::ReplicaDrafterOf(*ckpt_, QuantFormat::kInt8), "adaptive");
  const nlohmann::json& d = run.draft;
  EXPECT_EQ(d["mode"], "replica");
  EXPECT_EQ(d["policy"], "adaptive");
  EXPECT_GT(d["rounds"].get<int>(), 0);
  int verified = 0, accepted = 0;
  for (const auto& p : d["per_position"]) {
    verified += p["verified"].get<int>();
    accepted += p["accepted"].get<int>();
  }
  EXPECT_EQ(verified, d["verified_drafts"].get<int>());
  EXPECT_EQ(accepted, d["accepted_drafts"].get<int>());
  std::uint64_t rounds = 0, drafts = 0;
  for (const auto& [k, n] : d["draft_length_histogram"].items()) {
    rounds += n.get<std::uint64_t>();
    drafts += std::stoull(k) * n.get<std::uint64_t>();
  }
  EXPECT_EQ(rounds, d["request_rounds"].get<std::uint64_t>());
  EXPECT_EQ(drafts, d["verified_drafts"].get<std::uint64_t>());
  EXPECT_TRUE(d["round_time_prediction_mare"].is_number()) << d.dump();
  EXPECT_TRUE(d.contains("calibration"));
}

}  // namespace
}  // namespace tandem::rt
