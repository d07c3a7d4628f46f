// The hybrid runtime end to end: real `tandem-rt expert` processes on loopback
// ports chosen at run time, and `tandem-rt eval` / `generate` as the coordinator.
#include <fstream>
#include <map>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/model/synthetic_checkpoint.hpp"
#include "tests/hybrid/fake_worker.hpp"
#include "tests/hybrid/worker_process.hpp"
#include "tests/runtime/eval_run.hpp"
#include "tests/runtime/tiny_model.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/run_command.hpp"

namespace tandem::rt {
namespace {

using tandem::testing::ChildProcess;
using tandem::testing::CommandResult;
using tandem::testing::EvalRun;
using tandem::testing::FakeFault;
using tandem::testing::FakeWorker;
using tandem::testing::MaxRelativeError;
using tandem::testing::RunCommand;
using tandem::testing::RunEval;
using tandem::testing::TempDir;
using namespace std::chrono_literals;

using tandem::testing::ErrorLine;
using tandem::testing::SmallCheckpoint;
using tandem::testing::StartWorker;
using Worker = tandem::testing::WorkerProcess;

const std::filesystem::path& ModelFor(const std::string& preset) {
  if (preset == "mini") return tandem::testing::MiniCheckpoint();
  return preset == "tiny" ? tandem::testing::TinyCheckpoint() : SmallCheckpoint();
}

std::string Join(const std::vector<Worker>& workers) {
  std::string out;
  for (const Worker& w : workers) out += (out.empty() ? "" : ",") + w.address;
  return out;
}

// The single-process run with the experts' inputs rounded as the wire rounds them.
const EvalRun& SingleProcess(const std::string& preset, const std::string& precision) {
  static std::map<std::string, EvalRun> cache;
  const std::string key = preset + "/" + precision;
  if (!cache.contains(key)) cache[key] = RunEval(ModelFor(preset), {"--expert-input-dtype", precision});
  return cache[key];
}

struct LayoutCase {
  std::string name;
  int workers;
  std::vector<std::string> flags;  // besides --experts
  bool peer = false;
};

class HybridLayouts : public ::testing::TestWithParam<std::tuple<std::string, LayoutCase>> {};

TEST_P(HybridLayouts, MatchSingleProcessLogitsAndGreedyTokens) {
  const auto& [preset, layout] = GetParam();
  const auto& model = ModelFor(preset);
  std::vector<Worker> workers;
  for (int i = 0; i < layout.workers; ++i) workers.push_back(StartWorker(model));
  std::vector<std::string> flags = layout.flags;
  flags.insert(flags.end(), {"--experts", Join(workers)});
  std::optional<Worker> peer;
  if (layout.peer) {
    peer = StartWorker(model, "peer");
    flags.insert(flags.end(), {"--coordinator-ranks", "2", "--peer", peer->address});
  }
  const EvalRun& single = SingleProcess(preset, "bf16");
  ASSERT_EQ(single.run.exit_code, 0) << single.run.err;
  const EvalRun hybrid = RunEval(model, flags);
  ASSERT_EQ(hybrid.run.exit_code, 0) << hybrid.run.err;
  EXPECT_LE(MaxRelativeError(hybrid, single), 1e-4);
  EXPECT_EQ(hybrid.tokens, single.tokens) << "greedy 64-token outputs must be identical";
  EXPECT_EQ(hybrid.tokens.size(), 16u + 64u);
}

// Weights copied onto weight memory (the default) and read where mapped
// (--map-weights, passed on to spawned workers) are the same bytes: the same logits
// to the bit, in a single process and in a tp layout whose workers slice experts.
TEST(Hybrid, MappedAndCopiedWeightsGiveTheSameBits) {
  const auto& model = ModelFor("tiny");
  for (const std::vector<std::string>& layout :
       std::vector<std::vector<std::string>>{{}, {"--spawn-workers", "2", "--expert-parallel", "tp"}}) {
    std::vector<std::string> mapped = layout;
    mapped.emplace_back("--map-weights");
    const EvalRun a = RunEval(model, layout, 16), b = RunEval(model, mapped, 16);
    ASSERT_EQ(a.run.exit_code, 0) << a.run.err;
    ASSERT_EQ(b.run.exit_code, 0) << b.run.err;
    EXPECT_EQ(a.logits, b.logits) << fmt::format("{}", fmt::join(mapped, " "));
    EXPECT_EQ(a.tokens, b.tokens);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, HybridLayouts,
    ::testing::Combine(::testing::Values("tiny", "small", "mini"),
                       ::testing::Values(LayoutCase{"tp4", 4, {"--expert-parallel", "tp"}},
                                         LayoutCase{"ep4", 4, {"--expert-parallel", "ep"}},
                                         LayoutCase{"tp2_local2", 2, {"--expert-parallel", "tp", "--local-expert-layers", "2"}},
                                         LayoutCase{"coordinator_ranks2_tp4", 4, {"--expert-parallel", "tp"}, true})),
    [](const auto& test) { return std::get<0>(test.param) + "_" + std::get<1>(test.param).name; });

TEST(Hybrid, Fp8WireMatchesLikeForLikeAndStaysWithinItsBound) {
  const auto& model = ModelFor("tiny");
  std::vector<Worker> workers;
  for (int i = 0; i < 4; ++i) workers.push_back(StartWorker(model));
  const EvalRun hybrid = RunEval(model, {"--experts", Join(workers), "--wire-dtype", "fp8"});
  ASSERT_EQ(hybrid.run.exit_code, 0) << hybrid.run.err;
  EXPECT_LE(MaxRelativeError(hybrid, SingleProcess("tiny", "fp8")), 1e-4);
  EXPECT_EQ(hybrid.tokens, SingleProcess("tiny", "fp8").tokens);
  // Against unrounded fp32 experts, on the same tokens (the prompt, teacher-forced):
  // fp8's 3-bit mantissa costs a few percent of the logit scale (docs/wire-protocol.md);
  // beyond 0.1 the codec would be broken.
  const EvalRun fp8_prompt = RunEval(model, {"--experts", Join(workers), "--wire-dtype", "fp8"}, 0);
  const EvalRun f32_prompt = RunEval(model, {}, 0);
  ASSERT_EQ(fp8_prompt.run.exit_code, 0) << fp8_prompt.run.err;
  const double vs_f32 = MaxRelativeError(fp8_prompt, f32_prompt);
  EXPECT_LT(vs_f32, 0.1);
  EXPECT_GT(vs_f32, 0.0);
}

// The emulated link (a benchmarking aid) delays answers and changes nothing else.
TEST(Hybrid, AnEmulatedLinkDelaysEveryRoundTripAndKeepsTheResults) {
  const auto& model = ModelFor("tiny");
  // Long enough that a run without the delay (a fraction of a second here) stays far
  // below the bound.
  constexpr int kRttMs = 80, kDecode = 4;
  const ModelConfig c = FindPreset("tiny").config;
  const int moe_layers = c.num_hidden_layers - c.first_k_dense_replace;
  std::vector<Worker> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(StartWorker(model, "worker", {"--emulated-rtt-us", std::to_string(kRttMs * 1000)}));
  const EvalRun single = RunEval(model, {"--expert-input-dtype", "bf16"}, kDecode);  // the wire rounds inputs so
  ASSERT_EQ(single.run.exit_code, 0) << single.run.err;
  const auto t0 = std::chrono::steady_clock::now();
  const EvalRun hybrid = RunEval(model, {"--experts", Join(workers)}, kDecode);
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  ASSERT_EQ(hybrid.run.exit_code, 0) << hybrid.run.err;
  EXPECT_LE(MaxRelativeError(hybrid, single), 1e-4);
  EXPECT_EQ(hybrid.tokens, single.tokens);
  // A lower bound, not a speed goal: every decode step waits one emulated round
  // trip for each MoE layer.
  EXPECT_GE(elapsed, std::chrono::milliseconds(kDecode * moe_layers * kRttMs));
}

TEST(Hybrid, KillingAWorkerMidGenerationFailsClearlyAndNothingHangs) {
  const auto& model = ModelFor("tiny");
  std::vector<Worker> workers;
  for (int i = 0; i < 4; ++i) workers.push_back(StartWorker(model));
  const auto log = TempDir("generate") / "stderr.log";
  ChildProcess coordinator(TANDEM_RT_BIN,
                           {"generate", "--model", model.string(), "--prompt", "Hello", "--max-tokens", "2000", "--ignore-eos", "--threads",
                            "1", "--experts", Join(workers), "--round-trip-timeout-ms", "5000"},
                           log.string());
  std::this_thread::sleep_for(300ms);
  workers[1].process->Kill();
  const auto exit = coordinator.WaitExit(15s);
  ASSERT_TRUE(exit.has_value()) << "the coordinator hung after a worker died";
  EXPECT_EQ(*exit, 3);
  std::ifstream in(log);
  const std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(err.find("expert worker rank 2 (" + workers[1].address + ")"), std::string::npos) << err;
  for (std::size_t i : {0u, 2u, 3u}) EXPECT_TRUE(workers[i].process->running()) << "other workers keep serving";
}

TEST(Hybrid, AStalledWorkerTimesOut) {
  const auto& model = ModelFor("tiny");
  std::vector<Worker> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(StartWorker(model));
  workers[0].process->Pause();
  const auto t0 = std::chrono::steady_clock::now();
  const EvalRun r = RunEval(model, {"--experts", Join(workers), "--connect-timeout-ms", "800", "--round-trip-timeout-ms", "500"}, 4);
  EXPECT_EQ(r.run.exit_code, 3);
  EXPECT_NE(r.run.err.find("expert worker rank 1"), std::string::npos) << r.run.err;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  workers[0].process->Resume();
}

TEST(Hybrid, AWorkerWithAnotherModelIsRefusedAtHandshake) {
  const auto other = TempDir("other") / "tiny-seed2";
  WriteSyntheticCheckpoint(FindPreset("tiny"), 2, other, other / "none");
  // A coordinator that proved the token hears where the worker's checkpoint lives.
  const auto token = tandem::testing::WriteTokenFile("a-token-for-this-test");
  Worker w = StartWorker(other, "worker", {"--worker-token-file", token.string()});
  const EvalRun r = RunEval(ModelFor("tiny"), {"--experts", w.address, "--worker-token-file", token.string()}, 2);
  EXPECT_EQ(r.run.exit_code, 3);
  EXPECT_NE(r.run.err.find("refused the handshake: model revision mismatch: the coordinator has "), std::string::npos) << r.run.err;
  EXPECT_NE(r.run.err.find("this worker (" + other.string() + ") has "), std::string::npos) << r.run.err;
  EXPECT_TRUE(w.process->running()) << "a refused handshake does not stop the worker";
  // Without a token, anyone who connects is told the revisions, not the path.
  Worker open = StartWorker(other);
  const EvalRun anyone = RunEval(ModelFor("tiny"), {"--experts", open.address}, 2);
  EXPECT_EQ(anyone.run.exit_code, 3);
  EXPECT_NE(anyone.run.err.find("refused the handshake: model revision mismatch: the coordinator has "), std::string::npos)
      << anyone.run.err;
  EXPECT_EQ(anyone.run.err.find(other.string()), std::string::npos) << anyone.run.err;
}

TEST(Hybrid, GarbageOnTheWireClosesThatConnectionOnly) {
  const auto& model = ModelFor("tiny");
  Worker w = StartWorker(model);
  {
    // A client that speaks HTTP to the worker.
    namespace asio = boost::asio;
    asio::io_context io;
    asio::ip::tcp::socket socket(io);
    const auto colon = w.address.rfind(':');
    socket.connect(
        {asio::ip::make_address(w.address.substr(0, colon)), static_cast<unsigned short>(std::stoi(w.address.substr(colon + 1)))});
    const std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n" + std::string(64, 'x');
    asio::write(socket, asio::buffer(junk));
    char buffer[256];
    boost::system::error_code ec;
    while (!ec) socket.read_some(asio::buffer(buffer), ec);  // the worker's Challenge, then it closes
    EXPECT_TRUE(ec == asio::error::eof || ec == asio::error::connection_reset) << ec.message();
  }
  const EvalRun ok = RunEval(model, {"--experts", w.address}, 2);
  EXPECT_EQ(ok.run.exit_code, 0) << ok.run.err;
  std::ifstream in(w.log);
  const std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(err.find("bad magic"), std::string::npos) << err;
}

// A rank that answers with another request's id is a protocol error naming that rank:
// the partials might belong to another layer or step.
TEST(Hybrid, AResponseWithTheWrongRequestIdIsRefused) {
  Worker healthy = StartWorker(ModelFor("tiny"));
  FakeWorker fake(FakeFault::kWrongRequestId, 2);
  const EvalRun r = RunEval(ModelFor("tiny"), {"--experts", healthy.address + "," + fake.address()}, 2);
  EXPECT_EQ(r.run.exit_code, 3) << r.run.err;
  EXPECT_NE(ErrorLine(r.run.err).find("expert worker rank 2 (" + fake.address() + "): protocol error: the response carries request id "),
            std::string::npos)
      << r.run.err;
  EXPECT_EQ(ErrorLine(r.run.err).find("rank 1"), std::string::npos) << r.run.err;
}

// Bad numbers are blamed on the rank that sent them, before they reach the sum (where
// they would surface later as a healthy rank refusing a non-finite request).
TEST(Hybrid, ARankReturningNonFiniteOrAbsurdPartialsIsBlamed) {
  for (const auto& [fault, what] : {std::pair{FakeFault::kNanPartials, "non-finite"}, std::pair{FakeFault::kHugePartials, "implausible"}}) {
    Worker healthy = StartWorker(ModelFor("tiny"));
    FakeWorker fake(fault, 3);
    const EvalRun r = RunEval(ModelFor("tiny"), {"--experts", healthy.address + "," + fake.address()}, 2);
    EXPECT_EQ(r.run.exit_code, 3) << r.run.err;
    EXPECT_NE(ErrorLine(r.run.err).find(fmt::format("expert worker rank 2 ({}) returned {} partials for layer ", fake.address(), what)),
              std::string::npos)
        << r.run.err;
    EXPECT_EQ(ErrorLine(r.run.err).find("rank 1"), std::string::npos) << r.run.err;
  }
}

}  // namespace
}  // namespace tandem::rt
