// Who may use an expert worker: the shared token (proved, never sent), the handshake
// deadline that closes connections which say nothing, and one coordinator at a time.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "runtime/hybrid/frame_channel.hpp"
#include "runtime/hybrid/handshake.hpp"
#include "runtime/hybrid/placement_plan.hpp"
#include "runtime/hybrid/worker_token.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/model_revision.hpp"
#include "tests/hybrid/worker_process.hpp"
#include "tests/runtime/eval_run.hpp"
#include "tests/runtime/tiny_model.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/run_command.hpp"
#include "tests/support/scoped_env.hpp"

namespace tandem::rt {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using tandem::testing::ChildProcess;
using tandem::testing::ErrorLine;
using tandem::testing::EvalRun;
using tandem::testing::ReadFile;
using tandem::testing::RunCommand;
using tandem::testing::RunEval;
using tandem::testing::ScopedEnv;
using tandem::testing::StartWorker;
using tandem::testing::TempDir;
using tandem::testing::TinyCheckpoint;
using tandem::testing::WriteFile;
using tandem::testing::WriteTokenFile;
using Worker = tandem::testing::WorkerProcess;
using namespace std::chrono_literals;

tcp::endpoint Endpoint(const std::string& address) {
  const auto [host, port] = SplitHostPort(address);
  return {asio::ip::make_address(host), port};
}

// A blocking client that speaks frames. It reads with recv(2) under SO_RCVTIMEO, so
// nothing hangs: asio's blocking reads would wait in poll() without end.
struct RawPeer {
  asio::io_context io;
  tcp::socket socket{io};

