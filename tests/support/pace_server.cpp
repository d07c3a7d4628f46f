// A chat-completions server that streams at an exactly known pace, to check the
// harness's clocks end to end: each request's first token is sent `--first-ms` after the
// request arrived, then one token every 1/`--rate` s on absolute deadlines (so a late
// wakeup does not push the later tokens back), `--tokens` tokens in all. With those, a
// request's decode rate is exactly `--rate`, TTFT is `--first-ms` plus the client's own
// overhead, and C requests at once aggregate to C·rate. `--startup-ms` waits that long before
// it listens, so a harness that launches it (a command arm with `--port {port}`) measures a
// known startup. `--tokenizer` counts prompt tokens (and keeps a prefix cache), and
// `--prefill-ms` delays the first token by that much per uncached prompt token: a known
// prefill rate; `--no-cached-usage` leaves the cached count out of the usage.
//
//   pace_server --rate 50 --first-ms 40 --tokens 33   # prints "listening on http://127.0.0.1:PORT"
//   pace_server --port 8080 --startup-ms 1000          # listens on 8080 after one second
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "runtime/model/tokenizer.hpp"
#include "runtime/serve/listen_backlog.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

std::string Event(const json& j) { return "data: " + j.dump() + "\n\n"; }

// With --tokenizer: a prompt as a chat template would make it (3 tokens before each message's
// text, and the same 3 after the last to open the answer, so a conversation's earlier prompt
// is a prefix of its next one) and a prefix cache of the last 64 prompts, so prompt and cached
// token counts are exact and known to a test.
class PromptCache {
 public:
  explicit PromptCache(tandem::rt::Tokenizer tokenizer) : tokenizer_(std::move(tokenizer)) {}

  // The prompt's tokens and how many of them an earlier prompt shares (at most all but one).
  std::pair<int, int> Admit(const json& messages) {
    std::vector<tandem::rt::TokenId> tokens;
    if (messages.is_array()) {
      for (const json& m : messages) {
        tokens.insert(tokens.end(), {1, 2, 3});
        if (m.is_object() && m.contains("content") && m["content"].is_string()) {
          const auto text = tokenizer_.Encode(m["content"].get<std::string>());
          tokens.insert(tokens.end(), text.begin(), text.end());
        }
      }
    }
    tokens.insert(tokens.end(), {1, 2, 3});
    const std::lock_guard lock(mutex_);
    std::size_t cached = 0;
    for (const auto& earlier : earlier_) {
      const auto mismatch = std::mismatch(tokens.begin(), tokens.end(), earlier.begin(), earlier.end());
      cached = std::max(cached, static_cast<std::size_t>(mismatch.first - tokens.begin()));
    }
    cached = std::min(cached, tokens.size() - 1);
    earlier_.push_back(tokens);
    if (earlier_.size() > 64) earlier_.pop_front();
    return {static_cast<int>(tokens.size()), static_cast<int>(cached)};
  }

 private:
  tandem::rt::Tokenizer tokenizer_;
  std::mutex mutex_;
  std::deque<std::vector<tandem::rt::TokenId>> earlier_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("A chat-completions server that streams at an exactly known pace (tests only)");
  double rate = 50, first_ms = 40;
  int tokens = 33;
  std::string id = "pace";
  int port_wanted = 0;
  double startup_ms = 0;
  app.add_option("--rate", rate, "Tokens per second after the first")->check(CLI::Range(0.1, 100000.0));
  app.add_option("--first-ms", first_ms, "Milliseconds from the request to the first token")->check(CLI::Range(0.0, 60000.0));
  app.add_option("--tokens", tokens, "Tokens per answer (also capped by the request's max_tokens)")->check(CLI::Range(1, 100000));
  app.add_option("--id", id, "The model id /v1/models lists");
  app.add_option("--port", port_wanted, "The port to listen on (0: any free one)")->check(CLI::Range(0, 65535));
  app.add_option("--startup-ms", startup_ms, "Milliseconds to wait before listening")->check(CLI::Range(0.0, 600000.0));
  std::string tokenizer_file;
  double prefill_ms = 0;
  bool no_cached_usage = false;
  app.add_option("--tokenizer", tokenizer_file, "tokenizer.json: count prompt tokens and keep a prefix cache")->check(CLI::ExistingFile);
  app.add_option("--prefill-ms", prefill_ms, "Milliseconds per uncached prompt token before the first token (needs --tokenizer)")
      ->check(CLI::Range(0.0, 1000.0));
  app.add_flag("--no-cached-usage", no_cached_usage, "Leave cached tokens out of the usage, as some servers do");
  CLI11_PARSE(app, argc, argv);
  std::optional<PromptCache> cache;
  if (!tokenizer_file.empty()) cache.emplace(tandem::rt::Tokenizer::Load(tokenizer_file));

