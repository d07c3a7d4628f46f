// `tandem-rt serve` against hostile and careless clients: bodies that nest
// or repeat without bound, bodies that are not JSON, cross-origin pages, slow and
// greedy clients, a drain that runs out of time, a malformed --listen, API keys.
// Every test runs a real server on a loopback port chosen at run time.
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/runtime/tiny_model.hpp"
#include "tests/serve/test_server.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/run_command.hpp"

namespace tandem::rt {
namespace {

using nlohmann::json;
using tandem::testing::Post;
using tandem::testing::Server;
using tandem::testing::TempDir;
using namespace std::chrono_literals;

const std::string kChatPrefix = R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":2,)";

// A raw TCP connection to the server, for clients httplib's own client would not be.
class RawClient {
 public:
  explicit RawClient(const std::string& address) {
    const auto colon = address.rfind(':');
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
    ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawClient() { ::close(fd_); }
  bool connected() const { return connected_; }
  bool Send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  // What the server sent within `timeout`; `closed` is set when it closed the connection.
  std::string Receive(std::chrono::milliseconds timeout, bool* closed = nullptr) {
    std::string out;
    const auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
      pollfd p{fd_, POLLIN, 0};
      if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) break;
      char buffer[4096];
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) {
        if (closed != nullptr) *closed = true;
        break;
      }
      out.append(buffer, static_cast<std::size_t>(n));
    }
    return out;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

std::string Nested(int depth, const std::string& open, const std::string& inner, const std::string& close) {
  std::string s;
  s.reserve(static_cast<std::size_t>(depth) * (open.size() + close.size()) + inner.size());
  for (int i = 0; i < depth; ++i) s += open;
  s += inner;
  for (int i = 0; i < depth; ++i) s += close;
  return s;
}

httplib::Result PostAs(Server& server, const std::string& content_type, const std::string& body, const httplib::Headers& headers = {}) {
  return server.Client().Post("/v1/chat/completions", headers, body, content_type.c_str());
}

// A long streamed chat request on its own thread: its bytes go to `body`, `error` says how
// the transfer ended; returns once the first bytes arrived (or after 20 s).
std::thread LongStream(Server& server, std::string& body, httplib::Error& error) {
  auto streaming = std::make_shared<std::atomic<bool>>(false);
  std::thread reader([&server, &body, &error, streaming] {
    auto client = server.Client();
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/chat/completions";
    req.body =
        json{{"messages", {{{"role", "user"}, {"content", "a long one"}}}}, {"max_tokens", 1800}, {"ignore_eos", true}, {"stream", true}}
            .dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&body, streaming](const char* data, std::size_t len, std::uint64_t, std::uint64_t) {
      body.append(data, len);
      *streaming = true;
      return true;
    };
    httplib::Response res;
    client.send(req, res, error);
  });
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!*streaming && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  return reader;
}

class ServeHardening : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new Server(0, {"--allow-origin", "http://app.example"}); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static Server* server_;
};
Server* ServeHardening::server_ = nullptr;

TEST_F(ServeHardening, DeeplyNestedBodiesAreRefusedNamingTheLimit) {
  // A 60,000-deep array followed by another key overflowed the stack (exit 139) while
  // the parsed body was copied; a schema nested 10,000 deep did so in the compiler.
  const std::string deep_array = R"({"x":)" + Nested(60000, "[", "", "]") + R"(,"messages":[{"role":"user","content":"hi"}]})";
  const auto [array_status, array_reply] = Post(*server_, "/v1/chat/completions", deep_array);
  EXPECT_EQ(array_status, 400);
  EXPECT_NE(array_reply.dump().find("deeper than 64 levels"), std::string::npos) << array_reply.dump();

  const std::string deep_schema = kChatPrefix + R"("response_format":{"type":"json_schema","json_schema":{"name":"n","schema":)" +
                                  Nested(10000, R"({"type":"array","items":)", R"({"type":"string"})", "}") + "}}}";
  const auto [schema_status, schema_reply] = Post(*server_, "/v1/chat/completions", deep_schema);
  EXPECT_EQ(schema_status, 400);
  EXPECT_NE(schema_reply.dump().find("deeper than"), std::string::npos) << schema_reply.dump();

  // Within the body's limit, a schema still may not nest beyond the compiler's.
  const std::string schema_17 = kChatPrefix + R"("response_format":{"type":"json_schema","json_schema":{"name":"n","schema":)" +
                                Nested(17, R"({"type":"array","items":)", R"({"type":"string"})", "}") + "}}}";
  const auto [status_17, reply_17] = Post(*server_, "/v1/chat/completions", schema_17);
  EXPECT_EQ(status_17, 400);
  EXPECT_NE(reply_17.dump().find("schemas nest deeper than 16 levels"), std::string::npos) << reply_17.dump();

  auto health = server_->Client().Get("/health");
  ASSERT_TRUE(health) << "the server survived";
  EXPECT_EQ(health->status, 200);
}