  // From `from` (another loopback address, 127.x.y.z, stands for another host).
  explicit RawPeer(const std::string& address, const std::string& from = "") {
    if (!from.empty()) {
      socket.open(tcp::v4());
      socket.bind(tcp::endpoint(asio::ip::make_address(from), 0));
    }
    socket.connect(Endpoint(address));
    const timeval limit{5, 0};
    ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  }
  // Up to `n` bytes; 0 at the end of the stream; -errno on an error (-EAGAIN: 5 s passed).
  ssize_t Receive(void* p, std::size_t n) {
    const ssize_t got = ::recv(socket.native_handle(), p, n, 0);
    return got < 0 ? -errno : got;
  }
  void ReceiveExactly(void* p, std::size_t n) {
    for (std::size_t done = 0; done < n;) {
      const ssize_t got = Receive(static_cast<char*>(p) + done, n - done);
      if (got <= 0) throw std::runtime_error(got == 0 ? "the worker closed the connection" : "no frame from the worker");
      done += static_cast<std::size_t>(got);
    }
  }
  std::pair<wire::FrameHeader, std::string> Read() {
    std::array<std::byte, wire::kHeaderBytes> head;
    ReceiveExactly(head.data(), head.size());
    const wire::FrameHeader h = wire::DecodeHeader(head);
    std::string payload(h.payload_bytes, '\0');
    ReceiveExactly(payload.data(), payload.size());
    return {h, payload};
  }
  void Write(const std::vector<std::byte>& frame) { asio::write(socket, asio::buffer(frame)); }
  // Reads until the worker closes: "closed", or how it ended otherwise.
  std::string DrainUntilClosed() {
    char buffer[256];
    for (;;) {
      const ssize_t got = Receive(buffer, sizeof buffer);
      if (got == 0) return "closed";
      if (got < 0) return got == -EAGAIN ? "still open after 5 s" : std::string("error: ") + std::strerror(static_cast<int>(-got));
    }
  }
};

// The Hello a coordinator of the tiny model sends its only worker (rank 1 of 2).
Hello TinyHello(const std::string& address) {
  const Checkpoint ckpt = Checkpoint::Open(TinyCheckpoint());
  const ModelConfig& c = ckpt.config();
  Layout layout;
  layout.workers = {address};
  const PlacementPlan plan = PlacementPlan::Compute(c, layout);
  return Hello{wire::kVersion,
               ModelRevision(ckpt.dir()),
               1,
               2,
               "worker",
               {c.hidden_size, c.num_experts_per_tok, c.n_routed_experts},
               wire::Dtype::kBf16,
               wire::Dtype::kF64,
               plan.ranks[1].slices};
}

// Whether the worker's log says `text` within a few seconds (it logs why it closed a
// connection after closing it).
bool LogSays(const Worker& w, const std::string& text) {
  for (auto until = std::chrono::steady_clock::now() + 3s; std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(20ms)) {
    if (ReadFile(w.log).find(text) != std::string::npos) return true;
  }
  return false;
}

// A field of /proc/PID/status in KiB ("VmRSS", "VmSize"); -1 if it cannot be read.
long StatusKiB(int pid, const std::string& field) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

// A frame header that announces `payload_bytes` (none of which follows).
std::vector<std::byte> HeaderOnly(wire::FrameType type, std::uint32_t payload_bytes) {
  wire::FrameHeader h;
  h.type = type;
  h.payload_bytes = payload_bytes;
  const auto bytes = wire::EncodeHeader(h);
  return {bytes.begin(), bytes.end()};
}

constexpr const char* kSecret = "correct-horse-battery-staple-4242";

TEST(WorkerAuth, AWorkerWithATokenRefusesCoordinatorsWithoutItOrWithAnother) {
  const auto& model = TinyCheckpoint();
  Worker w = [] {
    ScopedEnv env(kWorkerTokenEnv, kSecret);
    return StartWorker(TinyCheckpoint());
  }();
  const auto wrong = WriteTokenFile("not-the-right-token");
  const EvalRun none = RunEval(model, {"--experts", w.address}, 2);
  const EvalRun other = RunEval(model, {"--experts", w.address, "--worker-token-file", wrong.string()}, 2);
  EXPECT_EQ(none.run.exit_code, 3);
  EXPECT_NE(ErrorLine(none.run.err).find("expert worker rank 1 (" + w.address + "): worker requires a token"), std::string::npos)
      << none.run.err;
  EXPECT_EQ(other.run.exit_code, 3);
  EXPECT_NE(ErrorLine(other.run.err).find("expert worker rank 1 (" + w.address + "): refused the handshake: worker token mismatch"),
            std::string::npos)
      << other.run.err;
  EXPECT_TRUE(LogSays(w, "refusing the handshake: worker token mismatch")) << ReadFile(w.log);
  const std::string worker_log = ReadFile(w.log);
  for (const std::string& text : {none.run.err, other.run.err, worker_log}) {
    EXPECT_EQ(text.find(kSecret), std::string::npos) << text;
    EXPECT_EQ(text.find("not-the-right-token"), std::string::npos) << text;
  }
  for (const std::string& text : {none.run.err, other.run.err}) EXPECT_EQ(text.find(model.string()), std::string::npos) << text;
  EXPECT_TRUE(w.process->running());

  // A coordinator with a token and a worker without one disagree just as much.
  Worker open = StartWorker(model);
  const EvalRun unexpected = RunEval(model, {"--experts", open.address, "--worker-token-file", wrong.string()}, 2);
  EXPECT_EQ(unexpected.run.exit_code, 3);
  EXPECT_NE(ErrorLine(unexpected.run.err).find("expert worker rank 1 (" + open.address + "): worker token mismatch"), std::string::npos)
      << unexpected.run.err;
}

// What a worker with a token tells a peer that has not proved it: what it got wrong,
// nothing about itself (no model path, no revision, no token).
TEST(WorkerAuth, AnUnauthenticatedPeerLearnsNothingLocal) {
  Worker w = [] {
    ScopedEnv env(kWorkerTokenEnv, kSecret);
    return StartWorker(TinyCheckpoint());
  }();
  const Hello hello = TinyHello(w.address);
  const std::string revision = hello.model_revision;
  auto ask = [&](const std::optional<HelloAuth>& auth) {
    RawPeer peer(w.address);
    const auto [head, text] = peer.Read();
    EXPECT_EQ(head.type, wire::FrameType::kChallenge);
    const Challenge challenge = ParseChallenge(text);
    EXPECT_TRUE(challenge.token_required);
    Hello h = hello;
    h.auth = auth;
    peer.Write(wire::EncodeTextFrame(wire::FrameType::kHello, HelloJson(h)));
    const auto [answer_head, answer] = peer.Read();
    EXPECT_EQ(answer_head.type, wire::FrameType::kError);
    EXPECT_EQ(peer.DrainUntilClosed(), "closed");
    for (const std::string& said : {text, answer}) {
      EXPECT_EQ(said.find(TinyCheckpoint().string()), std::string::npos) << said;
      EXPECT_EQ(said.find(revision), std::string::npos) << said;
      EXPECT_EQ(said.find(kSecret), std::string::npos) << said;
    }
    return answer;
  };
  EXPECT_EQ(ask(std::nullopt).rfind("worker requires a token", 0), 0u);
  EXPECT_EQ(ask(HelloAuth{NewNonce(), CoordinatorProof("a guess", NewNonce(), NewNonce())}), "worker token mismatch");
  // A Hello for the wrong model with a wrong proof: refused for the proof, not the model.
  Hello wrong_model = hello;
  wrong_model.model_revision = "0000";
  RawPeer peer(w.address);
  const Challenge challenge = ParseChallenge(peer.Read().second);
  wrong_model.auth = HelloAuth{NewNonce(), CoordinatorProof("a guess", challenge.nonce, NewNonce())};
  peer.Write(wire::EncodeTextFrame(wire::FrameType::kHello, HelloJson(wrong_model)));
  EXPECT_EQ(peer.Read().second, "worker token mismatch");
}

// A channel with a maximum refuses a bigger frame on its header alone, reads none of its
// payload, and stays open so that its owner can still say why.
TEST(FrameChannel, RefusesAFrameOverItsMaximumBeforeItsPayload) {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  auto channel = FrameChannel::Connect(io, fmt::format("127.0.0.1:{}", acceptor.local_endpoint().port()), 5s);
  tcp::socket other(io);
  acceptor.accept(other);
  FrameChannel* one[] = {channel.get()};
  channel->set_max_payload(1024, "in this test");
  asio::write(other, asio::buffer(wire::EncodeTextFrame(wire::FrameType::kHello, std::string(1024, 'x'))));
  channel->StartReceive();
  RunUntilIdle(io, one, Clock::now() + 5s, "no frame");
  ASSERT_FALSE(channel->error()) << *channel->error();
  EXPECT_EQ(channel->payload().size(), 1024u);

  asio::write(other, asio::buffer(HeaderOnly(wire::FrameType::kHello, 1025)));
  channel->StartReceive();
  RunUntilIdle(io, one, Clock::now() + 5s, "no frame");
  ASSERT_TRUE(channel->error());
  EXPECT_EQ(*channel->error(), "frame type 1 announces 1025 payload bytes; at most 1024 are accepted in this test");
  EXPECT_EQ(channel->header().payload_bytes, 1025u);
  EXPECT_TRUE(channel->payload().empty());
  EXPECT_EQ(channel->bytes_received(), 2 * wire::kHeaderBytes + 1024);
  EXPECT_TRUE(channel->open());
  channel->StartSend(std::make_shared<const std::vector<std::byte>>(wire::EncodeTextFrame(wire::FrameType::kError, "too big")));
  RunUntilIdle(io, one, Clock::now() + 5s, "not sent");
  std::array<std::byte, wire::kHeaderBytes> head;
  asio::read(other, asio::buffer(head));
  EXPECT_EQ(wire::DecodeHeader(head).type, wire::FrameType::kError);
  EXPECT_EQ(wire::DecodeHeader(head).payload_bytes, 7u);
  channel->Close();
  EXPECT_FALSE(channel->open());
}

// Before a peer has proved anything, a worker reads only a small Hello: a header that
// announces a big payload is refused as soon as it arrives, before any of the payload
// is read or allocated (64 pending connections could otherwise make it commit 16 GiB).
TEST(WorkerAuth, ABigFrameBeforeTheHandshakeIsRefusedBeforeItsPayload) {
  Worker w = StartWorker(TinyCheckpoint());
  const int pid = w.process->pid();
  const long rss_before = StatusKiB(pid, "VmRSS");
  std::vector<std::unique_ptr<RawPeer>> peers;
  for (const wire::FrameType type : {wire::FrameType::kHello, wire::FrameType::kLayerRequest}) {
    peers.push_back(std::make_unique<RawPeer>(w.address));
    ASSERT_EQ(peers.back()->Read().first.type, wire::FrameType::kChallenge);
    peers.back()->Write(HeaderOnly(type, 200u << 20));  // 200 MiB announced, never sent
  }
  for (auto& peer : peers) {
    try {
      const auto [head, text] = peer->Read();
      EXPECT_EQ(head.type, wire::FrameType::kError);
      EXPECT_NE(text.find("announces 209715200 payload bytes"), std::string::npos) << text;
      EXPECT_EQ(peer->DrainUntilClosed(), "closed");
    } catch (const std::exception& e) {
      ADD_FAILURE() << "no refusal: " << e.what();
    }
  }
  EXPECT_LT(StatusKiB(pid, "VmRSS") - rss_before, 64 * 1024) << "the worker allocated the announced payloads";
  EXPECT_TRUE(LogSays(w, "refusing the handshake: frame type 1 announces 209715200 payload bytes")) << ReadFile(w.log);
  const EvalRun after = RunEval(TinyCheckpoint(), {"--experts", w.address}, 2);
  EXPECT_EQ(after.run.exit_code, 0) << after.run.err;
}

// Nor does a coordinator read a big frame from a "worker" that has not proved anything,
// in its Challenge or in its HelloAck.
TEST(WorkerAuth, ACoordinatorRefusesABigFrameDuringTheHandshake) {
  for (const wire::FrameType big : {wire::FrameType::kChallenge, wire::FrameType::kHelloAck}) {
    asio::io_context fake_io;
    tcp::acceptor acceptor(fake_io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    const std::string address = fmt::format("127.0.0.1:{}", acceptor.local_endpoint().port());
    std::thread fake([&] {
      tcp::socket s(fake_io);
      acceptor.accept(s);
      boost::system::error_code ec;
      if (big == wire::FrameType::kHelloAck) {
        asio::write(s, asio::buffer(wire::EncodeTextFrame(wire::FrameType::kChallenge, ChallengeJson({wire::kVersion, false, NewNonce()}))),
                    ec);
        std::array<std::byte, wire::kHeaderBytes> head;
        asio::read(s, asio::buffer(head), ec);
        std::vector<std::byte> hello(ec ? 0 : wire::DecodeHeader(head).payload_bytes);
        asio::read(s, asio::buffer(hello), ec);
      }
      asio::write(s, asio::buffer(HeaderOnly(big, 200u << 20)), ec);
      char byte;
      s.read_some(asio::buffer(&byte, 1), ec);  // until the coordinator closes
    });
    asio::io_context io;
    const auto t0 = Clock::now();
    try {
      ConnectAndHandshake(io, address, TinyHello(address), 4s);
      ADD_FAILURE() << "the handshake succeeded";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("frame type {} announces 209715200 payload bytes", static_cast<int>(big))),
                std::string::npos)
          << e.what();
    }
    EXPECT_LT(Clock::now() - t0, 2s) << "the coordinator waited for the announced payload";
    fake.join();
  }
}

