#pragma once

// A stand-in expert worker inside the test process (without a token), speaking the wire protocol with the
// runtime's own codecs: it accepts one coordinator, answers its handshake, then answers
// every layer request with zero partials — or misbehaves as told, to check that the
// coordinator blames it (and only it).
#include <cstdint>
#include <memory>
#include <string>

namespace tandem::testing {

enum class FakeFault {
  kNone,
  kWrongRequestId,  // echoes the request id plus one
  kNanPartials,     // one partial value is NaN
  kHugePartials,    // finite partials far beyond anything a model computes
};

class FakeWorker {
 public:
  // Misbehaves from the `fault_at`-th layer request on (0: the first).
  explicit FakeWorker(FakeFault fault, int fault_at = 0);
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
