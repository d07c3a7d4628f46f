#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "runtime/engine/expert_slices.hpp"
#include "runtime/engine/mlp.hpp"
#include "runtime/engine/router.hpp"
#include "runtime/model/load_progress.hpp"

namespace tandem::rt {

class Checkpoint;
class ThreadPool;

// The expert weights of some slices of some MoE layers, and their compute. A
// slice of an expert's intermediate dimension takes rows of gate/up (views into
// the checkpoint) and columns of down (copied once, so compute reads them
// contiguously); its output is that slice's additive share of the expert.
class MoeSlices : public ExpertSlices {
 public:
  // `exact`: accumulate the down projections in double (MatMulF64), so that slices
  // of an expert computed on different ranks add up to exactly what one process
  // computes; hybrid layouts need it, a plain single process can skip it (faster).
  // `fuse_gate_up`: hold a group-quantized expert's gate and up as one matrix
  // (MlpWeights::gate_up, what Compute reads fastest); a device backend that copies
  // the slices (CudaMoeSlices) wants them apart. `progress` hears (Phase::kExperts)
  // before the first expert and after each: the stored bytes of the tensors read so far,
  // of all it will read, and the file the next one is read from.
  MoeSlices(const Checkpoint& ckpt, const std::vector<LayerSlice>& slices, ThreadPool* pool, bool exact = true, bool fuse_gate_up = true,
            const LoadProgressFn& progress = {});

  const std::vector<LayerSlice>& slices() const { return slices_; }
  std::uint64_t weight_bytes() const override { return weight_bytes_; }
  std::int64_t hidden() const override { return hidden_; }

  // out[r] = Σ_k routes[r·top_k + k].weight · expert(x[r]) over the routes to held
  // experts, in k order, then + the held shared slice; zero rows when nothing is
  // held. Expert ids must be < n_routed_experts. The route-sum is accumulated in
  // double; so are the down projections when `exact`.
  void Compute(int layer, const float* x, std::int64_t rows, std::span<const ExpertRoute> routes, int top_k, double* out) override;

  // Every slice of a single process: all experts and shared experts of all MoE layers.
  static std::vector<LayerSlice> Everything(const ModelConfig& config);

  // What one held layer holds (a device backend copies it from here).
  struct Layer {
    LayerSlice slice;
    std::vector<MlpWeights> experts;  // index e − expert_begin
    std::optional<MlpWeights> shared;
  };
  const std::map<int, Layer>& layers() const { return layers_; }

 private:
  template <typename T>
  void Combine(const T* expert_out, std::int64_t rows, std::span<const ExpertRoute> routes, int top_k, std::int64_t gathered_rows,
               bool shared, double* out);

  std::int64_t hidden_;
  ThreadPool* pool_;
  bool exact_;
  std::vector<LayerSlice> slices_;
  std::map<int, Layer> layers_;
  std::uint64_t weight_bytes_ = 0;
  // Buffers reused between calls (the hot path does not allocate once they have grown).
  Workspace<double> expert_out_;     // the experts' outputs in exact mode
  Workspace<float> expert_out_f32_;  // and otherwise
  Workspace<float> gathered_, scratch_;
  std::vector<std::int64_t> slots_, results_, task_rows_, expert_first_, gather_;
  std::vector<std::size_t> task_experts_;
  std::vector<MlpTask> tasks_;
};

}  // namespace tandem::rt