// The token changes who may connect, never what is computed.
TEST(WorkerAuth, MatchingTokensDecodeExactlyAsWithoutOne) {
  const auto& model = TinyCheckpoint();
  std::vector<Worker> plain, guarded;
  const auto token = WriteTokenFile(kSecret);
  for (int i = 0; i < 2; ++i) {
    plain.push_back(StartWorker(model));
    guarded.push_back(StartWorker(model, "worker", {"--worker-token-file", token.string()}));
  }
  const EvalRun reference = RunEval(model, {"--experts", plain[0].address + "," + plain[1].address});
  ASSERT_EQ(reference.run.exit_code, 0) << reference.run.err;
  // The coordinator reads the same token from its environment.
  const EvalRun with_token = [&] {
    ScopedEnv env(kWorkerTokenEnv, std::string("  ") + kSecret + "\n");  // trimmed
    return RunEval(model, {"--experts", guarded[0].address + "," + guarded[1].address});
  }();
  ASSERT_EQ(with_token.run.exit_code, 0) << with_token.run.err;
  EXPECT_EQ(with_token.logits, reference.logits);
  EXPECT_EQ(with_token.tokens, reference.tokens);
  // Spawned workers: a fresh token of their own.
  const EvalRun spawned = RunEval(model, {"--spawn-workers", "2"});
  ASSERT_EQ(spawned.run.exit_code, 0) << spawned.run.err;
  EXPECT_EQ(spawned.logits, reference.logits);
  EXPECT_EQ(spawned.tokens, reference.tokens);
}

