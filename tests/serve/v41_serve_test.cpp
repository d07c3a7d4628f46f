// `tandem-rt serve` on DeepSeek V4.1 (the v41-tiny preset): chat completions through the
// OpenAI API, greedy answers that do not depend on what else is being served, a prompt's
// cached prefix reused with the same answer, and image input refused by name.
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/model/v41_synthetic.hpp"
#include "tests/runtime/tiny_model.hpp"
#include "tests/serve/test_server.hpp"

namespace tandem::testing {
namespace {

using nlohmann::json;

std::filesystem::path V41Tiny() {
  static const std::filesystem::path dir = [] {
    const auto d = TempDir("v41-serve");
    rt::WriteV41SyntheticCheckpoint("v41-tiny", 3, d);
    std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/tests/reference/golden/engram.json");
    EXPECT_TRUE(in) << "tests/reference/golden/engram.json is missing";
    std::ofstream(d / "engram.json") << json::parse(in).at("engram_json").dump();
    return d;
  }();
  return dir;
}

json Chat(const json& content, int max_tokens) {
  return {{"model", "tiny"},
          {"messages", {{{"role", "user"}, {"content", content}}}},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"ignore_eos", true}};
}

TEST(V41Serve, AnswersChatCompletionsTheSameAloneTogetherAndFromTheCache) {
  Server server(0, {"--kv-budget-mb", "64", "--max-context", "256"}, V41Tiny());
  const std::vector<std::string> prompts = {"Hello there", "Count from one to ten, please.", "What is a window of attention?",
                                            "Write a haiku about caches."};
  std::vector<std::string> alone;
  for (const std::string& p : prompts) {
    const auto [status, body] = Post(server, "/v1/chat/completions", Chat(p, 24).dump());
    ASSERT_EQ(status, 200) << body.dump() << server.Log();
    EXPECT_EQ(body["usage"]["completion_tokens"], 24);
    EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
    alone.push_back(Text(body));
  }
  EXPECT_NE(alone[0], alone[1]);
  // All four at once: one batch of rows from several sequences per step.
  std::vector<std::string> together(prompts.size());
  std::vector<std::thread> clients;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] { together[i] = Text(Post(server, "/v1/chat/completions", Chat(prompts[i], 24).dump()).second); });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(together, alone);
  // The same prompt again: its prefix comes from the prefix cache, the answer is the same.
  const auto [status, again] = Post(server, "/v1/chat/completions", Chat(prompts[1], 24).dump());
  ASSERT_EQ(status, 200);
  EXPECT_GT(again["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0) << again.dump();
  EXPECT_EQ(Text(again), alone[1]);
}

// DSpark drafts are verified by the target: the same greedy and seeded sampled answers with
// and without them, from a fresh prompt and from a cached prefix; the drafts counted.
TEST(V41Serve, DSparkDraftsChangeNothingButAreVerifiedAndCounted) {
  const std::vector<json> bodies = {
      Chat("Tell me about windows", 32),
      {{"model", "tiny"}, {"prompt", "Count: 1 2 3"}, {"max_tokens", 32}, {"temperature", 0.7}, {"seed", 5}, {"ignore_eos", true}}};
  auto answers = [&](Server& server) {
    std::vector<std::string> out;
    for (int round = 0; round < 2; ++round) {  // the second time from the prefix cache
      for (const json& body : bodies) {
        const bool chat = body.contains("messages");
        const auto [status, reply] = Post(server, chat ? "/v1/chat/completions" : "/v1/completions", body.dump());
        EXPECT_EQ(status, 200) << reply.dump();
        out.push_back(chat ? Text(reply) : reply["choices"][0]["text"].get<std::string>());
      }
    }
    return out;
  };
  Server plain(0, {"--kv-budget-mb", "64", "--max-context", "256", "--draft", "off"}, V41Tiny());
  const std::vector<std::string> expected = answers(plain);
  Server drafting(0, {"--kv-budget-mb", "64", "--max-context", "256", "--draft", "dspark", "--draft-policy", "fixed:2"}, V41Tiny());
  EXPECT_EQ(answers(drafting), expected);
  const json stats = drafting.Stats();
  EXPECT_EQ(stats["draft"]["mode"], "dspark");
  EXPECT_GT(stats["draft"]["verified_drafts"].get<int>(), 50) << stats["draft"].dump();
  // auto picks DSpark for a V4.1 checkpoint that has its stages.
  Server automatic(0, {"--kv-budget-mb", "16", "--max-context", "64"}, V41Tiny());
  EXPECT_EQ(automatic.Stats()["draft"]["mode"], "dspark");
}

TEST(V41Serve, ImageInputIsRefusedByName) {
  Server server(0, {"--kv-budget-mb", "16", "--max-context", "64"}, V41Tiny());
  const json content = {{{"type", "text"}, {"text", "What is this?"}},
                        {{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,AAAA"}}}}};
  const auto [status, body] = Post(server, "/v1/chat/completions", Chat(content, 4).dump());
  EXPECT_EQ(status, 400);
  EXPECT_EQ(body["error"]["param"], "messages[0].content[1]") << body.dump();
  EXPECT_NE(body["error"]["message"].get<std::string>().find("image input is not supported"), std::string::npos) << body.dump();
}

}  // namespace
}  // namespace tandem::testing
