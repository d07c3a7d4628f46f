#pragma once

#include <cstdint>
#include <span>

#include "runtime/engine/router.hpp"

namespace tandem::rt {

// Runs the routed experts of one MoE layer for a batch of rows. The engine calls
// it once per MoE layer and step; implementations run the experts locally or on
// remote expert workers.
class ExpertExecutor {
 public:
  virtual ~ExpertExecutor() = default;

  // x: [rows × hidden] normalised hidden states; routes: rows × top_k (row-major);
  // out: [rows × hidden] = Σ_k routes[r, k].weight · expert_{routes[r, k].expert}(x[r]),
  // summed in k order so the result is independent of the batch.
  virtual void Run(int layer, const float* x, std::int64_t rows, std::span<const ExpertRoute> routes, int top_k,
                   float* out) = 0;
};

}  // namespace tandem::rt
