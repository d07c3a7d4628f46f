#include "tests/serve/test_server.hpp"

#include <fstream>
#include <iterator>
#include <stdexcept>

#include "tests/runtime/tiny_model.hpp"

namespace tandem::testing {

using nlohmann::json;
using namespace std::chrono_literals;

Worker StartWorker() {
  Worker w;
  w.process = std::make_unique<ChildProcess>(
      TANDEM_RT_BIN, std::vector<std::string>{"expert", "--listen", "127.0.0.1:0", "--model", TinyCheckpoint().string(), "--threads", "1"},
      (TempDir("worker") / "stderr.log").string());
  const auto line = w.process->ReadLine(20s);
  if (!line) throw std::runtime_error("worker did not start");
  w.address = line->substr(line->rfind(' ') + 1);
  return w;
}

Server::Server(int workers, std::vector<std::string> flags, const std::filesystem::path& model) {
  for (int i = 0; i < workers; ++i) workers_.push_back(StartWorker());
  std::vector<std::string> args = {"serve",    "--model",     model.empty() ? TinyCheckpoint().string() : model.string(),
                                   "--listen", "127.0.0.1:0", "--served-model-name",
                                   "tiny",     "--threads",   "1"};
  if (!workers_.empty()) {
    std::string list;
    for (const Worker& w : workers_) list += (list.empty() ? "" : ",") + w.address;
    args.insert(args.end(), {"--experts", list});
  }
  args.insert(args.end(), flags.begin(), flags.end());
  log_ = TempDir("serve") / "stderr.log";
  process_ = std::make_unique<ChildProcess>(TANDEM_RT_BIN, args, log_.string());
  const auto listening = process_->ReadLine(30s);
  if (!listening || listening->find("http://") == std::string::npos) throw std::runtime_error("server did not start: " + Log());
  address_ = listening->substr(listening->find("http://") + 7);
  // Loading progress lines may come first.
  std::optional<std::string> ready;
  for (auto until = std::chrono::steady_clock::now() + 60s; std::chrono::steady_clock::now() < until;) {
    ready = process_->ReadLine(std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()));
    if (!ready || ready->find("serve: ready") != std::string::npos) break;
  }
  if (!ready || ready->find("serve: ready") == std::string::npos) throw std::runtime_error("server not ready: " + Log());
}

httplib::Client Server::Client() const {
  const auto colon = address_.rfind(':');
  httplib::Client c(address_.substr(0, colon), std::stoi(address_.substr(colon + 1)));
  c.set_read_timeout(60s);
  c.set_connection_timeout(5s);
  return c;
}

std::string Server::Log() const {
  std::ifstream in(log_);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

json Server::Stats() const {
  auto r = Client().Get("/v1/stats");
  return r ? json::parse(r->body) : json();
}

std::string Text(const json& completion) { return completion["choices"][0]["message"]["content"]; }

std::pair<int, json> Post(Server& server, const std::string& path, const std::string& body, const httplib::Headers& headers) {
  auto r = server.Client().Post(path.c_str(), headers, body, "application/json");
  if (!r) return {0, json()};
  return {r->status, json::parse(r->body, nullptr, false)};
}

}  // namespace tandem::testing
