#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "runtime/engine/moe_slices.hpp"
#include "runtime/hybrid/handshake_auth.hpp"
#include "runtime/hybrid/wire_protocol.hpp"
#include "runtime/model/load_progress.hpp"

namespace tandem::rt {

// The worker's first frame on a connection (JSON in a kChallenge frame), sent at once:
// the protocol it speaks, whether it holds a token, and a fresh nonce to prove it over.
struct Challenge {
  int protocol = wire::kVersion;
  bool token_required = false;
  Nonce nonce{};
};

// A coordinator holding a token proves it in its Hello (handshake_auth.hpp).
struct HelloAuth {
  Nonce nonce{};  // the coordinator's own
  Mac proof{};    // CoordinatorProof(token, challenge nonce, nonce)
};

// The coordinator's first frame on a connection (JSON in a kHello frame): who the
// worker is in the layout and which slices it must hold.
struct Hello {
  int protocol = wire::kVersion;
  std::string model_revision;
  int rank = 0;
  int world = 0;
  std::string role;  // "worker" | "peer"
  wire::RequestShape shape;
  wire::Dtype wire_dtype = wire::Dtype::kBf16;
  wire::Dtype partial_dtype = wire::Dtype::kF32;
  std::vector<LayerSlice> slices;
  std::optional<HelloAuth> auth;  // filled in by ConnectAndHandshake when it holds a token
};

// While it loads its slices the worker reports how far it is (JSON in kLoadProgress
// frames, between the Hello and its HelloAck), so that the coordinator waits for as long
// as a load advances, and no longer.

// The worker's answer (JSON in a kHelloAck frame) once its slices are loaded.
struct HelloAck {
  std::string model_revision;
  std::uint64_t weight_bytes = 0;
  double load_seconds = 0.0;
  std::optional<Mac> proof;  // WorkerProof(token, ...) from a worker holding a token
};

std::string ChallengeJson(const Challenge& challenge);
Challenge ParseChallenge(const std::string& json);  // throws wire::WireError naming the field
std::string HelloJson(const Hello& hello);
Hello ParseHello(const std::string& json);  // throws wire::WireError naming the field
std::string HelloAckJson(const HelloAck& ack);
HelloAck ParseHelloAck(const std::string& json);
std::string LoadProgressJson(const LoadProgress& progress);
// Throws wire::WireError naming the field; bytes_done > bytes_total is refused.
LoadProgress ParseLoadProgress(const std::string& json);

class FrameChannel;

// One rank to hand its slices.
struct HandshakeTarget {
  std::string address;
  Hello hello;
};

struct HandshakeOptions {
  // Connecting and the worker's Challenge must each come within it; then, while the
  // worker loads its slices, no longer than this may pass without progress: a
  // LoadProgress report with more bytes done, or of a later phase.
  std::chrono::milliseconds timeout{10000};
  std::optional<std::string> token;  // proved to every rank, which must prove it back
  // Each report that advances, with the index of its target.
  std::function<void(std::size_t, const LoadProgress&)> on_progress;
};

// A rank failed its handshake: its index among the targets, and why.
class HandshakeError : public std::runtime_error {
 public:
  HandshakeError(std::size_t index, const std::string& reason) : std::runtime_error(reason), index_(index) {}
  std::size_t index() const { return index_; }

 private:
  std::size_t index_;
};

// Connects to every target, then runs the handshakes at once, so that the workers load
// their slices side by side: reads each worker's Challenge, sends its Hello (with a proof
// of the token when there is one), follows its LoadProgress reports, and waits for its
// HelloAck and checks the worker's proof. Returns the channels in target order (and the
// acks, when asked). Throws HandshakeError for the first rank that refuses (a model
// revision mismatch, a missing shard on its host, "worker token mismatch"), cannot be
// reached, stops answering, or stops making progress; every connection is closed then.
// The token never appears in a message.
std::vector<std::unique_ptr<FrameChannel>> HandshakeAll(boost::asio::io_context& io, const std::vector<HandshakeTarget>& targets,
                                                        const HandshakeOptions& options, std::vector<HelloAck>* acks = nullptr);

// HandshakeAll for one rank, with `timeout` as HandshakeOptions::timeout; throws
// std::runtime_error (a HandshakeError) with the reason.
std::unique_ptr<FrameChannel> ConnectAndHandshake(boost::asio::io_context& io, const std::string& address, const Hello& hello,
                                                  std::chrono::milliseconds timeout, HelloAck* ack = nullptr,
                                                  const std::optional<std::string>& token = std::nullopt);

}  // namespace tandem::rt
