// `tandem-rt serve` end to end: a real server process, real expert workers on
// loopback ports chosen at run time, and an HTTP client.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <httplib.h>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/runtime/tiny_model.hpp"
#include "tests/serve/test_server.hpp"
#include "tests/support/child_process.hpp"

namespace tandem::rt {
namespace {

using nlohmann::json;
using tandem::testing::ChildProcess;
using tandem::testing::Post;
using tandem::testing::Server;
using tandem::testing::TempDir;
using tandem::testing::Text;
using namespace std::chrono_literals;

json Chat(const std::string& text, int max_tokens, bool stream = false) {
  json body = {{"model", "tiny"},
               {"messages", {{{"role", "user"}, {"content", text}}}},
               {"max_tokens", max_tokens},
               {"temperature", 0},
               {"ignore_eos", true}};
  if (stream) {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  }
  return body;
}

struct Streamed {
  int status = 0;
  std::vector<json> events;
  bool done = false;  // saw data: [DONE]
  std::string text;
  json usage;
  std::string finish_reason;
};

// POSTs and reads the SSE stream; `keep_reading(chunks so far)` may stop early (disconnect).
Streamed Stream(
    Server& server, const json& body, const std::function<bool(int)>& keep_reading = [](int) { return true; }) {
  Streamed out;
  auto client = server.Client();
  std::string buffer;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, std::size_t len, std::uint64_t, std::uint64_t) {
    buffer.append(data, len);
    std::size_t end;
    while ((end = buffer.find("\n\n")) != std::string::npos) {
      const std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      EXPECT_EQ(event.rfind("data: ", 0), 0u) << "every SSE event is a data line: " << event;
      const std::string payload = event.substr(6);
      EXPECT_FALSE(out.done) << "nothing may follow [DONE]";
      if (payload == "[DONE]") {
        out.done = true;
        continue;
      }
      json j = json::parse(payload);
      if (j.contains("choices") && !j["choices"].empty()) {
        const json& c = j["choices"][0];
        if (c["delta"].contains("content")) out.text += c["delta"]["content"].get<std::string>();
        if (!c["finish_reason"].is_null()) out.finish_reason = c["finish_reason"];
      }
      if (j.contains("usage")) out.usage = j["usage"];
      out.events.push_back(std::move(j));
    }
    return keep_reading(static_cast<int>(out.events.size()));
  };
  httplib::Response res;
  httplib::Error error;
  client.send(req, res, error);
  out.status = res.status;
  return out;
}

class ServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new Server(4); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static Server* server_;
};
Server* ServeTest::server_ = nullptr;

TEST_F(ServeTest, HealthModelsAndStats) {
  auto health = server_->Client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto models = server_->Client().Get("/v1/models");
  ASSERT_TRUE(models);
  const json m = json::parse(models->body);
  EXPECT_EQ(m["data"][0]["id"], "tiny");
  EXPECT_EQ(m["data"][0]["model_revision"].get<std::string>().size(), 64u);
  EXPECT_FALSE(m["data"][0]["runtime_revision"].get<std::string>().empty());
  EXPECT_EQ(m["data"][0]["max_context"], 2048);
  const json stats = server_->Stats();
  EXPECT_EQ(stats["workers"].size(), 4u);
  EXPECT_TRUE(stats["healthy"].get<bool>());
  // Its own startup: each phase after the one before, from the process's start; the weights it opened.
  const json& startup = stats["startup"];
  std::vector<std::string> phases;
  double last = 0;
  for (const json& p : startup["phases"]) {
    phases.push_back(p[0]);
    EXPECT_GE(p[1].get<double>(), last) << startup.dump();
    last = p[1];
  }
  EXPECT_EQ(phases, (std::vector<std::string>{"listening", "checkpoint_opened", "engine_loaded", "warmed_up", "ready"})) << startup.dump();
  EXPECT_GT(startup["phases"][0][1].get<double>(), 0.0) << "the time before main counts";
  EXPECT_GE(startup["weight_files"].get<int>(), 1);
  EXPECT_GT(startup["weight_bytes"].get<double>(), 1e5);
}