TEST(WorkerAuth, AnIdleConnectionNeitherBlocksACoordinatorNorOutlivesTheHandshakeTimeout) {
  Worker w = StartWorker(TinyCheckpoint(), "worker", {"--handshake-timeout-s", "1"});
  RawPeer idle(w.address);  // connects, then says nothing
  const auto t0 = std::chrono::steady_clock::now();
  const EvalRun r = RunEval(TinyCheckpoint(), {"--experts", w.address, "--connect-timeout-ms", "5000"}, 2);
  EXPECT_EQ(r.run.exit_code, 0) << r.run.err;
  EXPECT_EQ(idle.DrainUntilClosed(), "closed") << "the idle connection must be closed, not left open";
  const auto held = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(held, 900ms);
  EXPECT_LT(held, 4s);
  EXPECT_TRUE(LogSays(w, "no complete Hello within the 1000 ms handshake timeout; closing")) << ReadFile(w.log);
}

// Silent connections cannot lock the coordinator out: one address holds at most 8 of the
// 64 pending places, and a newcomer evicts the oldest pending connection of its own
// address (when that address holds 8) or of all (when 64 are pending). Other loopback
// addresses (127.0.0.x) stand for other hosts.
TEST(WorkerAuth, SilentConnectionsLockNoCoordinatorOut) {
  Worker w = StartWorker(TinyCheckpoint());  // a 10 s handshake timeout: the silent ones stay pending
  std::vector<std::unique_ptr<RawPeer>> silent;
  auto flood = [&](const std::vector<std::string>& from, int each) {
    for (const std::string& address : from) {
      for (int i = 0; i < each; ++i) {
        silent.push_back(std::make_unique<RawPeer>(w.address, address));
        // Its Challenge: the worker has accepted it and it is pending.
        ASSERT_EQ(silent.back()->Read().first.type, wire::FrameType::kChallenge);
      }
    }
  };
  auto coordinator = [&](const std::string& why) {
    const EvalRun r = RunEval(TinyCheckpoint(), {"--experts", w.address, "--connect-timeout-ms", "5000"}, 2);
    EXPECT_EQ(r.run.exit_code, 0) << why << ": " << r.run.err;
  };
  // One hostile address: it never holds more than 8, so the coordinator is admitted.
  flood({"127.0.0.2"}, 64);
  EXPECT_EQ(silent.front()->DrainUntilClosed(), "closed") << "the oldest of 127.0.0.2 must have been evicted";
  coordinator("64 silent connections from another address");
  EXPECT_TRUE(LogSays(w, "8 connections from 127.0.0.2 are waiting for their handshake; closing the oldest")) << ReadFile(w.log);
  // The coordinator's own address flooded: it evicts that address's oldest.
  flood({"127.0.0.1"}, 64);
  coordinator("64 silent connections from the coordinator's address");
  // Many addresses fill all 64 places: the newcomer evicts the oldest of all.
  silent.clear();
  std::vector<std::string> many;
  for (int i = 10; i < 18; ++i) many.push_back(fmt::format("127.0.0.{}", i));
  flood(many, 8);
  coordinator("64 silent connections from 8 other addresses");
  EXPECT_TRUE(LogSays(w, "64 connections are waiting for their handshake; closing the oldest")) << ReadFile(w.log);
}

