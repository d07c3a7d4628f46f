#include "runtime/serve/completion_request.hpp"

#include <gtest/gtest.h>

#include "runtime/model/synthetic_tokenizer.hpp"
#include "runtime/serve/api_error.hpp"
#include "runtime/serve/completion_text.hpp"
#include "runtime/serve/reply_text.hpp"

namespace tandem::rt {
namespace {

std::pair<int, std::string> ErrorOf(const std::string& body, Endpoint endpoint = Endpoint::kChatCompletions) {
  try {
    ParseCompletionRequest(body, endpoint, 100);
  } catch (const ApiError& e) {
    return {e.status(), e.what()};
  }
  return {0, "(no error)"};
}

TEST(CompletionRequest, ParsesTheOpenAIFields) {
  const CompletionRequest r = ParseCompletionRequest(
      R"({"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"}]}],
          "max_completion_tokens":7,"temperature":0.5,"top_p":0.9,"top_k":40,"min_p":0.05,"seed":3,"stop":["\n\n"],
          "stream":true,"stream_options":{"include_usage":true},"user":"ignored","n":1})",
      Endpoint::kChatCompletions, 100);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "hi");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_EQ(r.sampling.seed, 3u);
  EXPECT_TRUE(r.seeded);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n\n"});
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);

  const CompletionRequest t = ParseCompletionRequest(R"({"prompt":[1,2,3],"max_tokens":2})", Endpoint::kCompletions, 100);
  EXPECT_TRUE(t.prompt_is_tokens);
  EXPECT_EQ(t.prompt_tokens, (std::vector<TokenId>{1, 2, 3}));
  EXPECT_FLOAT_EQ(t.sampling.temperature, 1.0f) << "OpenAI's default";
  EXPECT_FALSE(t.seeded);
}

TEST(CompletionRequest, BadInputIsA400NamingTheField) {
  EXPECT_EQ(ErrorOf("{not json").first, 400);
  EXPECT_EQ(ErrorOf("[1,2]").second, "the body must be a JSON object");
  EXPECT_EQ(ErrorOf(R"({"messages":[]})").second, "'messages' must be a non-empty list");
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"robot","content":"x"}]})").second,
            "'messages[0].role' 'robot' is not system, user or assistant");
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user"}]})").second, "'messages[0].content' is missing");
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":"x"}],"temperature":"hot"})").second, "'temperature' must be a number");
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":"x"}],"temperature":7})").second, "'temperature' must be in [0, 2], got 7");
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":1e30})").second,
            "'max_tokens' must be an integer, got 1e+30");
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":18446744073709551615})").first, 400);
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":0})").second,
            "'max_tokens' must be in [1, 1073741824], got 0");
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":"x"}],"n":2})").second, "'n' must be 1: one choice per request");
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":"x"}],"stop":["a","b","c","d","e"]})").second,
            "'stop' must be a string or a list of up to 4 strings");
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true})").second, "'logprobs' is not supported");
  // Tool, function and log-probability fields are refused alike (tool_choice, functions and
  // top_logprobs were silently ignored); their "off" values pass.
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"auto"})").second,
            "'tool_choice' is not supported (no tools are; only \"none\")");
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"function","function":{"name":"f"}}})").first,
            400);
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":"x"}],"functions":[{"name":"f"}]})").second, "'functions' are not supported");
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":"x"}],"function_call":"auto"})").first, 400);
  EXPECT_EQ(ErrorOf(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":3})").second,
            "'top_logprobs' is not supported (logprobs are not)");
  EXPECT_NO_THROW(ParseCompletionRequest(
      R"({"messages":[{"role":"user","content":"x"}],"tools":[],"tool_choice":"none","functions":null,"logprobs":false,"top_logprobs":0})",
      Endpoint::kChatCompletions, 100));
  EXPECT_EQ(ErrorOf(R"({"prompt":[1,200]})", Endpoint::kCompletions).second, "'prompt[1]' must be a token id in [0, 100)");
  EXPECT_EQ(ErrorOf("{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}").first, 400) << "invalid UTF-8";
}

TEST(CompletionRequest, ResponseFormatCompilesOrNamesWhatIsUnsupported) {
  const std::string chat = R"({"messages":[{"role":"user","content":"x"}],"response_format":)";
  EXPECT_EQ(ParseCompletionRequest(chat + R"({"type":"text"}})", Endpoint::kChatCompletions, 100).grammar, nullptr);
  EXPECT_NE(ParseCompletionRequest(chat + R"({"type":"json_object"}})", Endpoint::kChatCompletions, 100).grammar, nullptr);
  const std::string schema = R"({"type":"json_schema","json_schema":{"name":"p","strict":true,"schema":)"
                             R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}}})";
  const CompletionRequest a = ParseCompletionRequest(chat + schema + "}", Endpoint::kChatCompletions, 100);
  const CompletionRequest b = ParseCompletionRequest(chat + schema + "}", Endpoint::kChatCompletions, 100);
  ASSERT_NE(a.grammar, nullptr);
  EXPECT_EQ(a.grammar, b.grammar) << "a schema is compiled once and cached";
  const auto pattern = ErrorOf(chat + R"({"type":"json_schema","json_schema":{"schema":{"type":"string","pattern":"^a"}}}})");
  EXPECT_EQ(pattern.first, 400);
  EXPECT_EQ(pattern.second, "'response_format.json_schema.schema': schema: 'pattern' is not supported by constrained decoding");
  EXPECT_EQ(ErrorOf(chat + R"({"type":"xml"}})").second, "'response_format.type' 'xml' is not text, json_object or json_schema");
  EXPECT_EQ(ErrorOf(chat + R"({"type":"json_schema"}})").second, "'response_format.json_schema' must be an object with a 'schema'");
  EXPECT_EQ(ErrorOf(chat + R"("json"})").second, "'response_format' must be an object with a 'type'");
}

