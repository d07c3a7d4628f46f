#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/engine/expert_executor.hpp"
#include "runtime/engine/expert_slices.hpp"
#include "runtime/hybrid/placement_plan.hpp"
#include "runtime/kernels/device.hpp"

namespace tandem::rt {

class Checkpoint;
class ThreadPool;

// A remote rank failed: it could not be reached, refused the handshake, closed the
// connection, stalled past the timeout or sent a malformed frame. The message names it.
class RemoteExpertError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RemoteOptions {
  // Connecting, the worker's Challenge, and then the longest a rank may go without loading
  // progress while it loads its slices (HandshakeOptions::timeout).
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds round_trip_timeout{10000};  // one layer's request → all partials
  // A rank that has not answered a layer for this long is late (Late(): /health says
  // degraded) until it answers or the round trip times out.
  std::chrono::milliseconds late_after{1000};
  // How long to poll (yielding) for partials before blocking; see RunUntilIdle.
  std::chrono::microseconds spin{0};
  // kCuda: the coordinator's own slices (shared experts, coordinator-resident layers)
  // are computed on the GPU while the remote ranks work.
  Device device = Device::kCpu;
  // The worker token (worker_token.hpp) this coordinator proves to every rank, and
  // requires each rank to prove back; none: only ranks without a token are accepted.
  std::optional<std::string> token;
  // Hears a "loading progress: …" line per rank that has been loading for a second, then
  // every two seconds while it advances, and one when it has loaded; none: silent.
  std::function<void(const std::string&)> progress_log;
};

// Where the coordinator's time in the MoE layers goes, summed over steps.
struct CoordinatorTimes {
  std::uint64_t layers = 0;         // MoE layer steps
  std::uint64_t remote_layers = 0;  // of which some rank other than this one took part
  std::uint64_t encode_ns = 0;      // rounding and serialising the request, handing it to the kernel
  std::uint64_t local_ns = 0;       // this rank's own share (shared experts, local layers)
  std::uint64_t wait_ns = 0;        // after the local share, until every partial has arrived
  std::uint64_t reduce_ns = 0;      // parsing the partials and summing them
};

// The coordinator side of the hybrid layout: per MoE layer it sends one canonical
// request (all rows, all routes, hidden rows in the wire dtype) to every remote rank
// that holds part of the layer, computes its own share (the shared experts, and the
// routed experts of coordinator-resident layers) while they work, then sums every
// rank's partial in rank order in fp32. Results never depend on arrival order.
//
// A rank that fails, stalls past the round-trip timeout or sends a malformed frame
// makes Finish throw RemoteExpertError naming the rank; from then on the executor
// is unhealthy and every call throws at once. The constructor throws it too when
// a rank cannot be reached or refuses the handshake.
class RemoteExpertExecutor : public ExpertExecutor {
 public:
  RemoteExpertExecutor(const Checkpoint& ckpt, PlacementPlan plan, const Layout& layout, ThreadPool* pool, RemoteOptions options = {});
  // Any architecture: `moe` its MoE as the plan reads it (V41MoeConfig for DeepSeek V4.1),
  // `model_dir` the checkpoint whose revision every rank must hold, `local` rank 0's own
  // slices (plan.ranks[0]). RemoteOptions::device must be kCpu.
  RemoteExpertExecutor(const ModelConfig& moe, const std::filesystem::path& model_dir, std::unique_ptr<ExpertSlices> local,
                       PlacementPlan plan, const Layout& layout, ThreadPool* pool, RemoteOptions options = {});
  ~RemoteExpertExecutor() override;

  void Start(int layer, std::span<const Row> rows, const float* x, std::span<const ExpertRoute> routes) override;
  void Finish(float* out) override;

  bool healthy() const;
  const std::string& failure() const;  // empty while healthy
  std::vector<RankStats> RankStatistics() const override;
  std::string Late() const override;
  const CoordinatorTimes& Times() const;
  const PlacementPlan& plan() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tandem::rt
