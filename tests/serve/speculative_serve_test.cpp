// Lossless speculative decoding end to end: `tandem-rt serve` with each drafter, in a
// single process and with 4 real expert workers, answers 30 prompts (greedy and
// seeded sampled, several at once) exactly as the same layout does with --draft off.
// Fixed draft lengths, so every drafter really drafts (on the tiny preset the
// adaptive policy finds drafting rarely pays, see the in-process tests for it).
#include <map>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/serve/test_server.hpp"

namespace tandem::rt {
namespace {

using nlohmann::json;
using tandem::testing::Post;
using tandem::testing::Server;

// 30 chat requests: varied content (some that repeat themselves, for prompt lookup),
// every third one seeded sampled.
std::vector<json> Requests() {
  const std::vector<std::string> topics = {"memory bandwidth", "a lighthouse", "the number seven", "rust and C++", "tea", "MoE routing"};
  std::vector<json> out;
  for (int i = 0; i < 30; ++i) {
    std::string text = fmt::format("Request {}: tell me about {}.", i, topics[static_cast<std::size_t>(i) % topics.size()]);
    if (i % 5 == 2) text += " Repeat after me: abc abc abc abc abc abc abc.";
    json body = {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", text}}}}, {"max_tokens", 24 + (i % 7) * 6}};
    if (i % 3 == 2) {
      body["temperature"] = 0.9;
      body["top_p"] = 0.95;
      body["seed"] = 500 + i;
    } else {
      body["temperature"] = 0;
    }
    out.push_back(body);
  }
  return out;
}

struct Answer {
  std::string text, finish_reason;
  int completion_tokens = 0;
};

// Sends every request, six at a time, so drafts of several requests share steps.
std::vector<Answer> AskAll(Server& server) {
  const std::vector<json> requests = Requests();
  std::vector<Answer> answers(requests.size());
  for (std::size_t first = 0; first < requests.size(); first += 6) {
    std::vector<std::thread> batch;
    for (std::size_t i = first; i < std::min(first + 6, requests.size()); ++i) {
      batch.emplace_back([&, i] {
        const auto [status, body] = Post(server, "/v1/chat/completions", requests[i].dump());
        if (status != 200) {
          answers[i].text = fmt::format("HTTP {}: {}", status, body.dump());
          return;
        }
        answers[i] = {tandem::testing::Text(body), body["choices"][0]["finish_reason"], body["usage"]["completion_tokens"]};
      });
    }
    for (auto& t : batch) t.join();
  }
  return answers;
}

struct Mode {
  std::string name;
  std::vector<std::string> flags;
  std::string drafter;  // what /v1/stats names
};

class LosslessDrafts : public ::testing::TestWithParam<int> {};

TEST_P(LosslessDrafts, EveryDrafterGivesTheOutputsOfDraftOff) {
  const int workers = GetParam();
  std::vector<Answer> plain;
  {
    Server server(workers, {"--draft", "off"});
    plain = AskAll(server);
    EXPECT_EQ(server.Stats()["draft"]["mode"], "off");
  }
  const std::vector<Mode> modes = {
      {"replica int8, fixed:4", {"--draft", "replica", "--draft-policy", "fixed:4"}, "replica-int8"},
      {"replica int4, fixed:3", {"--draft", "replica", "--draft-format", "int4", "--draft-policy", "fixed:3"}, "replica-int4"},
      {"mtp, fixed:2", {"--draft", "mtp", "--draft-policy", "fixed:2"}, "mtp"},
      {"ngram, fixed:4", {"--draft", "ngram", "--draft-policy", "fixed:4", "--ngram-max", "3"}, "ngram"},
  };
  for (const Mode& mode : modes) {
    SCOPED_TRACE(fmt::format("{} workers, {}", workers, mode.name));
    Server server(workers, mode.flags);
    const std::vector<Answer> drafted = AskAll(server);
    for (std::size_t i = 0; i < plain.size(); ++i) {
      EXPECT_EQ(drafted[i].text, plain[i].text) << "request " << i;
      EXPECT_EQ(drafted[i].completion_tokens, plain[i].completion_tokens) << "request " << i;
      EXPECT_EQ(drafted[i].finish_reason, plain[i].finish_reason) << "request " << i;
    }
    const json draft = server.Stats()["draft"];
    EXPECT_EQ(draft["mode"], mode.drafter);
    EXPECT_GT(draft["verified_drafts"].get<int>(), 0) << draft.dump();
    fmt::print("{} workers, {}: {} of {} drafts accepted, {:.2f} tokens per request round\n", workers, mode.name,
               draft["accepted_drafts"].get<int>(), draft["verified_drafts"].get<int>(), draft["tokens_per_request_round"].get<double>());
    if (mode.drafter == "replica-int8") {
      EXPECT_GT(draft["acceptance_rate"].get<double>(), 0.5) << draft.dump();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, LosslessDrafts, ::testing::Values(0, 4), [](const auto& p) {
  return p.param == 0 ? std::string("single_process") : std::string("coordinator_and_4_workers");
});

TEST(DraftFlags, BadSettingsAreRefusedAtStartup) {
  EXPECT_THROW(Server(0, {"--draft-policy", "fixed:0"}), std::runtime_error);
  EXPECT_THROW(Server(0, {"--draft", "eagle"}), std::runtime_error);
}

}  // namespace
}  // namespace tandem::rt
