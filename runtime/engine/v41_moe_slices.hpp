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
// The same with the down projection unrounded (MatMulF64): `e` may hold only some of the
// expert's intermediate columns (whole 32-column blocks), and the shares of all its slices
// add up, exactly, to the whole expert's.
void V41ExpertShare(const V41Expert& e, const float* x, const float* weights, std::int64_t count, float limit, double* out,
                    ThreadPool* pool);
// A routed expert's output from its unrounded (exact) down projection: rounded to fp32, then
// bf16. The reference adds the blocks in fp32 one by one; an ulp of fp32 apart at most.
double V41ExpertRounding(double unrounded);

// The V4.1 experts one rank holds, and their compute (ExpertSlices). A routed expert's output
// is rounded whole (V41ExpertRounding), so a rank holding whole experts sends the sum of
// their rounded outputs (and the shared expert's), while a rank holding column slices of the
// experts (tp; two coordinator ranks), cut at multiples of 32, sends each route's unrounded
// part besides (PartialWidthOf), and Reduce rounds each route once all ranks' parts are
// summed. Every sum is taken in double and exact, so every layout gives the single process's
// bits. The shared expert is held whole, by one rank.
class V41MoeSlices : public ExpertSlices {
 public:
  V41MoeSlices(const V41Checkpoint& ckpt, const std::vector<LayerSlice>& slices, ThreadPool* pool, const LoadProgressFn& progress = {});

  // out[r] = the rounded outputs of the whole experts routed to r (weights applied inside)
  // and the shared expert's, summed; after them, when this rank holds column slices, each
  // route's unrounded part.
  void Compute(int layer, const float* x, std::int64_t rows, std::span<const ExpertRoute> routes, int top_k, double* out) override;
  std::int64_t PartialWidthOf(const LayerSlice& held, int top_k) const override;
  std::int64_t PartialWidth(int layer, int top_k) const override;
  void Reduce(const double* sums, std::int64_t rows, std::int64_t width, float* out) const override;
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
  int inter_;
  float limit_;
  ThreadPool* pool_;
  std::map<int, Layer> layers_;
  std::uint64_t weight_bytes_ = 0;
  std::vector<float> xs_, weights_, outs_;
  std::vector<double> shares_;
  std::vector<std::int64_t> members_;
};

}  // namespace tandem::rt
