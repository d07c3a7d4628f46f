#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "runtime/engine/moe_slices.hpp"
#include "runtime/hybrid/wire_protocol.hpp"

namespace tandem::rt {

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
};

// The worker's answer (JSON in a kHelloAck frame) once its slices are loaded.
struct HelloAck {
  std::string model_revision;
  std::uint64_t weight_bytes = 0;
  double load_seconds = 0.0;
};

std::string HelloJson(const Hello& hello);
Hello ParseHello(const std::string& json);  // throws wire::WireError naming the field
std::string HelloAckJson(const HelloAck& ack);
HelloAck ParseHelloAck(const std::string& json);

class FrameChannel;

// Connects to a rank and performs the handshake within `timeout`: sends `hello`,
// waits for HelloAck. Throws std::runtime_error with the rank's own reason when it
// refuses (e.g. a model revision mismatch), cannot be reached or times out.
std::unique_ptr<FrameChannel> ConnectAndHandshake(boost::asio::io_context& io, const std::string& address, const Hello& hello,
                                                  std::chrono::milliseconds timeout, HelloAck* ack = nullptr);

}  // namespace tandem::rt