TEST_F(ServeHardening, ManyKeysOrManyRequiredPropertiesAreRefusedNotParsedForSeconds) {
  // 120,000 keys cost 12 s of CPU (ordered objects insert in linear time each).
  std::string keys = "{";
  for (int i = 0; i < 120000; ++i) keys += fmt::format(R"("k{}":0,)", i);
  keys += R"("messages":[{"role":"user","content":"hi"}],"max_tokens":2})";
  const auto [keys_status, keys_reply] = Post(*server_, "/v1/chat/completions", keys);
  EXPECT_EQ(keys_status, 400);
  EXPECT_NE(keys_reply.dump().find("more than 256 keys"), std::string::npos) << keys_reply.dump();

  // 40,000 properties, all required: each required name was looked for among all of
  // them (and every property compiled) before the count was checked.
  std::string properties = "{", required = "[";
  for (int i = 0; i < 40000; ++i) {
    properties += fmt::format(R"({}"p{}":{{"type":"string"}})", i ? "," : "", i);
    required += fmt::format(R"({}"p{}")", i ? "," : "", i);
  }
  properties += "}";
  required += "]";
  const std::string schema = kChatPrefix + R"("response_format":{"type":"json_schema","json_schema":{"name":"n","schema":)" +
                             R"({"type":"object","additionalProperties":false,"properties":)" + properties + R"(,"required":)" + required +
                             "}}}}";
  const auto [schema_status, schema_reply] = Post(*server_, "/v1/chat/completions", schema);
  EXPECT_EQ(schema_status, 400);
  EXPECT_NE(schema_reply.dump().find("more than 256 keys"), std::string::npos) << schema_reply.dump().substr(0, 300);
}

TEST_F(ServeHardening, AnArrayOfAMillionObjectsIsParsedInLinearTime) {
  // nlohmann's parser callback (the first depth check) rescanned an array at every
  // object closing in it: a 3 MB body of 2^20 objects took minutes of CPU.
  std::string body = R"({"max_tokens":2,"messages":[)";
  for (int i = 0; i < (1 << 20) - 1; ++i) body += "{},";
  body += "{}]}";
  const auto [status, reply] = Post(*server_, "/v1/chat/completions", body);
  EXPECT_EQ(status, 400) << "answered (within the client's 60 s)";
  EXPECT_NE(reply.dump().find("messages[0].role"), std::string::npos) << reply.dump();
}

