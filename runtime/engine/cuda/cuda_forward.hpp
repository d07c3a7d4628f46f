#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/kernels/ops.hpp"
#include "runtime/model/tokenizer.hpp"
#include "runtime/sampling/sampler.hpp"

namespace tandem::rt {

class Checkpoint;
class ExpertExecutor;
class KvCachePool;
class RopeTable;
struct ForwardOutput;
struct ModelWeights;
struct Row;

// The Engine's forward pass on the GPU (Engine with EngineOptions::device = kCuda):
// embedding, RMSNorm, MLA attention over a device mirror of each sequence's
// compressed cache, router, dense and shared SwiGLU, routed experts with rows
// grouped by expert, LM head. The host KvCachePool stays the cache of record (the
// new entries are copied back after each pass, so forks, rollbacks and prefix reuse
// work unchanged); a sequence's mirror is refreshed from it when it changed.
class CudaForward {
 public:
  // Copies `weights` to the device, and with `experts_on_device` every routed and
  // shared expert of the checkpoint too. Throws std::invalid_argument when the
  // backend is not built or no device can be used (RequireCudaDevice).
  static std::unique_ptr<CudaForward> Create(const Checkpoint& ckpt, const ModelWeights& weights, const RopeTable& rope,
                                             float softmax_scale, bool experts_on_device);

  virtual ~CudaForward() = default;

  // Engine::Forward for rows the engine has validated. `experts` computes the MoE
  // layers when they are not on the device (a hybrid layout's remote executor):
  // the normalised rows go to it from host memory, rounded to `expert_input`.
  virtual void Forward(std::span<const Row> rows, KvCachePool& kv, ExpertExecutor* experts, ExpertInputPrecision expert_input,
                       bool record_routes, bool keep_hidden, ForwardOutput& out) = 0;

  // Samples the i-th logits row of the last Forward with params[i] at positions[i]
  // on the device: the same choices as Sample (runtime/sampling) on those logits.
  virtual std::vector<TokenId> SampleLogits(std::span<const SamplingParams> params, std::span<const std::int64_t> positions) = 0;

  // Passes run as a captured CUDA graph so far (steady decode; see cuda_forward.cpp).
  virtual std::uint64_t graph_launches() const = 0;
};

// Sampling on the device for logits in host memory (tests, benchmarks): one row of
// `vocab` logits per params entry.
std::vector<TokenId> CudaSample(std::span<const float> logits, std::int64_t vocab, std::span<const SamplingParams> params,
                                std::span<const std::int64_t> positions);

}  // namespace tandem::rt
