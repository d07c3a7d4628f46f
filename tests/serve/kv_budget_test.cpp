// `tandem-rt serve` within its KV cache budget: a request's cache grows with what it
// writes, a request that cannot fit is refused naming the limit, one that runs out of
// room later fails alone, and nothing a request asks for ends the process.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/runtime/tiny_model.hpp"
#include "tests/serve/test_server.hpp"
#include "tests/support/child_process.hpp"

namespace tandem::rt {
namespace {

using nlohmann::json;
using tandem::testing::Post;
using tandem::testing::Server;
using tandem::testing::TempDir;
using namespace std::chrono_literals;

// The tiny checkpoint with another max_position_embeddings (the weights linked, not copied).
std::filesystem::path TinyWithPositions(std::int64_t positions) {
  const std::filesystem::path dir = TempDir("positions") / std::to_string(positions);
  std::filesystem::create_directories(dir);
  for (const auto& entry : std::filesystem::directory_iterator(tandem::testing::TinyCheckpoint())) {
    if (entry.path().filename() == "config.json") continue;
    std::filesystem::create_symlink(entry.path(), dir / entry.path().filename());
  }
  std::ifstream in(tandem::testing::TinyCheckpoint() / "config.json");
  json config = json::parse(in);
  config["max_position_embeddings"] = positions;
  std::ofstream(dir / "config.json") << config.dump(1);
  return dir;
}

// Peak resident memory of a process, in MiB (VmHWM).
double PeakRssMiB(int pid) {
  std::istringstream status(tandem::testing::ReadProcFile(pid, "status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1;
}

TEST(ServeKvBudget, AMaxTokensBeyondTheBudgetIsRefusedNamingTheLimit) {
  // The config allows a billion positions: reserving prompt + max_tokens at admission
  // threw std::bad_alloc on the scheduler's thread and the process aborted (exit 134).
  Server server(0, {}, TinyWithPositions(1'000'000'000));
  const auto [status, reply] = Post(server, "/v1/completions", R"({"prompt":"hi","max_tokens":999999990})");
  EXPECT_EQ(status, 400) << reply.dump();
  EXPECT_NE(reply.dump().find("allows at most"), std::string::npos) << reply.dump();
  EXPECT_NE(server.Log().find("KV budget"), std::string::npos) << "the budget is stated at start: " << server.Log();
  auto health = server.Client().Get("/health");
  ASSERT_TRUE(health) << "the server is still up";
  EXPECT_EQ(health->status, 200);
}

TEST(ServeKvBudget, ALongAllowedAnswerCostsOnlyWhatItHasWritten) {
  // 163 840 positions: each stream allowed 163 000 tokens took ~100 MB at admission.
  Server server(0, {"--concurrency", "8"}, TinyWithPositions(163'840));
  const double before = PeakRssMiB(server.process().pid());
  std::vector<std::thread> streams;
  std::atomic<int> started{0};
  for (int i = 0; i < 8; ++i) {
    streams.emplace_back([&server, &started, i] {
      auto client = server.Client();
      const json body = {{"prompt", fmt::format("stream {}", i)}, {"max_tokens", 163'000}, {"ignore_eos", true}, {"stream", true}};
      std::size_t received = 0;
      httplib::Request req;
      req.method = "POST";
      req.path = "/v1/completions";
      req.body = body.dump();
      req.set_header("Content-Type", "application/json");
      req.content_receiver = [&](const char*, std::size_t n, std::uint64_t, std::uint64_t) {
        if (received == 0) ++started;
        received += n;
        return received < 4096;  // a few chunks, then hang up
      };
      client.send(req);
    });
  }
  for (std::thread& t : streams) t.join();
  EXPECT_EQ(started.load(), 8);
  const double after = PeakRssMiB(server.process().pid());
  EXPECT_LT(after - before, 150) << "peak RSS went from " << before << " to " << after << " MiB for 8 short streams";
}

TEST(ServeKvBudget, ARequestThatOutgrowsTheBudgetFailsAloneAndTheServerGoesOn) {
  // A budget of ~600 positions: each request fits alone (context cut to the budget),
  // two together do not; the one that cannot grow ends with an error naming the budget.
  const std::filesystem::path model = TinyWithPositions(4096);
  Server probe(0, {"--kv-budget-mb", "64"}, model);
  const std::string log = probe.Log();
  const auto of = log.find(" positions of ");
  ASSERT_NE(of, std::string::npos) << log;
  const double per_position = std::stod(log.substr(of + 14));
  const double budget_mb = 600 * per_position / (1024.0 * 1024.0);

  Server server(0, {"--kv-budget-mb", fmt::format("{:.6f}", budget_mb), "--prefix-cache-entries", "0"}, model);
  std::vector<std::pair<int, json>> replies(2);
  std::vector<std::thread> clients;
  for (int i = 0; i < 2; ++i) {
    clients.emplace_back([&, i] {
      replies[static_cast<std::size_t>(i)] =
          Post(server, "/v1/completions", json{{"prompt", fmt::format("r{}", i)}, {"max_tokens", 560}, {"ignore_eos", true}}.dump());
    });
  }
  for (std::thread& t : clients) t.join();
  int completed = 0, refused = 0;
  for (const auto& [status, reply] : replies) {
    if (status == 200) {
      ++completed;
      EXPECT_EQ(reply["usage"]["completion_tokens"], 560) << reply.dump();
    } else {
      ++refused;
      EXPECT_EQ(status, 503) << reply.dump();
      EXPECT_NE(reply.dump().find("KV cache budget"), std::string::npos) << reply.dump();
    }
  }
  EXPECT_EQ(completed, 1);
  EXPECT_EQ(refused, 1);
  auto health = server.Client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200) << "one request's failure is not the server's";
  const auto [status, reply] = Post(server, "/v1/completions", R"({"prompt":"again","max_tokens":8})");
  EXPECT_EQ(status, 200) << reply.dump();
}

}  // namespace
}  // namespace tandem::rt
