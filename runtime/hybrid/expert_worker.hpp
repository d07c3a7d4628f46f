#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "runtime/kernels/device.hpp"

namespace tandem::rt {

struct ExpertWorkerOptions {
  std::string listen = "127.0.0.1:0";  // port 0: the system picks a free port
  std::filesystem::path model;
  int threads = 0;
  std::string role = "worker";                     // "worker" | "peer"
  std::chrono::milliseconds frame_timeout{30000};  // a frame that has started must finish within this
  // The shared secret a coordinator must prove in the handshake (worker_token.hpp).
  // None: anyone who can connect may use the worker, which the constructor allows on a
  // loopback address (with a warning) and elsewhere only with allow_unauthenticated.
  std::optional<std::string> token;
  bool allow_unauthenticated = false;
  // From accept to a complete Hello. A connection that has not proved itself by then is
  // closed, so an idle or slow one never holds anything for longer.
  std::chrono::milliseconds handshake_timeout{10000};
  // A coordinator's session with no request for this long is closed; zero: never. A
  // serving coordinator sends nothing between user requests, for hours perhaps, so the
  // default waits; TCP keep-alive (frame_channel.cpp) still ends a session whose
  // coordinator's host vanished within a minute.
  std::chrono::milliseconds idle_timeout{0};
  // Benchmarking aid: load no weights and answer every request with zero partials,
  // so a round trip measures the transport alone. Never for real use.
  bool transport_only = false;
  // Benchmarking aid: emulate a network link by handling each layer request this
  // long after it arrived (the round trip a real link would add, as a sleep that
  // leaves the CPU free). Zero: answer at once.
  std::chrono::microseconds emulated_rtt{0};
  // kCuda: the slices are copied to the GPU at the handshake and computed there.
  Device device = Device::kCpu;
  // Read the slices where the checkpoint is mapped (WeightPlacement::kMapped).
  bool map_weights = false;
  // Testing aid ($TANDEM_DEBUG_LOAD_DELAY_MS): sleep this long before reading each
  // expert slice, so that a small checkpoint loads as slowly as a big one.
  std::chrono::milliseconds debug_load_delay{0};
};

// `tandem-rt expert`: serves one coordinator at a time (its session). Connections are
// accepted concurrently: each gets the worker's Challenge at once and must answer with a
// Hello that proves the token (when the worker has one) within the handshake timeout;
// only then does it take the session, so a connection that says nothing, or the wrong
// thing, never locks the real coordinator out. A second authenticated coordinator is
// refused while a session runs. In its session, the worker opens the checkpoint (at the
// first session), checks the model revision, loads exactly the slices the Hello names,
// reporting its progress (LoadProgress frames, a few a second), and answers HelloAck; from then on it answers each layer request with one
// partial row per input row, summed over the routes to the experts it holds (route-sum). A malformed frame or a refused handshake closes
// that connection with the reason logged (and sent, for the handshake: without local details such as the model path unless the peer proved
// the token); the worker goes on serving.
class ExpertWorker {
 public:
  // Binds the listening socket. Throws std::invalid_argument for a non-loopback address
  // without a token, unless allow_unauthenticated.
  explicit ExpertWorker(ExpertWorkerOptions options);
  ~ExpertWorker();

  std::string address() const;  // host:port actually bound
  void Run();                   // serves until the process ends

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tandem::rt