// httplib listens with a backlog of 5; a concurrency-16 batch connecting at once then lost
// SYNs and waited a second to retry. The server widens it: `ss` shows the listening
// socket's backlog as its Send-Q.
TEST_F(ServeTest, TheListenBacklogHoldsAWholeConcurrentBatch) {
  const std::string address = server_->address();
  const std::string port = address.substr(address.rfind(':') + 1);
  FILE* ss = ::popen(("ss -Hltn 'sport = :" + port + "'").c_str(), "r");
  ASSERT_NE(ss, nullptr);
  char line[512] = {};
  const bool got = std::fgets(line, sizeof line, ss) != nullptr;
  ::pclose(ss);
  ASSERT_TRUE(got) << "ss printed no listening socket on port " << port << " (iproute2's ss is needed)";
  std::istringstream fields(line);
  std::string state;
  long recv_q = 0, send_q = 0;
  fields >> state >> recv_q >> send_q;
  EXPECT_EQ(state, "LISTEN") << line;
  EXPECT_GE(send_q, 128) << line;
}

TEST_F(ServeTest, SseFramingOrderAndUsage) {
  const Streamed s = Stream(*server_, Chat("Tell me about SSE.", 9, true));
  EXPECT_EQ(s.status, 200);
  ASSERT_GE(s.events.size(), 4u);
  EXPECT_EQ(s.events.front()["choices"][0]["delta"]["role"], "assistant") << "the first chunk names the role";
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.finish_reason, "length");
  EXPECT_TRUE(s.events.back()["choices"].empty()) << "usage comes last, with no choices";
  EXPECT_EQ(s.usage["completion_tokens"], 9) << "usage counts the tokens generated";
  EXPECT_EQ(s.usage["total_tokens"], s.usage["prompt_tokens"].get<int>() + 9);
  // The same request without streaming gives the same text and usage.
  const auto [status, full] = Post(*server_, "/v1/chat/completions", Chat("Tell me about SSE.", 9).dump());
  ASSERT_EQ(status, 200);
  EXPECT_EQ(Text(full), s.text);
  EXPECT_EQ(full["usage"]["completion_tokens"], 9);
  EXPECT_EQ(full["choices"][0]["finish_reason"], "length");
}

TEST_F(ServeTest, SixteenConcurrentStreamsMatchTheirSoloOutputs) {
  std::vector<std::string> alone(16), together(16);
  for (int i = 0; i < 16; ++i) {
    const auto [status, r] = Post(*server_, "/v1/chat/completions", Chat(fmt::format("Prompt number {} of 16", i), 24).dump());
    ASSERT_EQ(status, 200);
    alone[i] = Text(r);
  }
  std::vector<std::thread> threads;
  std::vector<int> finished(16);
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      const Streamed s = Stream(*server_, Chat(fmt::format("Prompt number {} of 16", i), 24, true));
      together[i] = s.text;
      finished[i] = s.done ? 1 : 0;
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(finished[i], 1) << i;
    EXPECT_EQ(together[i], alone[i]) << "stream " << i << " changed when batched with 15 others";
  }
}

TEST_F(ServeTest, RepeatedPromptHitsThePrefixCacheWithoutChangingOutput) {
  const json body = Chat("A system prompt that repeats, followed by a question about caches.", 16);
  const auto [s1, first] = Post(*server_, "/v1/chat/completions", body.dump());
  const auto [s2, second] = Post(*server_, "/v1/chat/completions", body.dump());
  ASSERT_EQ(s1, 200);
  ASSERT_EQ(s2, 200);
  EXPECT_EQ(Text(first), Text(second));
  const int prompt = second["usage"]["prompt_tokens"];
  EXPECT_EQ(second["usage"]["prompt_tokens_details"]["cached_tokens"], prompt - 1) << "all but the last prompt token";
  EXPECT_EQ(second["usage"]["prompt_cache_hit_tokens"], prompt - 1);
  EXPECT_EQ(second["usage"]["prompt_cache_miss_tokens"], 1);
}

