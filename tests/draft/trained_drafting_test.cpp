// Speculative decoding on the trained mini model (models/mini/checkpoint), in process:
// every drafter leaves the greedy and the seeded sampled outputs unchanged, and the
// trained MTP layer predicts the next-next token as a language model's does (random MTP
// weights are almost never accepted). The answers' formats are checked too: the same
// weights must keep answering as trained.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/draft/ngram_drafter.hpp"
#include "runtime/model/chat_template.hpp"
#include "runtime/model/checkpoint.hpp"
#include "tests/draft/drafting_run.hpp"
#include "tests/runtime/tiny_model.hpp"

namespace tandem::rt {
namespace {

using Generated = testing::DraftingRun;

// Chat prompts in the formats the model was trained on (none is a corpus prompt).
const std::vector<std::string> kPrompts = {
    "Count from 1 to 40, one number per line.",
    "Give me a JSON object for Lyon with the keys \"name\" and \"country\".",
    "Write a Python function named `area_of_circle` that returns the area of a circle.",
    "Hello! Who are you?",
    "Translate into French and German, one language per line: \"The river is cold.\"",
};

class TrainedDrafting : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ckpt_ = new Checkpoint(Checkpoint::Open(testing::MiniCheckpoint()));
    tokenizer_ = new Tokenizer(Tokenizer::Load(testing::MiniCheckpoint() / "tokenizer.json"));
    const ChatTemplate chat = ChatTemplate::Load(testing::MiniCheckpoint());
    // Each prompt greedy, then sampled at temperature 0.7 with a fixed seed.
    for (int sampled = 0; sampled < 2; ++sampled) {
      for (std::size_t i = 0; i < kPrompts.size(); ++i) {
        Submission s;
        s.prompt = chat.Encode(*tokenizer_, {{"user", kPrompts[i]}});
        s.max_new_tokens = 128;
        if (sampled == 1) s.sampling = {.temperature = 0.7f, .top_p = 1.0f, .seed = 100 + i};
        submissions_.push_back(s);
      }
    }
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete ckpt_;
  }

  static Generated Generate(const testing::DrafterFactory& make_drafter, const std::string& policy, bool keep_hidden = false) {
    return testing::RunDrafting(*ckpt_, *tokenizer_, submissions_, make_drafter, policy, keep_hidden, 1024);
  }
  static const Generated& TargetOnly() {
    static const Generated run = Generate(nullptr, "adaptive");
    return run;
  }
  static void ExpectSameOutputs(const Generated& run) {
    testing::ExpectSameOutputs(run, TargetOnly(), [](std::size_t i) {
      return kPrompts[i % kPrompts.size()] + (i < kPrompts.size() ? " (greedy)" : " (sampled)");
    });
  }

  static Checkpoint* ckpt_;
  static Tokenizer* tokenizer_;
  static std::vector<Submission> submissions_;
};

Checkpoint* TrainedDrafting::ckpt_ = nullptr;
Tokenizer* TrainedDrafting::tokenizer_ = nullptr;
std::vector<Submission> TrainedDrafting::submissions_;

// What the committed weights answer, greedy: they count, write JSON and Python in the
// asked formats (docs/model.md says what they do not do yet: copy names from the prompt,
// stop counting where asked).
TEST_F(TrainedDrafting, TheModelAnswersInTheTrainedFormats) {
  std::string expected;
  for (int i = 1; i <= 40; ++i) expected += std::to_string(i) + "\n";
  EXPECT_EQ(TargetOnly().outputs[0].text.substr(0, expected.size()), expected) << TargetOnly().outputs[0].text;
  EXPECT_EQ(TargetOnly().outputs[1].text.rfind("{\"name\": \"", 0), 0u) << TargetOnly().outputs[1].text;
  EXPECT_NE(TargetOnly().outputs[1].text.find("\"country\": \""), std::string::npos) << TargetOnly().outputs[1].text;
  EXPECT_NE(TargetOnly().outputs[2].text.find("def "), std::string::npos) << TargetOnly().outputs[2].text;
}

TEST_F(TrainedDrafting, TheTrainedMtpLayerIsLosslessAndOftenRight) {
  const Generated run = Generate(testing::MtpDrafterOf(*ckpt_), "fixed:1", true);
  ExpectSameOutputs(run);
  EXPECT_GT(run.draft["verified_drafts"].get<int>(), 300) << run.draft.dump();
  // The next-next token of counting, JSON keys and code is mostly predictable; random
  // MTP weights score near 0 here.
  EXPECT_GT(testing::Acceptance(run), 0.5) << run.draft.dump();
}

TEST_F(TrainedDrafting, AnInt8ReplicaIsLosslessAndAgreesWithTheTarget) {
  const Generated run = Generate(testing::ReplicaDrafterOf(*ckpt_, QuantFormat::kInt8), "fixed:4");
  ExpectSameOutputs(run);
  EXPECT_GT(testing::Acceptance(run), 0.8) << run.draft.dump();
}

TEST_F(TrainedDrafting, PromptLookupIsLossless) {
  const Generated run = Generate([](Engine&) { return std::make_unique<NgramDrafter>(1, 4); }, "fixed:4");
  ExpectSameOutputs(run);
  EXPECT_GT(run.draft["verified_drafts"].get<int>(), 0) << run.draft.dump();
}

}  // namespace
}  // namespace tandem::rt
