#pragma once

// A stand-in expert worker inside the test process (without a token), speaking the wire protocol with the
// runtime's own codecs: it accepts one coordinator, answers its handshake, then answers
// every layer request with zero partials — or misbehaves as told, to check that the
// coordinator blames it (and only it).
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/model/load_progress.hpp"

namespace tandem::testing {

enum class FakeFault {
  kNone,
  kWrongRequestId,  // echoes the request id plus one
  kNanPartials,     // one partial value is NaN
  kHugePartials,    // finite partials far beyond anything a model computes
};

// What the fake sends between the Hello and its HelloAck: each report after its pause;
// then the HelloAck, or (ack = false) nothing more until the coordinator closes.
struct FakeLoad {
  std::vector<std::pair<std::chrono::milliseconds, rt::LoadProgress>> reports;
  bool ack = true;
};

class FakeWorker {
 public:
  // Misbehaves from the `fault_at`-th layer request on (0: the first).
  explicit FakeWorker(FakeFault fault, int fault_at = 0, FakeLoad load = {});
  ~FakeWorker();
  FakeWorker(const FakeWorker&) = delete;
  FakeWorker& operator=(const FakeWorker&) = delete;

  std::string address() const;  // 127.0.0.1:PORT
  int requests() const;         // layer requests answered so far

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tandem::testing