TEST(WorkerAuth, ASecondCoordinatorIsRefusedWhileTheFirstHoldsTheWorker) {
  Worker w = StartWorker(TinyCheckpoint());
  asio::io_context io;
  auto first = ConnectAndHandshake(io, w.address, TinyHello(w.address), 10s);
  const auto t0 = std::chrono::steady_clock::now();
  const EvalRun second = RunEval(TinyCheckpoint(), {"--experts", w.address}, 2);
  EXPECT_EQ(second.run.exit_code, 3);
  EXPECT_NE(ErrorLine(second.run.err)
                .find("expert worker rank 1 (" + w.address + "): refused the handshake: this worker already serves another coordinator"),
            std::string::npos)
      << second.run.err;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 8s);
  first->Close();
  const EvalRun after = RunEval(TinyCheckpoint(), {"--experts", w.address}, 2);
  EXPECT_EQ(after.run.exit_code, 0) << after.run.err;
}

TEST(WorkerAuth, AnIdleSessionIsClosedAfterTheIdleTimeout) {
  Worker w = StartWorker(TinyCheckpoint(), "worker", {"--idle-timeout-s", "1"});
  asio::io_context io;
  auto channel = ConnectAndHandshake(io, w.address, TinyHello(w.address), 10s);
  const auto t0 = std::chrono::steady_clock::now();
  channel->StartReceive();
  FrameChannel* one[] = {channel.get()};
  RunUntilIdle(io, one, Clock::now() + 5s, "the worker kept the idle session");
  ASSERT_TRUE(channel->error().has_value());
  EXPECT_EQ(*channel->error(), "closed the connection");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 900ms);
  EXPECT_TRUE(LogSays(w, "no request for 1 s (--idle-timeout-s); closing the session")) << ReadFile(w.log);
  const EvalRun next = RunEval(TinyCheckpoint(), {"--experts", w.address}, 2);
  EXPECT_EQ(next.run.exit_code, 0) << next.run.err;
}

