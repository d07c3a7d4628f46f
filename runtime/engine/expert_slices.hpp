#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/engine/router.hpp"

namespace tandem::rt {

// What one rank holds of one MoE layer: routed experts [expert_begin, expert_end)
// restricted to intermediate columns [inter_begin, inter_end), and columns
// [shared_begin, shared_end) of the shared experts. Empty ranges hold nothing.
struct LayerSlice {
  int layer = 0;
  int expert_begin = 0;
  int expert_end = 0;
  int inter_begin = 0;
  int inter_end = 0;
  int shared_begin = 0;
  int shared_end = 0;

  bool HoldsRouted() const { return expert_end > expert_begin && inter_end > inter_begin; }
  bool HoldsShared() const { return shared_end > shared_begin; }
};

// The experts a rank computes, whatever the architecture (MoeSlices: DeepSeek V2/V3;
// V41MoeSlices: DeepSeek V4.1): its share of a MoE layer's output for a batch of rows,
// in double, so that the shares of every rank add up, in any order, to what one process
// computes.
class ExpertSlices {
 public:
  virtual ~ExpertSlices() = default;
  // out [rows × hidden]: this rank's share for the rows `x` ([rows × hidden]) routed by
  // `routes` (rows × top_k); zero rows when it holds nothing of `layer`.
  virtual void Compute(int layer, const float* x, std::int64_t rows, std::span<const ExpertRoute> routes, int top_k, double* out) = 0;
  virtual std::uint64_t weight_bytes() const = 0;
  virtual std::int64_t hidden() const = 0;
};

}  // namespace tandem::rt