TEST_F(ServeTest, DisconnectCancelsAndFreesTheSlot) {
  const json before = server_->Stats();
  const Streamed s = Stream(*server_, Chat("Keep talking for a long time.", 1500, true), [](int events) { return events < 4; });
  EXPECT_FALSE(s.done);
  json after;
  for (int i = 0; i < 100; ++i) {
    after = server_->Stats();
    if (after["requests"]["cancelled"] > before["requests"]["cancelled"] && after["requests"]["active"] == 0) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(after["requests"]["cancelled"].get<int>(), before["requests"]["cancelled"].get<int>() + 1);
  EXPECT_EQ(after["requests"]["active"], 0);
  EXPECT_LT(after["tokens"]["completion"].get<int>() - before["tokens"]["completion"].get<int>(), 1500) << "it stopped early";
}

TEST_F(ServeTest, ErrorsHaveTheirStatusAndOpenAIShape) {
  struct Case {
    std::string path, body;
    int status;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"/v1/chat/completions", "{not json", 400, "not valid JSON"},
      {"/v1/chat/completions", R"({"messages":"hi"})", 400, "'messages' must be a non-empty list"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"top_p":"most"})", 400, "'top_p' must be a number"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"max_tokens":2047})", 400, "exceeds the context of 2048"},
      {"/v1/chat/completions", R"({"model":"gpt-9","messages":[{"role":"user","content":"x"}]})", 404, "'gpt-9' does not exist"},
      {"/v1/completions", R"({"prompt":[1,99999]})", 400, "must be a token id"},
      {"/v1/nothing", "{}", 404, "no route POST /v1/nothing"},
  };
  for (const Case& c : cases) {
    const auto [status, body] = Post(*server_, c.path, c.body);
    EXPECT_EQ(status, c.status) << c.body;
    ASSERT_TRUE(body.contains("error")) << c.body;
    EXPECT_NE(body["error"]["message"].get<std::string>().find(c.message), std::string::npos) << body.dump();
    EXPECT_TRUE(body["error"].contains("type"));
  }
  EXPECT_GE(server_->Stats()["requests"]["invalid"].get<int>(), 6);
}