// A connection whose thread cannot start (here: too little address space left for its
// stack) is closed and logged; the worker goes on serving.
TEST(WorkerAuth, AConnectionWhoseThreadCannotStartIsClosedAndTheWorkerGoesOn) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator does not survive an address-space limit";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "AddressSanitizer's allocator does not survive an address-space limit";
#endif
#endif
  Worker w = StartWorker(TinyCheckpoint());
  const int pid = w.process->pid();
  rlimit old{};
  ASSERT_EQ(::prlimit(pid, RLIMIT_AS, nullptr, &old), 0) << std::strerror(errno);
  const long size_kib = StatusKiB(pid, "VmSize");
  ASSERT_GT(size_kib, 0);
  // Room for small allocations, not for a thread's stack (8 MiB, or 2 MiB with an unlimited stack rlimit).
  const rlimit tight{static_cast<rlim_t>(size_kib + 1024) * 1024, old.rlim_max};
  ASSERT_EQ(::prlimit(pid, RLIMIT_AS, &tight, nullptr), 0) << std::strerror(errno);
  {
    RawPeer peer(w.address);
    EXPECT_EQ(peer.DrainUntilClosed(), "closed");
  }
  EXPECT_TRUE(LogSays(w, "cannot start a thread for this connection")) << ReadFile(w.log);
  EXPECT_TRUE(w.process->running()) << ReadFile(w.log);
  if (!w.process->running()) return;
  ASSERT_EQ(::prlimit(pid, RLIMIT_AS, &old, nullptr), 0) << std::strerror(errno);
  const EvalRun after = RunEval(TinyCheckpoint(), {"--experts", w.address}, 2);
  EXPECT_EQ(after.run.exit_code, 0) << after.run.err;
}

