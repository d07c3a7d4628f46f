// The chat-completion SSE reader: any split of the bytes, CRLF framing, comments,
// multi-line data, in-stream errors, and hostile usage fields.
#include "harness/traffic/sse_parser.hpp"

#include <string>

#include <gtest/gtest.h>

namespace tandem::harness {
namespace {

const std::string kStream =
    ": keep-alive\n\n"
    "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n"
    "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"think\"}}]}\n\n"
    "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n"
    "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":null}]}\n\n"
    "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,"
    "\"prompt_tokens_details\":{\"cached_tokens\":1}}}\n\n"
    "data: [DONE]\n\n";

StreamedCompletion ParseAll(const std::string& bytes, std::size_t piece) {
  StreamedCompletion out;
  out.status = 200;
  SseCompletionParser parser(out);
  double now = 1.0;
  for (std::size_t i = 0; i < bytes.size(); i += piece) parser.Feed(std::string_view(bytes).substr(i, piece), now += 1.0);
  return out;
}

TEST(SseParser, SameResultForEverySplitOfTheBytes) {
  for (std::size_t piece : {std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{64}, kStream.size()}) {
    const StreamedCompletion c = ParseAll(kStream, piece);
    EXPECT_TRUE(c.complete()) << piece << " " << c.error;
    EXPECT_EQ(c.content, "Hello");
    EXPECT_EQ(c.reasoning, "think");
    EXPECT_EQ(c.chunks, 3);
    ASSERT_EQ(c.output_gaps.size(), 2u);  // between the 3 deltas that carried text
    for (double g : c.output_gaps) EXPECT_GE(g, 0.0);
    EXPECT_EQ(c.finish_reason, "stop");
    EXPECT_EQ(c.prompt_tokens, 12);
    EXPECT_EQ(c.completion_tokens, 3);
    EXPECT_EQ(c.cached_tokens, 1);
    // Each event is stamped with the time of the piece that completed it.
    EXPECT_GE(c.t_first_content, c.t_first_output);  // reasoning came first
    EXPECT_GE(c.t_finish, c.t_first_content);
    if (piece < 64) {
      EXPECT_GT(c.t_first_content, c.t_first_output);
      EXPECT_GT(c.t_finish, c.t_first_content);
    }
  }
}

// Each of the four things a complete stream needs, missing alone, makes it incomplete: a
// failed sample, never a timing (DESIGN.md).
TEST(SseParser, AStreamLackingOnlyDoneOrOnlyUsageOrOnlyTheFinishIsIncomplete) {
  const auto without = [](const std::string& part) {
    std::string bytes = kStream;
    bytes.erase(bytes.find(part), part.size());
    return ParseAll(bytes, 5);
  };
  EXPECT_TRUE(ParseAll(kStream, 5).complete());
  const StreamedCompletion no_done = without("data: [DONE]\n\n");
  EXPECT_FALSE(no_done.done);
  EXPECT_FALSE(no_done.complete());
  const StreamedCompletion no_usage = without(
      "data: "
      "{\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":1}}}\n\n");
  EXPECT_TRUE(no_usage.done);
  EXPECT_FALSE(no_usage.has_usage);
  EXPECT_FALSE(no_usage.complete());
  const StreamedCompletion no_finish = without("data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n");
  EXPECT_FALSE(no_finish.complete());
  StreamedCompletion not_ok = ParseAll(kStream, 5);
  not_ok.status = 500;
  EXPECT_FALSE(not_ok.complete());
}

// A request whose only token is end-of-sequence streams no text: complete, one token,
// and no t_first_output (0), so it enters no rate (stats::HasDecodeInterval).
TEST(SseParser, AnEndOfSequenceOnlyAnswerIsCompleteWithoutAFirstOutput) {
  const std::string bytes =
      "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":1}}\n\n"
      "data: [DONE]\n\n";
  const StreamedCompletion c = ParseAll(bytes, 3);
  EXPECT_TRUE(c.complete()) << c.error;
  EXPECT_EQ(c.content, "");
  EXPECT_EQ(c.t_first_output, 0.0);
  EXPECT_GT(c.t_finish, 0.0);
}

