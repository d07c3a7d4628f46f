// A worker's load takes as long as its share of the checkpoint: the coordinator waits
// while the worker reports progress, prints it, and fails only a rank that stops
// progressing, naming it and the file it was reading.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/hybrid/frame_channel.hpp"
#include "runtime/hybrid/handshake.hpp"
#include "runtime/model/checkpoint.hpp"
#include "tests/hybrid/fake_worker.hpp"
#include "tests/hybrid/worker_process.hpp"
#include "tests/runtime/eval_run.hpp"
#include "tests/runtime/tiny_model.hpp"
#include "tests/support/run_command.hpp"
#include "tests/support/scoped_env.hpp"

namespace tandem::rt {
namespace {

using tandem::testing::ErrorLine;
using tandem::testing::EvalRun;
using tandem::testing::FakeFault;
using tandem::testing::FakeLoad;
using tandem::testing::FakeWorker;
using tandem::testing::ReadFile;
using tandem::testing::RunCommand;
using tandem::testing::RunEval;
using tandem::testing::ScopedEnv;
using tandem::testing::StartWorker;
using tandem::testing::TempDir;
using tandem::testing::TinyCheckpoint;
using tandem::testing::WriteTokenFile;
using namespace std::chrono_literals;

constexpr std::uint64_t kTotal = 4'000'000'000;

Hello AnyHello() { return Hello{wire::kVersion, "rev", 1, 2, "worker", {64, 2, 8}, wire::Dtype::kBf16, wire::Dtype::kF64, {}}; }

LoadProgress Experts(std::uint64_t done, int file) {
  return {LoadProgress::Phase::kExperts, done, kTotal, fmt::format("model-{:05d}-of-00004.safetensors", file)};
}

// `n` reports `pause` apart, each 10% further, the first two while hashing.
FakeLoad Advancing(int n, std::chrono::milliseconds pause) {
  FakeLoad load;
  for (int i = 0; i < n; ++i) {
    LoadProgress p = Experts(kTotal / 10 * static_cast<std::uint64_t>(i + 1), i % 4 + 1);
    if (i < 2) p.phase = LoadProgress::Phase::kRevision;
    load.reports.emplace_back(pause, p);
  }
  return load;
}

std::string Failure(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no failure)";
}

TEST(LoadProgressHandshake, AWorkerIsWaitedForAsLongAsItsLoadAdvances) {
  // 1.6 s of loading against a 400 ms timeout: each report starts it over.
  FakeWorker w(FakeFault::kNone, 0, Advancing(8, 200ms));
  boost::asio::io_context io;
  std::vector<LoadProgress> heard;
  HandshakeOptions options{400ms, std::nullopt, [&](std::size_t, const LoadProgress& p) { heard.push_back(p); }};
  const auto channels = HandshakeAll(io, {{w.address(), AnyHello()}}, options);
  ASSERT_EQ(channels.size(), 1u);
  ASSERT_EQ(heard.size(), 8u);
  EXPECT_EQ(heard.front().phase, LoadProgress::Phase::kRevision);
  EXPECT_EQ(heard.back().phase, LoadProgress::Phase::kExperts);
  EXPECT_EQ(heard.back().bytes_done, kTotal / 10 * 8);
  EXPECT_EQ(heard.back().file, "model-00004-of-00004.safetensors");
}

TEST(LoadProgressHandshake, AWorkerWhoseLoadStopsIsNamedWithWhatItWasReading) {
  // Three reports that advance, then the same one again and again: repeating a report
  // is not progress, so the rank fails 500 ms after the third, not after the last.
  FakeLoad load;
  for (int i = 1; i <= 3; ++i) load.reports.emplace_back(100ms, Experts(kTotal / 10 * i, i));
  for (int i = 0; i < 15; ++i) load.reports.emplace_back(100ms, Experts(kTotal / 10 * 3, 3));
  load.ack = false;
  FakeWorker w(FakeFault::kNone, 0, load);
  boost::asio::io_context io;
  const auto t0 = Clock::now();
  const std::string why = Failure([&] { ConnectAndHandshake(io, w.address(), AnyHello(), 500ms); });
  const auto took = Clock::now() - t0;
  EXPECT_EQ(why,
            "no loading progress for 500 ms (--connect-timeout-ms); its last report: loading its slices: 1.20 of 4.00 GB (30%), "
            "reading model-00003-of-00004.safetensors");
  EXPECT_GE(took, 800ms);
  EXPECT_LT(took, 1700ms) << "repeated reports must not count as progress";
}

TEST(LoadProgressHandshake, AWorkerThatSaysNothingAfterTheHelloFailsAtTheTimeout) {
  FakeLoad silent;
  silent.ack = false;
  FakeWorker w(FakeFault::kNone, 0, silent);
  boost::asio::io_context io;
  EXPECT_EQ(Failure([&] { ConnectAndHandshake(io, w.address(), AnyHello(), 300ms); }),
            "no handshake answer within 300 ms (--connect-timeout-ms), and no loading progress reported");
}

TEST(LoadProgressHandshake, AReportThatGoesBackIsAProtocolError) {
  FakeLoad load;
  load.reports = {{10ms, Experts(kTotal / 2, 1)}, {10ms, Experts(kTotal / 4, 1)}};
  FakeWorker w(FakeFault::kNone, 0, load);
  boost::asio::io_context io;
  EXPECT_EQ(Failure([&] { ConnectAndHandshake(io, w.address(), AnyHello(), 2s); }),
            "load progress went back from 2000000000 to 1000000000 bytes");
  FakeLoad phases;
  LoadProgress hashing = Experts(1, 1);
  hashing.phase = LoadProgress::Phase::kRevision;
  phases.reports = {{10ms, Experts(kTotal / 2, 1)}, {10ms, hashing}};
  FakeWorker back(FakeFault::kNone, 0, phases);
  EXPECT_EQ(Failure([&] { ConnectAndHandshake(io, back.address(), AnyHello(), 2s); }),
            "load progress went back from phase experts to revision");
}

TEST(LoadProgressHandshake, EveryRankLoadsAtOnceAndAFailingOneIsTheOneNamed) {
  // Each rank's reports are heard while the other's come too: rank by rank, all of the
  // first's would come before any of the second's.
  FakeWorker a(FakeFault::kNone, 0, Advancing(5, 150ms));
  FakeWorker b(FakeFault::kNone, 0, Advancing(5, 150ms));
  boost::asio::io_context io;
  std::vector<std::size_t> order;
  HandshakeOptions options{2s, std::nullopt, [&](std::size_t i, const LoadProgress&) { order.push_back(i); }};
  HandshakeAll(io, {{a.address(), AnyHello()}, {b.address(), AnyHello()}}, options);
  ASSERT_EQ(order.size(), 10u);
  const auto first_of = [&](std::size_t i) { return std::find(order.begin(), order.end(), i) - order.begin(); };
  const auto last_of = [&](std::size_t i) { return order.rend() - std::find(order.rbegin(), order.rend(), i) - 1; };
  EXPECT_LT(first_of(1), last_of(0)) << "the second rank's load must start before the first's ends";
  EXPECT_LT(first_of(0), last_of(1));

  FakeLoad stalls = Advancing(2, 50ms);
  stalls.ack = false;
  FakeWorker fine(FakeFault::kNone, 0, Advancing(2, 50ms));
  FakeWorker stuck(FakeFault::kNone, 0, stalls);
  try {
    HandshakeAll(io, {{fine.address(), AnyHello()}, {stuck.address(), AnyHello()}}, {300ms, std::nullopt, {}});
    ADD_FAILURE() << "the stalled rank was not noticed";
  } catch (const HandshakeError& e) {
    EXPECT_EQ(e.index(), 1u);
    EXPECT_NE(std::string(e.what()).find("no loading progress for 300 ms"), std::string::npos) << e.what();
  }
}

TEST(LoadProgressHandshake, ReportsParseWithinTheirBounds) {
  const LoadProgress p = Experts(5, 2);
  const LoadProgress back = ParseLoadProgress(LoadProgressJson(p));
  EXPECT_EQ(back.phase, p.phase);
  EXPECT_EQ(back.bytes_done, 5u);
  EXPECT_EQ(back.bytes_total, kTotal);
  EXPECT_EQ(back.file, p.file);
  EXPECT_THROW(ParseLoadProgress(R"({"phase":"experts","bytes_done":5,"bytes_total":4,"file":""})"), wire::WireError);
  EXPECT_THROW(ParseLoadProgress(R"({"phase":"warming","bytes_done":0,"bytes_total":4,"file":""})"), wire::WireError);
  EXPECT_THROW(ParseLoadProgress(R"({"phase":"experts","bytes_done":-1,"bytes_total":4,"file":""})"), wire::WireError);
  EXPECT_THROW(ParseLoadProgress(R"({"phase":"experts","bytes_done":0,"bytes_total":4})"), wire::WireError);
  EXPECT_THROW(
      ParseLoadProgress(fmt::format(R"({{"phase":"experts","bytes_done":0,"bytes_total":4,"file":"{}"}})", std::string(5000, 'f'))),
      wire::WireError);
}

// The tiny model's worker holds 48 expert slices: 60 ms before each makes a 2.9 s load,
// three times the coordinator's --connect-timeout-ms.
constexpr const char* kSlowLoad = "60";

TEST(LoadProgressWorkers, ASlowWorkerIsWaitedForWhileItsLoadAdvancesAndItsProgressIsPrinted) {
  const ScopedEnv slow("TANDEM_DEBUG_LOAD_DELAY_MS", kSlowLoad);
  const auto w = StartWorker(TinyCheckpoint());
  const EvalRun r = RunEval(TinyCheckpoint(), {"--experts", w.address, "--connect-timeout-ms", "1000"}, 2);
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  const std::string rank = fmt::format("loading progress: expert worker rank 1 ({}): ", w.address);
  EXPECT_NE(r.run.err.find(rank + "loading its slices: "), std::string::npos) << r.run.err;
  EXPECT_NE(r.run.err.find(rank + "loaded, "), std::string::npos) << r.run.err;
  EXPECT_NE(r.run.err.find("reading model.safetensors"), std::string::npos) << r.run.err;
}

TEST(LoadProgressWorkers, SpawnedWorkersAreWaitedForTheSameWay) {
  const ScopedEnv slow("TANDEM_DEBUG_LOAD_DELAY_MS", kSlowLoad);
  const EvalRun r = RunEval(TinyCheckpoint(), {"--spawn-workers", "2", "--connect-timeout-ms", "1000"}, 2);
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  EXPECT_NE(r.run.err.find("loading progress: expert worker rank 1 ("), std::string::npos) << r.run.err;
  EXPECT_NE(r.run.err.find("loading progress: expert worker rank 2 ("), std::string::npos) << r.run.err;
}

TEST(LoadProgressWorkers, AMissingWeightFileOnAWorkersHostIsNamedBeforeAnyForward) {
  // The worker's copy of the checkpoint lists its weights in an index, and the shard it
  // names did not arrive on that host; the coordinator has it all.
  const auto copy = TempDir("incomplete-copy");
  for (const auto& entry : std::filesystem::directory_iterator(TinyCheckpoint())) {
    if (entry.path().filename() != "model.safetensors") std::filesystem::copy(entry.path(), copy / entry.path().filename());
  }
  nlohmann::json index{{"metadata", nlohmann::json::object()}, {"weight_map", nlohmann::json::object()}};
  const Checkpoint whole = Checkpoint::Open(TinyCheckpoint());
  for (const std::string& name : whole.TensorNames()) index["weight_map"][name] = "model.safetensors";
  tandem::testing::WriteFile(copy / "model.safetensors.index.json", index.dump());
  const auto token = WriteTokenFile("a-worker-token-of-enough-length");
  const auto w = StartWorker(copy, "worker", {"--worker-token-file", token.string()});
  const EvalRun r =
      RunEval(TinyCheckpoint(), {"--experts", w.address, "--worker-token-file", token.string(), "--connect-timeout-ms", "5000"}, 2);
  EXPECT_EQ(r.run.exit_code, 3) << r.run.err;
  const std::string error = ErrorLine(r.run.err);
  EXPECT_NE(error.find(fmt::format("expert worker rank 1 ({}): refused the handshake: cannot open the model: ", w.address)),
            std::string::npos)
      << r.run.err;
  EXPECT_NE(error.find((copy / "model.safetensors").string()), std::string::npos) << error;
  EXPECT_TRUE(r.logits.empty()) << "nothing may be computed before every rank holds its slices";
}

TEST(LoadProgressWorkers, AnUnreadableDebugDelayIsRefusedByName) {
  const ScopedEnv bad("TANDEM_DEBUG_LOAD_DELAY_MS", "1s");
  const auto r = RunCommand(TANDEM_RT_BIN, {"expert", "--listen", "127.0.0.1:0", "--model", TinyCheckpoint().string()}, 20s);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("TANDEM_DEBUG_LOAD_DELAY_MS: '1s' is not a whole number of milliseconds from 0 to 60000"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace tandem::rt
