#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "runtime/engine/expert_slices.hpp"
#include "runtime/engine/v41_weights.hpp"
#include "runtime/model/load_progress.hpp"

namespace tandem::rt {

class ThreadPool;
class V41Checkpoint;
struct V41Config;

// One DeepSeek V4.1 expert on `count` rows, as the reference's Expert: gate and up (FP4, or
// FP8 for the shared expert, every input row quantized to E4M3 per 32), the SwiGLU clamp
// (`limit` > 0: up within ±limit, gate at most limit), silu(gate) · up in fp32, times the
// row's routing weight (`weights`, none for the shared expert) before the down projection,
// rounded to bf16 and projected down; `out` [count × dim] gets bf16 values.
void V41ExpertForward(const V41Expert& e, const float* x, const float* weights, std::int64_t count, float limit, float* out,
                      ThreadPool* pool);

// The V4.1 experts one rank holds, and their compute (ExpertSlices). The reference rounds
// each expert's whole output to bf16 before the MoE sums them, so an expert is held whole:
// a slice of the intermediate columns is refused (std::invalid_argument, which names the
// layout that splits it). The held experts' bf16 outputs are summed in double, exact, so
// the shares of several ranks add up to the single process's sum in any order.
class V41MoeSlices : public ExpertSlices {
 public:
  V41MoeSlices(const V41Checkpoint& ckpt, const std::vector<LayerSlice>& slices, ThreadPool* pool, const LoadProgressFn& progress = {});

  // out[r] = Σ over held experts routed to r of expert(x[r]) (weights applied inside), plus
  // the shared expert where held.
  void Compute(int layer, const float* x, std::int64_t rows, std::span<const ExpertRoute> routes, int top_k, double* out) override;
  std::uint64_t weight_bytes() const override { return weight_bytes_; }
  std::int64_t hidden() const override { return hidden_; }

  // Every expert and shared expert of every layer: a single process.
  static std::vector<LayerSlice> Everything(const V41Config& config);

 private:
  struct Layer {
    LayerSlice slice;
    std::vector<V41Expert> experts;  // index e − expert_begin
    std::optional<V41Expert> shared;
  };
  std::int64_t hidden_;
  float limit_;
  ThreadPool* pool_;
  std::map<int, Layer> layers_;
  std::uint64_t weight_bytes_ = 0;
  std::vector<float> xs_, weights_, outs_;
  std::vector<std::int64_t> members_;
};

}  // namespace tandem::rt
