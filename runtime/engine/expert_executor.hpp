#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/engine/rank_stats.hpp"
#include "runtime/engine/router.hpp"
#include "runtime/engine/row.hpp"

namespace tandem::rt {

// Computes the expert part of one MoE layer for a batch of rows: the routed
// experts and the shared experts. The engine calls Start once the routes are
// known and Finish when it needs the result, so an implementation can have
// remote workers compute while it does its own share. Implementations run
// everything locally (LocalExpertExecutor) or fan out to expert workers.
class ExpertExecutor {
 public:
  virtual ~ExpertExecutor() = default;

  // x: [rows × hidden] normalised hidden states; routes: rows × num_experts_per_tok
  // (row-major). `rows`, `x` and `routes` stay valid until Finish returns.
  virtual void Start(int layer, std::span<const Row> rows, const float* x, std::span<const ExpertRoute> routes) = 0;

  // out: [rows × hidden] = Σ_k weight·expert(x[r]) over the routes, plus the shared
  // experts, summed in a fixed order so the result never depends on the batch.
  // Throws std::runtime_error when a remote part cannot be computed.
  virtual void Finish(float* out) = 0;

  // What each remote rank has answered so far (traffic, round trips), for /v1/stats;
  // empty for an executor that computes everything in this process.
  virtual std::vector<RankStats> RankStatistics() const { return {}; }

  // Thread-safe (any thread, while Finish waits): which remote ranks the step in flight
  // has waited on past the executor's late threshold, for how long; empty otherwise.
  virtual std::string Late() const { return ""; }
};

}  // namespace tandem::rt