TEST(WorkerAuth, AWorkerOnANonLoopbackAddressNeedsATokenOrConsent) {
  const auto refused = RunCommand(TANDEM_RT_BIN, {"expert", "--listen", "0.0.0.0:0", "--model", TinyCheckpoint().string()}, 20s);
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("TANDEM_WORKER_TOKEN"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--allow-unauthenticated"), std::string::npos) << refused.err;
  for (const std::vector<std::string>& extra : {std::vector<std::string>{"--allow-unauthenticated"},
                                                std::vector<std::string>{"--worker-token-file", WriteTokenFile(kSecret).string()}}) {
    std::vector<std::string> args = {"expert", "--listen", "0.0.0.0:0", "--model", TinyCheckpoint().string()};
    args.insert(args.end(), extra.begin(), extra.end());
    ChildProcess worker(TANDEM_RT_BIN, args, (TempDir("worker") / "stderr.log").string());
    const auto line = worker.ReadLine(20s);
    EXPECT_TRUE(line && line->find("listening on 0.0.0.0:") != std::string::npos) << extra[0];
  }
  // On loopback without a token it starts, and says that anyone local may use it.
  Worker local = StartWorker(TinyCheckpoint());
  EXPECT_NE(ReadFile(local.log).find("warning: no worker token"), std::string::npos);
}

TEST(WorkerToken, ComesFromTheFileOrTheEnvironmentTrimmedAndNeverEmpty) {
  ::unsetenv(kWorkerTokenEnv);
  EXPECT_EQ(LoadWorkerToken({}), std::nullopt);
  {
    ScopedEnv env(kWorkerTokenEnv, " from-env-0123456789 \n");
    EXPECT_EQ(LoadWorkerToken({}), "from-env-0123456789");
    EXPECT_EQ(LoadWorkerToken(WriteTokenFile("\tfrom-file-0123456789  \nsecond line")), "from-file-0123456789") << "the file wins";
  }
  {
    ScopedEnv env(kWorkerTokenEnv, "  ");
    EXPECT_THROW(LoadWorkerToken({}), std::invalid_argument);
  }
  EXPECT_THROW(LoadWorkerToken(WriteTokenFile("")), std::invalid_argument);
  EXPECT_THROW(LoadWorkerToken(TempDir("token") / "missing"), std::invalid_argument);
  const auto shared = TempDir("token") / "shared";
  WriteFile(shared, "readable-by-all\n");
  std::filesystem::permissions(shared, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                           std::filesystem::perms::group_read | std::filesystem::perms::others_read);
  try {
    LoadWorkerToken(shared);
    ADD_FAILURE() << "a token file others can read must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("chmod 600"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("readable-by-all"), std::string::npos) << e.what();
  }
}

// A recorded handshake lets anyone test guesses of the token offline: a token shorter
// than 16 characters is refused (exit 2), naming where it came from, never itself.
TEST(WorkerToken, AShortTokenIsRefusedNamingItsSource) {
  auto refusal = [](const std::function<void()>& load) -> std::string {
    try {
      load();
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(accepted)";
  };
  const auto short_file = WriteTokenFile("0123456789abcde");  // 15 characters
  {
    ScopedEnv env(kWorkerTokenEnv, "  short-token\n");
    const std::string from_env = refusal([] { LoadWorkerToken({}); });
    EXPECT_EQ(from_env.rfind("TANDEM_WORKER_TOKEN holds a token of 11 characters", 0), 0u) << from_env;
    const std::string from_file = refusal([&] { LoadWorkerToken(short_file); });
    EXPECT_EQ(from_file.rfind("--worker-token-file " + short_file.string() + " holds a token of 15 characters", 0), 0u) << from_file;
    for (const std::string& what : {from_env, from_file}) {
      EXPECT_NE(what.find("at least 16"), std::string::npos) << what;
      EXPECT_NE(what.find("openssl rand -hex 32"), std::string::npos) << what;
      EXPECT_EQ(what.find("short-token"), std::string::npos) << what;
      EXPECT_EQ(what.find("0123456789abcde"), std::string::npos) << what;
    }
    EXPECT_EQ(LoadWorkerToken(WriteTokenFile("0123456789abcdef")), "0123456789abcdef") << "16 characters suffice (the file wins)";
  }
  // Both a worker and a coordinator stop at once (exit 2), before listening or connecting.
  const auto worker = RunCommand(
      TANDEM_RT_BIN,
      {"expert", "--listen", "127.0.0.1:0", "--model", TinyCheckpoint().string(), "--worker-token-file", short_file.string()}, 20s);
  EXPECT_EQ(worker.exit_code, 2) << worker.err;
  EXPECT_NE(ErrorLine(worker.err).find("openssl rand -hex 32"), std::string::npos) << worker.err;
  const EvalRun coordinator = [] {
    ScopedEnv env(kWorkerTokenEnv, "short-token");
    return RunEval(TinyCheckpoint(), {"--experts", "127.0.0.1:1"}, 2);
  }();
  EXPECT_EQ(coordinator.run.exit_code, 2) << coordinator.run.err;
  EXPECT_NE(ErrorLine(coordinator.run.err).find("TANDEM_WORKER_TOKEN holds a token of 11 characters"), std::string::npos)
      << coordinator.run.err;
}

}  // namespace
}  // namespace tandem::rt