// Cache accounting as OpenAI (prompt_tokens_details.cached_tokens) and DeepSeek
// (prompt_cache_hit_tokens, prompt_cache_miss_tokens) report it, and a usage without any:
// the prefill and retained-context checks tell "0 cached" from "not reported".
TEST(SseParser, CachedTokensAreReadInEitherDialectAndTheirAbsenceIsKnown) {
  const auto usage = [](const std::string& fields) {
    return ParseAll(
        "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"length\"}]}\n\ndata: {\"choices\":[],"
        "\"usage\":{\"prompt_tokens\":1536,\"completion_tokens\":1" +
            fields + "}}\n\ndata: [DONE]\n\n",
        7);
  };
  const StreamedCompletion openai = usage(",\"prompt_tokens_details\":{\"cached_tokens\":512}");
  EXPECT_TRUE(openai.complete());
  EXPECT_TRUE(openai.has_cached_usage);
  EXPECT_EQ(openai.cached_tokens, 512);
  EXPECT_EQ(openai.cache_miss_tokens, -1);
  const StreamedCompletion deepseek = usage(",\"prompt_cache_hit_tokens\":512,\"prompt_cache_miss_tokens\":1024");
  EXPECT_TRUE(deepseek.has_cached_usage);
  EXPECT_EQ(deepseek.cached_tokens, 512);
  EXPECT_EQ(deepseek.cache_miss_tokens, 1024);
  const StreamedCompletion none = usage("");
  EXPECT_TRUE(none.complete());
  EXPECT_FALSE(none.has_cached_usage);
  EXPECT_EQ(none.cached_tokens, 0);
  const StreamedCompletion zero = usage(",\"prompt_tokens_details\":{\"cached_tokens\":0}");
  EXPECT_TRUE(zero.has_cached_usage);
  EXPECT_NE(usage(",\"prompt_cache_miss_tokens\":-3").error.find("usage with an invalid token count"), std::string::npos);
}

TEST(SseParser, CrlfFramingAndDataWithoutSpace) {
  std::string crlf;
  for (char ch : kStream) {
    if (ch == '\n')
      crlf += "\r\n";
    else
      crlf += ch;
  }
  std::string nospace = kStream;
  for (std::size_t at; (at = nospace.find("data: ")) != std::string::npos;) nospace.replace(at, 6, "data:");
  for (const std::string& bytes : {crlf, nospace}) {
    const StreamedCompletion c = ParseAll(bytes, 5);
    EXPECT_TRUE(c.complete()) << c.error;
    EXPECT_EQ(c.content, "Hello");
  }
}

TEST(SseParser, MultiLineDataIsJoined) {
  const StreamedCompletion c = ParseAll("data: {\"choices\":[{\"delta\":\ndata: {\"content\":\"x\"}}]}\n\n", 3);
  EXPECT_EQ(c.content, "x");
  EXPECT_TRUE(c.error.empty()) << c.error;
}

TEST(SseParser, HostileEventsBecomeErrorsNotCrashes) {
  struct Case {
    std::string bytes, error;
  };
  for (const Case& k : {Case{"data: {not json\n\n", "malformed event"}, Case{"data: [1,2]\n\n", "malformed event"},
                        Case{"data: {\"error\":{\"message\":\"overloaded\"}}\n\n", "overloaded"}, Case{"data: {\"error\":42}\n\n", "42"},
                        Case{"data: {\"usage\":{\"prompt_tokens\":\"12\"}}\n\n", "invalid token count"},
                        Case{"data: {\"usage\":{\"completion_tokens\":-1}}\n\n", "invalid token count"},
                        Case{"data: {\"usage\":{\"completion_tokens\":1e30}}\n\n", "invalid token count"}}) {
    const StreamedCompletion c = ParseAll(k.bytes, 4);
    EXPECT_NE(c.error.find(k.error), std::string::npos) << k.bytes << " → " << c.error;
    EXPECT_FALSE(c.complete());
  }
  // Wrong types where text belongs are ignored, not thrown.
  const StreamedCompletion c =
      ParseAll("data: {\"choices\":[{\"delta\":{\"content\":5},\"finish_reason\":7}]}\n\ndata: {\"choices\":[3]}\n\n", 4);
  EXPECT_TRUE(c.error.empty()) << c.error;
  EXPECT_EQ(c.chunks, 0);
  EXPECT_EQ(c.t_finish, 0);
}

TEST(SseParser, AnHttpErrorBodyIsKeptForTheMessage) {
  StreamedCompletion out;
  SseCompletionParser parser(out);
  parser.Feed("{\"error\":{\"message\":\"prompt too long\"}}", 1.0);
  EXPECT_NE(parser.non_event_text().find("prompt too long"), std::string::npos);
}

}  // namespace
}  // namespace tandem::harness