  httplib::Server server;
  server.new_task_queue = [] { return new httplib::ThreadPool(64); };  // C16 and more at once
  std::atomic<long> served{0};
  server.Get("/health",
             [](const httplib::Request&, httplib::Response& res) { res.set_content("{\"status\":\"ok\"}", "application/json"); });
  server.Get("/v1/models", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(json{{"object", "list"}, {"data", {{{"id", id}, {"object", "model"}}}}}.dump(), "application/json");
  });
  server.Get("/v1/stats", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(json{{"requests", served.load()}}.dump(), "application/json");
  });
  server.Post("/v1/chat/completions", [&](const httplib::Request& req, httplib::Response& res) {
    const Clock::time_point arrived = Clock::now();
    const json body = json::parse(req.body, nullptr, false);
    int n = tokens;
    if (body.is_object() && body.contains("max_tokens") && body["max_tokens"].is_number_integer()) {
      n = std::max(1, std::min(n, body["max_tokens"].get<int>()));
    }
    ++served;
    // Not a structured binding: the stream's lambda captures them (clang 14 refuses those).
    const std::pair<int, int> counted = cache && body.is_object() ? cache->Admit(body.value("messages", json())) : std::pair{10, 0};
    const int prompt = counted.first, cached = counted.second;
    const double first_s = (first_ms + (cache ? prefill_ms * (prompt - cached) : 0.0)) / 1e3;
    res.set_chunked_content_provider("text/event-stream", [=](std::size_t, httplib::DataSink& sink) {
      const auto deadline = [&](int k) {
        return arrived + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(first_s + k / rate));
      };
      const json role = {{"choices", {{{"index", 0}, {"delta", {{"role", "assistant"}}}}}}};
      std::string head = Event(role);
      if (!sink.write(head.data(), head.size())) return false;
      for (int k = 0; k < n; ++k) {
        std::this_thread::sleep_until(deadline(k));
        json delta = {{"choices", {{{"index", 0}, {"delta", {{"content", " w"}}}, {"finish_reason", nullptr}}}}};
        if (k + 1 == n) delta["choices"][0]["finish_reason"] = "length";
        std::string e = Event(delta);
        if (!sink.write(e.data(), e.size())) return false;
      }
      json usage = {
          {"choices", json::array()},
          {"usage", {{"prompt_tokens", prompt}, {"completion_tokens", n}, {"prompt_tokens_details", {{"cached_tokens", cached}}}}}};
      if (no_cached_usage) usage["usage"].erase("prompt_tokens_details");
      std::string tail = Event(usage) + "data: [DONE]\n\n";
      if (!sink.write(tail.data(), tail.size())) return false;
      sink.done();
      return true;
    });
  });
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(startup_ms));
  const tandem::rt::ListenBacklog backlog(server);
  const int port =
      port_wanted == 0 ? server.bind_to_any_port("127.0.0.1") : (server.bind_to_port("127.0.0.1", port_wanted) ? port_wanted : -1);
  if (port <= 0) {
    std::fprintf(stderr, "pace_server: cannot bind 127.0.0.1:%d\n", port_wanted);
    return 1;
  }
  backlog.Widen(1024);  // a C16 batch connects at once
  std::printf("listening on http://127.0.0.1:%d\n", port);
  std::fflush(stdout);
  server.listen_after_bind();
  return 0;
}
