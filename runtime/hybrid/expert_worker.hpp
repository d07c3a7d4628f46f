#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "runtime/kernels/device.hpp"

namespace tandem::rt {

struct ExpertWorkerOptions {
  std::string listen = "127.0.0.1:0";  // port 0: the system picks a free port
  std::filesystem::path model;
  int threads = 0;
  std::string role = "worker";                     // "worker" | "peer"
  std::chrono::milliseconds frame_timeout{30000};  // a frame that has started must finish within this
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
};

// `tandem-rt expert`: serves one coordinator connection at a time. The first frame
// of a connection is the coordinator's Hello: the worker opens the checkpoint (only
// then), checks the model revision, loads exactly its slices and answers HelloAck;
// from then on it answers each layer request with one partial row per input row,
// summed over the routes to the experts it holds (route-sum). A malformed frame or a
// revision mismatch closes that connection with the reason logged (and sent, for the
// handshake); the worker then waits for the next connection.
class ExpertWorker {
 public:
  explicit ExpertWorker(ExpertWorkerOptions options);  // binds the listening socket
  ~ExpertWorker();

  std::string address() const;  // host:port actually bound
  void Run();                   // serves until the process ends

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tandem::rt