TEST(CompletionText, StopStringsEndTheTextAndAreNeverEmittedInPart) {
  const Tokenizer t = Tokenizer::FromJson(DeriveSyntheticTokenizer("/nonexistent", 0).tokenizer_json, "t");
  CompletionText text(t, {"END", "\n\n"});
  std::string out;
  for (TokenId id : t.Encode("abc EN")) out += text.Push(id);
  EXPECT_EQ(out, "abc ") << "'EN' could begin 'END': held back";
  for (TokenId id : t.Encode("D tail")) out += text.Push(id);
  EXPECT_EQ(out, "abc ");
  EXPECT_TRUE(text.stopped());
  EXPECT_EQ(text.Flush(), "");

  CompletionText unfinished(t, {"END"});
  std::string out2;
  for (TokenId id : t.Encode("xyz EN")) out2 += unfinished.Push(id);
  out2 += unfinished.Flush();
  EXPECT_EQ(out2, "xyz EN") << "a stop string that never completed is ordinary text";
}

TEST(ReplyText, ThinkingSplitsReasoningFromContentAtTheClosingToken) {
  const Tokenizer t = Tokenizer::FromJson(DeriveSyntheticTokenizer("/nonexistent", 0).tokenizer_json, "t");
  const std::optional<TokenId> end = t.Find("</think>");
  ASSERT_TRUE(end.has_value()) << "the synthetic tokenizers carry the think markers";
  ReplyText reply(t, {"STOP"}, *end);
  std::string reasoning, content;
  const auto take = [&](const std::vector<ReplyText::Piece>& pieces) {
    for (const ReplyText::Piece& p : pieces) (p.reasoning ? reasoning : content) += p.text;
  };
  std::vector<TokenId> tokens = t.Encode("let me think STOP");
  const auto thought = static_cast<int>(tokens.size());
  tokens.push_back(*end);
  for (TokenId id : t.Encode("the answer")) tokens.push_back(id);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_EQ(reply.reasoning(), static_cast<int>(i) <= thought) << "inside the block up to its closing token, token " << i;
    take(reply.Push(tokens[i]));
  }
  take(reply.Flush());
  EXPECT_EQ(reasoning, "let me think STOP") << "stop strings do not apply inside the think block";
  EXPECT_EQ(content, "the answer");
  EXPECT_EQ(reply.reasoning_tokens(), thought + 1) << "the closing token counts as reasoning";
  EXPECT_FALSE(reply.reasoning());

  ReplyText plain(t, {}, -1);
  EXPECT_FALSE(plain.reasoning());
  std::string all;
  for (TokenId id : t.Encode("no block")) {
    for (const ReplyText::Piece& p : plain.Push(id)) all += p.reasoning ? "?" : p.text;
  }
  EXPECT_EQ(all, "no block");
  EXPECT_EQ(plain.reasoning_tokens(), 0);
}

TEST(CompletionRequest, ThinkingIsOffByDefaultAndEnabledEitherWay) {
  const std::string chat = R"({"messages":[{"role":"user","content":"x"}])";
  EXPECT_FALSE(ParseCompletionRequest(chat + "}", Endpoint::kChatCompletions, 100).thinking);
  EXPECT_TRUE(ParseCompletionRequest(chat + R"(,"thinking":{"type":"enabled"}})", Endpoint::kChatCompletions, 100).thinking);
  EXPECT_FALSE(ParseCompletionRequest(chat + R"(,"thinking":{"type":"disabled"}})", Endpoint::kChatCompletions, 100).thinking);
  EXPECT_TRUE(ParseCompletionRequest(chat + R"(,"reasoning_effort":"low"})", Endpoint::kChatCompletions, 100).thinking);
  EXPECT_EQ(ErrorOf(chat + R"(,"thinking":true})").second, "'thinking' must be {\"type\": \"enabled\"} or {\"type\": \"disabled\"}");
  EXPECT_EQ(ErrorOf(chat + R"(,"reasoning_effort":"max"})").second, "'reasoning_effort' must be low, medium or high");
}

}  // namespace
}  // namespace tandem::rt
