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
// computes (Reduce makes the layer's output of their sum).
class ExpertSlices {
 public:
  virtual ~ExpertSlices() = default;
  // out [rows × hidden]: this rank's share for the rows `x` ([rows × hidden]) routed by
  // `routes` (rows × top_k); zero rows when it holds nothing of `layer`.
  // `out` is [rows × PartialWidth(layer, top_k)].
  virtual void Compute(int layer, const float* x, std::int64_t rows, std::span<const ExpertRoute> routes, int top_k, double* out) = 0;

  // Partial values per row that a rank holding `held` writes: hidden(), or, for a model that
  // rounds each expert's output whole (DeepSeek V4.1) on a rank holding column slices of the
  // experts, (1 + top_k) · hidden(): the share of what it holds whole, then each route's
  // unrounded part, which Reduce rounds once every rank's part of it is summed.
  virtual std::int64_t PartialWidthOf(const LayerSlice& /*held*/, int /*top_k*/) const { return hidden(); }
  // The same for what this rank holds of `layer`.
  virtual std::int64_t PartialWidth(int /*layer*/, int /*top_k*/) const { return hidden(); }
  // out [rows × hidden], rounded once, from `sums` [rows × width]: every rank's partial added
  // element by element (a narrower partial into the first values of each row).
  virtual void Reduce(const double* sums, std::int64_t rows, std::int64_t width, float* out) const {
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t d = 0; d < hidden(); ++d) out[r * hidden() + d] = static_cast<float>(sums[r * width + d]);
    }
  }
  virtual std::uint64_t weight_bytes() const = 0;
  virtual std::int64_t hidden() const = 0;
};

}  // namespace tandem::rt
