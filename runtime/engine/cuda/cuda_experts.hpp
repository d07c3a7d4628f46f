#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "runtime/engine/router.hpp"
#include "runtime/model/load_progress.hpp"

namespace tandem::rt {

class MoeSlices;

// MoeSlices on the GPU: the same slices, copied to the device once, computed with
// rows grouped by expert, under MoeSlices::Compute's contract (rows and routes in
// host memory, double partials out): what an expert worker started with
// `--device cuda` serves. The down projections accumulate in fp32 on the device
// (MoeSlices' exact double form is the CPU's); the route sum runs in double, k
// ascending, then the shared slice, as on the CPU.
class CudaMoeSlices {
 public:
  // Throws std::invalid_argument when this build has no CUDA backend or no device can be used.
  // `progress` hears (Phase::kUpload) before the first layer and after each: the host
  // bytes copied so far, of all.
  static std::unique_ptr<CudaMoeSlices> Upload(const MoeSlices& host, const LoadProgressFn& progress = {});

  virtual ~CudaMoeSlices() = default;
  virtual std::uint64_t weight_bytes() const = 0;
  virtual void Compute(int layer, const float* x, std::int64_t rows, std::span<const ExpertRoute> routes, int top_k, double* out) = 0;
};

}  // namespace tandem::rt
