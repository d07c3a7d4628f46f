// A chat-completions server that streams at an exactly known pace, to check the
// harness's clocks end to end: each request's first token is sent `--first-ms` after the
// request arrived, then one token every 1/`--rate` s on absolute deadlines (so a late
// wakeup does not push the later tokens back), `--tokens` tokens in all. With those, a
// request's decode rate is exactly `--rate`, TTFT is `--first-ms` plus the client's own
// overhead, and C requests at once aggregate to C·rate. `--startup-ms` waits that long before
// it listens, so a harness that launches it (a command arm with `--port {port}`) measures a
// known startup.
//
//   pace_server --rate 50 --first-ms 40 --tokens 33   # prints "listening on http://127.0.0.1:PORT"
//   pace_server --port 8080 --startup-ms 1000          # listens on 8080 after one second
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <httplib.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "runtime/serve/listen_backlog.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

std::string Event(const json& j) { return "data: " + j.dump() + "\n\n"; }

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
  CLI11_PARSE(app, argc, argv);

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
    res.set_chunked_content_provider("text/event-stream", [=](std::size_t, httplib::DataSink& sink) {
      const auto deadline = [&](int k) {
        return arrived + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(first_ms / 1e3 + k / rate));
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
      const json usage = {{"choices", json::array()},
                          {"usage", {{"prompt_tokens", 10}, {"completion_tokens", n}, {"prompt_tokens_details", {{"cached_tokens", 0}}}}}};
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
