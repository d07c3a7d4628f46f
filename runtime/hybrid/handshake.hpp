#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "runtime/engine/moe_slices.hpp"
#include "runtime/hybrid/handshake_auth.hpp"
#include "runtime/hybrid/wire_protocol.hpp"

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

class FrameChannel;

// Connects to a rank and performs the handshake within `timeout`: reads the worker's
// Challenge, sends `hello` (with a proof of `token` when there is one), waits for
// HelloAck and checks the worker's proof. Throws std::runtime_error with the reason when
// the rank refuses (e.g. a model revision mismatch, "worker token mismatch"), when the
// tokens do not agree ("worker requires a token", "worker token mismatch"), or when it
// cannot be reached or times out. The token never appears in a message.
std::unique_ptr<FrameChannel> ConnectAndHandshake(boost::asio::io_context& io, const std::string& address, const Hello& hello,
                                                  std::chrono::milliseconds timeout, HelloAck* ack = nullptr,
                                                  const std::optional<std::string>& token = std::nullopt);

}  // namespace tandem::rt