TEST_F(ServeHardening, BodiesNotSentAsJsonGet415NamingTheContentType) {
  // `curl -d @file` sends application/x-www-form-urlencoded: a 9 KB body got 413.
  const std::string body = kChatPrefix + R"("stop":")" + std::string(9000, 'a') + R"("})";
  auto form = PostAs(*server_, "application/x-www-form-urlencoded", body);
  ASSERT_TRUE(form);
  EXPECT_EQ(form->status, 415);
  EXPECT_NE(form->body.find("Content-Type 'application/x-www-form-urlencoded' is not supported"), std::string::npos) << form->body;
  EXPECT_NE(form->body.find("Content-Type: application/json"), std::string::npos) << "it says what to send";

  // A browser page may POST text/plain to any origin without asking: never processed.
  auto plain = PostAs(*server_, "text/plain", kChatPrefix + R"("temperature":0})");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->status, 415);
  EXPECT_NE(plain->body.find("'text/plain'"), std::string::npos);

  auto json_charset = PostAs(*server_, "application/json; charset=utf-8", kChatPrefix + R"("temperature":0})");
  ASSERT_TRUE(json_charset);
  EXPECT_EQ(json_charset->status, 200) << json_charset->body;

  RawClient raw(server_->address());
  const std::string small = kChatPrefix + R"("temperature":0})";
  ASSERT_TRUE(
      raw.Send(fmt::format("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\r\n{}", small.size(), small)));
  const std::string reply = raw.Receive(5s);
  EXPECT_EQ(reply.rfind("HTTP/1.1 415", 0), 0u) << reply;
  EXPECT_NE(reply.find("the request has no Content-Type"), std::string::npos) << reply;
}