TEST_F(ServeTest, JsonSchemaResponseFormatGivesAMatchingObject) {
  json body = Chat("A book, as JSON.", 200);
  body.erase("ignore_eos");
  body["response_format"] = json::parse(R"({"type": "json_schema", "json_schema": {"name": "book", "strict": true, "schema":
      {"type": "object", "additionalProperties": false, "required": ["title", "year", "tags"],
       "properties": {"title": {"type": "string", "maxLength": 12}, "year": {"type": "integer"},
                      "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 2}}}}})");
  const auto [status, reply] = Post(*server_, "/v1/chat/completions", body.dump());
  ASSERT_EQ(status, 200) << reply.dump();
  const std::string text = Text(reply);
  // Greedy on fixed weights: this reply completes the object well within 200 tokens.
  ASSERT_EQ(reply["choices"][0]["finish_reason"], "stop") << text;
  const json book = json::parse(text);
  EXPECT_TRUE(book["title"].is_string() && book["year"].is_number_integer() && book["tags"].is_array()) << text;
  const auto [bad, error] = Post(*server_, "/v1/chat/completions",
                                 R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":)"
                                 R"({"schema":{"type":"object","properties":{"a":{"format":"date"}},"additionalProperties":false}}}})");
  EXPECT_EQ(bad, 400);
  EXPECT_NE(error.dump().find("schema.properties.a: 'format' is not supported"), std::string::npos) << error.dump();
}

TEST_F(ServeTest, ThinkingStreamsReasoningContentAndCountsItsTokens) {
  json body = Chat("Think first.", 12, true);
  body["thinking"] = {{"type", "enabled"}};
  const Streamed s = Stream(*server_, body);
  ASSERT_EQ(s.status, 200);
  std::string reasoning;
  for (const json& e : s.events) {
    if (e.contains("choices") && !e["choices"].empty() && e["choices"][0]["delta"].contains("reasoning_content")) {
      reasoning += e["choices"][0]["delta"]["reasoning_content"].get<std::string>();
    }
  }
  const int thought = s.usage["completion_tokens_details"]["reasoning_tokens"];
  EXPECT_GT(thought, 0);
  EXPECT_LE(thought, 12);
  EXPECT_FALSE(reasoning.empty()) << "the think block streams as reasoning_content";
  if (thought == 12) {
    EXPECT_TRUE(s.text.empty()) << "still thinking when the tokens ran out: no content";
  }
  // Without thinking nothing is reasoning.
  const Streamed plain = Stream(*server_, Chat("Think first.", 12, true));
  EXPECT_EQ(plain.usage["completion_tokens_details"]["reasoning_tokens"], 0);
  EXPECT_EQ(Post(*server_, "/v1/completions", R"({"prompt":"x","thinking":{"type":"enabled"}})").first, 400);
}

TEST_F(ServeTest, MalformedBodiesNeverHurtTheServer) {
  std::mt19937 rng(11);
  const std::vector<std::string> pieces = {"{",
                                           "}",
                                           "[",
                                           "]",
                                           "\"messages\"",
                                           ":",
                                           ",",
                                           "\"role\"",
                                           "\"user\"",
                                           "\"content\"",
                                           "1e400",
                                           "-1",
                                           "18446744073709551616",
                                           "null",
                                           "true",
                                           "\"\xff\xfe\"",
                                           "\"max_tokens\"",
                                           "\"temperature\"",
                                           "\"stream\"",
                                           "0.5",
                                           "\"prompt\"",
                                           "[1,2]"};
  int responses = 0;
  for (int i = 0; i < 300; ++i) {
    std::string body;
    const int n = 1 + static_cast<int>(rng() % 24);
    for (int k = 0; k < n; ++k) body += pieces[rng() % pieces.size()];
    const auto [status, reply] = Post(*server_, i % 2 ? "/v1/chat/completions" : "/v1/completions", body);
    if (status != 0) ++responses;
    EXPECT_TRUE(status == 400 || status == 200) << status << " for " << body;
  }
  EXPECT_EQ(responses, 300);
  auto health = server_->Client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST(Serve, ApiKeyIsRequiredWhenSet) {
  Server server(0, {"--api-key", "sesame"});
  const std::string body = Chat("x", 2).dump();
  auto missing = Post(server, "/v1/chat/completions", body);
  EXPECT_EQ(missing.first, 401);
  EXPECT_EQ(missing.second["error"]["type"], "authentication_error");
  EXPECT_EQ(Post(server, "/v1/chat/completions", body, {{"Authorization", "Bearer wrong"}}).first, 401);
  EXPECT_EQ(Post(server, "/v1/chat/completions", body, {{"Authorization", "Bearer sesame"}}).first, 200);
  auto health = server.Client().Get("/health");
  EXPECT_EQ(health->status, 200) << "health needs no key";
}

TEST(Serve, AFullQueueOrAnExpiredWaitIs429WithRetryAfter) {
  // The slot must stay busy past the queued request's 300 ms wait however fast the host
  // decodes: decode slowed tenfold (1800 tokens of the tiny model took under 0.6 s on a
  // Zen 4 core), and the stream dropped once the two answers are in.
  Server server(0, {"--concurrency", "1", "--queue-depth", "1", "--queue-wait-ms", "300", "--debug-slowdown", "0.9"});
  std::atomic<bool> answered{false};
  std::thread busy([&] { Stream(server, Chat("occupy the only slot", 1800, true), [&](int) { return !answered.load(); }); });
  std::this_thread::sleep_for(300ms);
  std::pair<int, json> waited;
  std::thread queued([&] { waited = Post(server, "/v1/chat/completions", Chat("wait", 2).dump()); });
  std::this_thread::sleep_for(100ms);
  auto full = server.Client().Post("/v1/chat/completions", Chat("no room", 2).dump(), "application/json");
  queued.join();
  answered = true;
  busy.join();
  ASSERT_TRUE(full);
  EXPECT_EQ(full->status, 429);
  EXPECT_EQ(full->get_header_value("Retry-After"), "1");
  EXPECT_NE(full->body.find("the queue is full"), std::string::npos);
  EXPECT_EQ(waited.first, 429);
  EXPECT_NE(waited.second.dump().find("no slot became free within 300 ms"), std::string::npos);
}

// A worker that dies fails the streams it was serving with an error naming it, then
// the server stops with code 3 saying which rank failed and why (a supervisor restarts
// it; the new process reconnects), rather than staying up unable to serve.
TEST(Serve, KillingAWorkerFailsStreamsCleanlyThenTheServerStopsWithCode3NamingTheRank) {
  // Decode slowed tenfold: 1800 tokens with 4 loopback workers could end within the
  // 400 ms before the kill on a fast core, and the stream then finished cleanly.
  Server server(4, {"--round-trip-timeout-ms", "3000", "--debug-slowdown", "0.9"});
  Streamed s;
  std::thread reader([&] { s = Stream(server, Chat("a long answer please", 1800, true)); });
  std::this_thread::sleep_for(400ms);
  server.workers()[2].process->Kill();
  reader.join();
  EXPECT_EQ(s.status, 200);
  EXPECT_FALSE(s.done) << "a failed stream has no [DONE]";
  ASSERT_FALSE(s.events.empty());
  ASSERT_TRUE(s.events.back().contains("error"));
  EXPECT_NE(s.events.back()["error"]["message"].get<std::string>().find("expert worker rank 3"), std::string::npos)
      << s.events.back().dump();
  const auto exit = server.process().WaitExit(10s);
  ASSERT_TRUE(exit.has_value()) << "the server must not stay up unable to serve";
  EXPECT_EQ(*exit, 3);
  const std::string log = server.Log();
  EXPECT_NE(
      log.find(fmt::format("tandem-rt serve: stopped serving: the engine failed: expert worker rank 3 ({})", server.workers()[2].address)),
      std::string::npos)
      << log;
  EXPECT_NE(log.find("tandem-rt: error: stopped serving: "), std::string::npos) << log;
}

// The pids of `pid`'s children started by its main thread.
std::vector<int> ChildrenOf(int pid) {
  std::ifstream in(fmt::format("/proc/{}/task/{}/children", pid, pid));
  std::vector<int> children;
  for (int child; in >> child;) children.push_back(child);
  return children;
}

TEST(Serve, ASpawnedWorkerThatDiesIsReapedAndStopsTheServerSayingHow) {
  Server server(0, {"--spawn-workers", "2"});
  const std::vector<int> workers = ChildrenOf(server.process().pid());
  ASSERT_EQ(workers.size(), 2u);
  ASSERT_EQ(::kill(workers[0], SIGKILL), 0);
  // Idle: no request notices the closed connection, the server notices its child.
  const auto exit = server.process().WaitExit(10s);
  ASSERT_TRUE(exit.has_value()) << "a server whose worker died must not wait for the next request to find out";
  EXPECT_EQ(*exit, 3);
  const std::string log = server.Log();
  EXPECT_NE(log.find(fmt::format("stopped serving: the spawned expert worker 127.0.0.1:")), std::string::npos) << log;
  EXPECT_NE(log.find(fmt::format("(pid {}) was killed by signal 9 (SIGKILL)", workers[0])), std::string::npos) << log;
  for (int pid : workers) {
    EXPECT_NE(::kill(pid, 0), 0) << "worker " << pid << " is left running, or a zombie nobody reaps";
  }
}

// A worker that stops answering (SIGSTOP) without closing its connection: once it is
// late (--rank-late-ms) /health says degraded and names it; /v1/stats still answers at
// once, from the last reading, marked so; when it answers again, all is as before.
TEST(Serve, ALateWorkerMakesHealthDegradedWhileStatsAnswerAtOnce) {
  // Decode slowed twofold (a slowdown multiplies the stalled step too: keep it small).
  Server server(2, {"--rank-late-ms", "300", "--round-trip-timeout-ms", "20000", "--debug-slowdown", "0.5"});
  ASSERT_EQ(server.Stats()["live"], true);
  Streamed s;
  std::thread reader([&] { s = Stream(server, Chat("a long answer please", 1500, true)); });
  std::this_thread::sleep_for(300ms);
  server.workers()[1].process->Pause();
  std::this_thread::sleep_for(1s);
  auto health = server.Client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  const std::string status = json::parse(health->body)["status"];
  EXPECT_EQ(status.rfind(fmt::format("degraded: expert worker rank 2 ({}) has not answered layer ", server.workers()[1].address), 0), 0u)
      << status;
  EXPECT_NE(status.find("--round-trip-timeout-ms 20000 ends the wait"), std::string::npos) << status;
  const auto t0 = std::chrono::steady_clock::now();
  const json stats = server.Stats();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << "/v1/stats must not wait for the late rank";
  EXPECT_EQ(stats["live"], false) << stats.dump();
  EXPECT_TRUE(stats["stale_s"].is_number()) << stats.dump();
  EXPECT_EQ(stats["requests"]["active"], 0) << "the last reading was taken before the request started";
  server.workers()[1].process->Resume();
  reader.join();
  EXPECT_TRUE(s.done) << "the stream goes on once the worker answers";
  health = server.Client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200) << health->body;
  EXPECT_EQ(server.Stats()["live"], true);
}

TEST(Serve, SigtermDrainsInFlightStreamsAndExitsZero) {
  Server server(0, {"--drain-timeout-s", "30"});
  Streamed s;
  std::thread reader([&] { s = Stream(server, Chat("finish me", 200, true)); });
  std::this_thread::sleep_for(200ms);
  server.process().Signal(SIGTERM);
  reader.join();
  EXPECT_TRUE(s.done) << "the in-flight stream completes";
  EXPECT_EQ(s.usage["completion_tokens"], 200);
  const auto exit = server.process().WaitExit(20s);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(*exit, 0);
}

}  // namespace
}  // namespace tandem::rt