TEST_F(ServeHardening, CrossOriginPagesGetNoGrantUnlessTheOriginIsAllowed) {
  auto client = server_->Client();
  const httplib::Headers preflight = {
      {"Origin", "http://evil.example"}, {"Access-Control-Request-Method", "POST"}, {"Access-Control-Request-Headers", "content-type"}};
  auto refused = client.Options("/v1/chat/completions", preflight);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 403);
  EXPECT_FALSE(refused->has_header("Access-Control-Allow-Origin"));
  EXPECT_NE(refused->body.find("--allow-origin"), std::string::npos) << refused->body;

  auto granted = client.Options("/v1/chat/completions", {{"Origin", "http://app.example"}, {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(granted);
  EXPECT_EQ(granted->status, 204);
  EXPECT_EQ(granted->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_NE(granted->get_header_value("Access-Control-Allow-Headers").find("Content-Type"), std::string::npos);

  auto allowed_post = PostAs(*server_, "application/json", kChatPrefix + R"("temperature":0})", {{"Origin", "http://app.example"}});
  ASSERT_TRUE(allowed_post);
  EXPECT_EQ(allowed_post->status, 200);
  EXPECT_EQ(allowed_post->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  auto other_post = PostAs(*server_, "application/json", kChatPrefix + R"("temperature":0})", {{"Origin", "http://evil.example"}});
  ASSERT_TRUE(other_post);
  EXPECT_FALSE(other_post->has_header("Access-Control-Allow-Origin")) << "the browser keeps the answer from that page";
}

TEST_F(ServeHardening, APageOnARebindingDomainIsNotThisServer) {
  // attacker.example resolving to 127.0.0.1 is same-origin to the browser: no preflight,
  // no Origin check; only the Host header names the page's domain.
  const std::string body = kChatPrefix + R"("temperature":0})";
  RawClient rebound(server_->address());
  ASSERT_TRUE(
      rebound.Send(fmt::format("POST /v1/chat/completions HTTP/1.1\r\nHost: attacker.example:8000\r\n"
                               "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
                               body.size(), body)));
  const std::string refused = rebound.Receive(5s);
  EXPECT_EQ(refused.rfind("HTTP/1.1 403", 0), 0u) << refused;
  EXPECT_NE(refused.find("Host 'attacker.example:8000' does not name this server"), std::string::npos) << refused;
  for (const std::string host : {"localhost", "127.0.0.1", "app.localhost:9", "[::1]:1"}) {
    RawClient local(server_->address());
    ASSERT_TRUE(local.Send(fmt::format("GET /health HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", host)));
    const std::string reply = local.Receive(5s);
    EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << host << ": " << reply;
  }
}

TEST_F(ServeHardening, CompressedBodiesAndRefusedUploadsNeverReachTheServer) {
  // gzip is inflated before any bound on the body applies: 16 MiB could become 16 GiB.
  auto gzip = PostAs(*server_, "application/json", kChatPrefix + R"("temperature":0})", {{"Content-Encoding", "gzip"}});
  ASSERT_TRUE(gzip);
  EXPECT_EQ(gzip->status, 415);
  EXPECT_NE(gzip->body.find("Content-Encoding 'gzip' is not supported"), std::string::npos) << gzip->body;

  // A client that asks first (Expect: 100-continue, as curl does for large bodies) hears
  // the refusal instead of "100 Continue".
  RawClient asking(server_->address());
  ASSERT_TRUE(
      asking.Send("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
                  "Content-Length: 10000000\r\nExpect: 100-continue\r\n\r\n"));
  const std::string reply = asking.Receive(5s);
  EXPECT_EQ(reply.rfind("HTTP/1.1 415", 0), 0u) << reply;
}

TEST_F(ServeHardening, AHeaderThatNeverEndsIsCutNotBuffered) {
  // httplib buffers a line until its newline, and takes any number of header lines.
  RawClient endless_line(server_->address());
  ASSERT_TRUE(endless_line.Send("GET /health HTTP/1.1\r\nX-Long: "));
  const std::string piece(4096, 'a');
  std::size_t sent = 0;
  while (sent < (8u << 20) && endless_line.Send(piece)) sent += piece.size();
  EXPECT_LT(sent, 8u << 20) << "the server stopped reading a header line long before 8 MiB";

  RawClient endless_headers(server_->address());
  ASSERT_TRUE(endless_headers.Send("GET /health HTTP/1.1\r\n"));
  std::size_t lines = 0;
  while (lines < 200000 && endless_headers.Send(fmt::format("X-Header-{}: {}\r\n", lines, std::string(40, 'b')))) ++lines;
  EXPECT_LT(lines, 200000u) << "the server stopped reading headers long before 10 MB of them";

  auto health = server_->Client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST_F(ServeHardening, AHeadThatHidesWhereItsBodyEndsIsRefusedAndItsConnectionClosed) {
  // httplib read "Content-Length: abc" as 0 and then ran the body as a second request on
  // the same connection; "20abc", "+20", two differing lengths and lines it could not
  // parse (skipped without a word) were taken too.
  const std::string smuggled = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  const std::vector<std::pair<std::string, std::string>> heads = {
      {"Content-Length: abc\r\n", "Content-Length 'abc'"},
      {"Content-Length: 20abc\r\n", "Content-Length '20abc'"},
      {"Content-Length: +20\r\n", "Content-Length '+20'"},
      {"Content-Length: -1\r\n", "Content-Length '-1'"},
      {"Content-Length: 0\r\nContent-Length: 40\r\n", "two Content-Length headers disagree"},
      {"Content-Length: 40\r\nTransfer-Encoding: chunked\r\n", "both Content-Length and Transfer-Encoding"},
      {"Transfer-Encoding: gzip, chunked\r\n", "Transfer-Encoding 'gzip, chunked'"},
      {"Host: evil.example\r\n", "more than one Host"},
      // httplib dropped these lines silently, where a proxy in front may not.
      {"Content-Length:\r\n", "Content-Length ''"},
      {"Content-Length: 40\n", "ends with LF alone"},
      {"NoColonHere\r\n", "is not 'Name: value'"},
      {"X-Note: a\r\n Content-Length: 40\r\n", "is folded"},
  };
  for (const auto& [head, reason] : heads) {
    SCOPED_TRACE(head);
    RawClient raw(server_->address());
    ASSERT_TRUE(raw.connected());
    ASSERT_TRUE(
        raw.Send("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + head + "\r\n" + smuggled));
    bool closed = false;
    const std::string answer = raw.Receive(3s, &closed);
    EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << answer;
    EXPECT_NE(answer.find(reason), std::string::npos) << answer;
    EXPECT_EQ(answer.find("HTTP/1.1", 1), std::string::npos) << "one answer; the hidden request is never run: " << answer;
    EXPECT_TRUE(closed) << "the connection is closed after the refusal";
  }
  // Equal duplicates and leading zeros say the same length: accepted.
  RawClient raw(server_->address());
  ASSERT_TRUE(raw.Send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nContent-Length: 00\r\n\r\n"));
  EXPECT_EQ(raw.Receive(3s).rfind("HTTP/1.1 200", 0), 0u);
}

TEST(ServeLimits, SlowClientsNeitherHoldTheirConnectionNorStarveHealth) {
  // A header line every second: httplib's read timeout restarted with each one, and 40
  // such clients held every handler thread, so /health went unanswered.
  Server server(0, {"--request-timeout-s", "2"});
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 40; ++i) {
    slow.push_back(std::make_unique<RawClient>(server.address()));
    ASSERT_TRUE(slow.back()->connected());
    ASSERT_TRUE(slow.back()->Send("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
  }
  auto client = server.Client();
  client.set_read_timeout(2s);
  const auto started = std::chrono::steady_clock::now();
  auto health = client.Get("/health");
  ASSERT_TRUE(health) << "/health answered while 40 slow clients were connected";
  EXPECT_EQ(health->status, 200);
  int closed_by_server = 0;
  for (int second = 0; second < 5 && closed_by_server < 40; ++second) {
    for (auto& c : slow) c->Send(fmt::format("X-Slow-{}: 1\r\n", second));
    std::this_thread::sleep_for(1s);
  }
  for (auto& c : slow) {
    bool closed = false;
    c->Receive(500ms, &closed);
    closed_by_server += closed;
  }
  EXPECT_EQ(closed_by_server, 40) << "each slow request was cut at its 2 s deadline, "
                                  << std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started).count()
                                  << " s after it began";

  // A body shorter than its Content-Length waited 60 s for the rest.
  RawClient short_body(server.address());
  ASSERT_TRUE(
      short_body.Send("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      "Content-Length: 1000\r\n\r\n{\"messages\":"));
  bool closed = false;
  short_body.Receive(6s, &closed);
  EXPECT_TRUE(closed) << "the server gave up on the missing body";
}

TEST(ServeLimits, ConnectionsPerClientAreCappedWith503) {
  Server server(0, {"--max-connections-per-client", "4"});
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 4; ++i) held.push_back(std::make_unique<RawClient>(server.address()));
  std::this_thread::sleep_for(200ms);
  RawClient fifth(server.address());
  ASSERT_TRUE(fifth.connected());
  bool closed = false;
  const std::string reply = fifth.Receive(3s, &closed);
  EXPECT_EQ(reply.rfind("HTTP/1.1 503", 0), 0u) << reply;
  EXPECT_NE(reply.find("the limit per client"), std::string::npos) << reply;
  EXPECT_NE(reply.find("Retry-After: 1"), std::string::npos) << reply;
  EXPECT_TRUE(closed);
  held.clear();
  std::this_thread::sleep_for(200ms);
  auto health = server.Client().Get("/health");
  ASSERT_TRUE(health) << "a freed slot is usable again";
  EXPECT_EQ(health->status, 200);
}

TEST(ServeLimits, LongStreamsDoNotTakeTheThreadHealthNeeds) {
  // Concurrency 2: 2 streams run, 62 wait in the queue; each held a handler thread.
  Server server(0, {"--concurrency", "2", "--debug-slowdown", "0.5"});
  std::vector<std::thread> streams;
  for (int i = 0; i < 64; ++i) {
    streams.emplace_back([&server, i] {
      auto client = server.Client();
      client.set_read_timeout(60s);
      const json body = {{"messages", {{{"role", "user"}, {"content", fmt::format("stream {}", i)}}}},
                         {"max_tokens", 1500},
                         {"ignore_eos", true},
                         {"stream", true}};
      client.Post("/v1/chat/completions", body.dump(), "application/json");
    });
  }
  std::this_thread::sleep_for(1500ms);
  auto client = server.Client();
  client.set_read_timeout(3s);
  auto health = client.Get("/health");
  auto stats = client.Get("/v1/stats");
  server.process().Kill();  // ends the streams
  for (std::thread& t : streams) t.join();
  ASSERT_TRUE(health) << "/health answered beside 64 open streams";
  EXPECT_EQ(health->status, 200);
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->status, 200);
}

TEST(ServeLimits, ADrainThatRunsOutOfTimeEndsEachStreamWithAnErrorAndTheTerminator) {
  // Decode slowed tenfold and the signal sent once the stream has begun: a fixed wait
  // let the tiny model finish all 1800 tokens first once its attention got faster.
  Server server(0, {"--drain-timeout-s", "0", "--debug-slowdown", "0.9"});
  std::string body;
  httplib::Error error = httplib::Error::Unknown;
  std::thread reader = LongStream(server, body, error);
  server.process().Signal(SIGTERM);
  reader.join();
  EXPECT_EQ(error, httplib::Error::Success) << "the chunked body ended with its terminator, not a cut connection";
  EXPECT_NE(body.find(R"("message":"the server is shutting down")"), std::string::npos)
      << body.substr(body.size() > 400 ? body.size() - 400 : 0);
  EXPECT_EQ(body.find("[DONE]"), std::string::npos) << "an interrupted stream is incomplete";
  const auto exit = server.process().WaitExit(20s);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(*exit, 0);
}

TEST(ServeLimits, ANonStreamingRequestWhoseClientHungUpIsCancelled) {
  // It decoded to its end for nobody and counted as completed.
  Server server(0, {"--debug-slowdown", "0.9"});
  {
    RawClient raw(server.address());
    ASSERT_TRUE(raw.connected());
    const std::string body =
        json{{"messages", {{{"role", "user"}, {"content", "a long one"}}}}, {"max_tokens", 1800}, {"ignore_eos", true}}.dump();
    ASSERT_TRUE(
        raw.Send(fmt::format("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                             "Content-Length: {}\r\n\r\n{}",
                             body.size(), body)));
    std::this_thread::sleep_for(500ms);
  }  // the client hangs up
  json requests = json::object();
  for (int i = 0; i < 50 && requests.value("cancelled", 0) == 0; ++i) {
    std::this_thread::sleep_for(100ms);
    requests = server.Stats()["requests"];
  }
  EXPECT_EQ(requests.value("cancelled", 0), 1) << requests.dump();
  EXPECT_EQ(requests.value("completed", 0), 0) << requests.dump();
}

TEST(ServeLimits, ASecondSigintEndsTheDrainAtOnce) {
  // The second signal was ignored: a 60 s drain ran to its end however often one asked.
  Server server(0, {"--drain-timeout-s", "60", "--debug-slowdown", "0.9"});
  std::string body;
  httplib::Error error = httplib::Error::Unknown;
  std::thread reader = LongStream(server, body, error);
  server.process().Signal(SIGINT);
  std::this_thread::sleep_for(300ms);
  const auto second = std::chrono::steady_clock::now();
  server.process().Signal(SIGINT);
  const auto exit = server.process().WaitExit(20s);
  reader.join();
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(*exit, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - second, 10s) << "the drain ended at the second signal, not after 60 s";
  EXPECT_NE(body.find(R"("message":"the server is shutting down")"), std::string::npos);
  EXPECT_NE(server.Log().find("SIGINT received again; stopping now"), std::string::npos) << server.Log();
}

TEST(ServeLimits, AMalformedListenAddressIsAUsageError) {
  for (const std::string listen : {":99999", "127.0.0.1:abc", "127.0.0.1", "127.0.0.1:", ":8000", "127.0.0.1:-1"}) {
    const auto r = tandem::testing::RunCommand(
        TANDEM_RT_BIN, {"serve", "--model", tandem::testing::TinyCheckpoint().string(), "--listen", listen}, std::chrono::seconds(30));
    EXPECT_EQ(r.exit_code, 2) << listen << ": " << r.err;
    EXPECT_NE(r.err.find("--listen"), std::string::npos) << listen << ": " << r.err;
    EXPECT_EQ(r.out.find("listening"), std::string::npos) << listen << " must not bind anything: " << r.out;
  }
}

TEST(ServeLimits, AServerThatFailsToLoadExitsInsteadOfHanging) {
  // The API listens before the model loads; a failed load stopped it before its loop had
  // begun, which httplib ignores, and the process waited for that loop forever.
  const auto r = tandem::testing::RunCommand(TANDEM_RT_BIN, {"serve", "--model", "/nonexistent/model", "--listen", "127.0.0.1:0"},
                                             std::chrono::seconds(20));
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

TEST(ServeLimits, AnEmptyApiKeyInTheEnvironmentIsAnErrorNotAnOpenServer) {
  ::setenv("TANDEM_API_KEY", "", 1);
  const auto r = tandem::testing::RunCommand(
      TANDEM_RT_BIN, {"serve", "--model", tandem::testing::TinyCheckpoint().string(), "--listen", "127.0.0.1:0"}, std::chrono::seconds(20));
  ::unsetenv("TANDEM_API_KEY");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("TANDEM_API_KEY is set but empty"), std::string::npos) << r.err;
}

TEST(ServeLimits, AnEmptyApiKeyFileSaysItIsEmpty) {
  // It said "cannot read the file", which sends one looking at permissions.
  const auto file = TempDir("empty-key") / "key";
  std::ofstream(file).close();
  const auto r = tandem::testing::RunCommand(
      TANDEM_RT_BIN,
      {"serve", "--model", tandem::testing::TinyCheckpoint().string(), "--listen", "127.0.0.1:0", "--api-key-file", file.string()},
      std::chrono::seconds(20));
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(file.string() + ": the file is empty"), std::string::npos) << r.err;
}

TEST(ServeLimits, AnIpv6ListenAddressIsPrintedAsAUrl) {
  // `--listen [::1]:0` printed http://::1:PORT, which no client parses.
  tandem::testing::ChildProcess server(
      TANDEM_RT_BIN, {"serve", "--model", tandem::testing::TinyCheckpoint().string(), "--listen", "[::1]:0", "--threads", "1"},
      (TempDir("ipv6") / "stderr.log").string());
  const auto line = server.ReadLine(30s);
  ASSERT_TRUE(line);
  EXPECT_NE(line->find("listening on http://[::1]:"), std::string::npos) << *line;
  server.Kill();
}

TEST(ServeLimits, TheApiKeyComesFromAFileOrTheEnvironmentAndBearerIsCaseInsensitive) {
  const auto dir = TempDir("api-key");
  const auto key_file = dir / "key";
  std::ofstream(key_file) << "  s3cr3t-from-file \n";
  Server from_file(0, {"--api-key-file", key_file.string()});
  const std::string body = kChatPrefix + R"("temperature":0})";
  EXPECT_EQ(Post(from_file, "/v1/chat/completions", body, {{"Authorization", "Bearer s3cr3t-from-file"}}).first, 200);
  EXPECT_EQ(Post(from_file, "/v1/chat/completions", body, {{"Authorization", "bearer s3cr3t-from-file"}}).first, 200)
      << "the scheme is case-insensitive (RFC 7235)";
  EXPECT_EQ(Post(from_file, "/v1/chat/completions", body, {{"Authorization", "BEARER  s3cr3t-from-file"}}).first, 200);
  EXPECT_EQ(Post(from_file, "/v1/chat/completions", body, {{"Authorization", "Bearer s3cr3t-from-fil"}}).first, 401);
  EXPECT_EQ(Post(from_file, "/v1/chat/completions", body, {{"Authorization", "Basic s3cr3t-from-file"}}).first, 401);
  auto unauthorized_stats = from_file.Client().Get("/v1/stats");
  ASSERT_TRUE(unauthorized_stats);
  EXPECT_EQ(unauthorized_stats->status, 401);
  std::ifstream cmdline(fmt::format("/proc/{}/cmdline", from_file.process().pid()));
  const std::string args{std::istreambuf_iterator<char>(cmdline), std::istreambuf_iterator<char>()};
  EXPECT_EQ(args.find("s3cr3t"), std::string::npos) << "the key is not in the process list";

  ::setenv("TANDEM_API_KEY", "s3cr3t-from-env", 1);
  Server from_env(0);
  ::unsetenv("TANDEM_API_KEY");
  EXPECT_EQ(Post(from_env, "/v1/chat/completions", body, {{"Authorization", "Bearer s3cr3t-from-env"}}).first, 200);
  EXPECT_EQ(Post(from_env, "/v1/chat/completions", body).first, 401);
}

}  // namespace
}  // namespace tandem::rt
