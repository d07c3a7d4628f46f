#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "runtime/engine/decode_engine.hpp"
#include "runtime/engine/expert_executor.hpp"
#include "runtime/engine/kv_cache.hpp"
#include "runtime/engine/row.hpp"
#include "runtime/engine/step_profile.hpp"
#include "runtime/kernels/device.hpp"
#include "runtime/kernels/ops.hpp"
#include "runtime/kernels/quantized_matrix.hpp"
#include "runtime/model/model_config.hpp"
#include "runtime/model/tokenizer.hpp"
#include "runtime/sampling/sampler.hpp"

namespace tandem::rt {

class Checkpoint;
class CudaForward;
class ThreadPool;

struct ForwardOutput {
  std::vector<float> logits;            // [rows with logits × vocab], in row order
  std::vector<std::size_t> logit_rows;  // for each logits row, its index in the input
  // When EngineOptions::record_routes: per MoE layer (in layer order), rows × top_k routes.
  std::vector<std::vector<ExpertRoute>> routes;
  // When EngineOptions::keep_hidden: every row's final hidden state before the final
  // norm, [rows × hidden] in row order (what an MTP drafter continues from).
  std::vector<float> hidden;
  // Which Forward of its engine wrote this output (1, 2, ...).
  std::uint64_t pass = 0;

  std::span<const float> LogitsOf(std::size_t i, int vocab) const {
    return {logits.data() + i * static_cast<std::size_t>(vocab), static_cast<std::size_t>(vocab)};
  }
};

struct EngineOptions {
  int threads = 0;  // 0: all cores
  // When set, the engine computes on this pool (not owned) instead of its own: an
  // engine that runs between another's steps (the drafter) shares its threads.
  ThreadPool* pool = nullptr;
  bool record_routes = false;
  // Rounds the experts' input rows as a hybrid layout's wire does, and sums the
  // experts exactly as it does, so a single process can be compared like with
  // like against a distributed run.
  ExpertInputPrecision expert_input = ExpertInputPrecision::kF32;
  bool keep_hidden = false;
  // Read the large non-expert projections group-quantized (ModelWeights::Quantize):
  // for a drafter's copy of the target.
  std::optional<QuantFormat> quantize;
  int quantize_group = 32;
  // Compute the checkpoint's MTP layer instead of the model: a one-layer model whose
  // rows also take a hidden state (Forward's `hidden_in`), see ModelWeights::LoadMtp.
  bool mtp = false;
  // kCuda: the forward pass runs on the GPU (CudaForward), the experts too unless
  // an executor factory is given (a hybrid layout's workers). Needs a CUDA build and
  // a device; the MTP layer and `quantize` are CPU-only.
  Device device = Device::kCpu;
  // When set (not owned), every CPU Forward adds its time per region to it.
  StepProfile* profile = nullptr;
};

// The forward pass of a DeepSeek-V3-family model over batches of rows, with a
// compressed MLA KV cache per sequence. Batch invariant: a row's logits are
// bit-identical whether it is computed alone or among other rows.
class Engine : public DecodeEngine {
 public:
  // Makes the executor of the MoE layers' experts, given the engine's thread pool.
  using ExpertExecutorFactory = std::function<std::shared_ptr<ExpertExecutor>(ThreadPool& pool)>;

  // An empty `experts` factory runs every expert in this process (LocalExpertExecutor).
  Engine(const Checkpoint& ckpt, EngineOptions options, const ExpertExecutorFactory& experts = {});
  ~Engine() override;

  const ModelConfig& config() const;
  KvCachePool& kv() override;
  ThreadPool& pool() override;
  bool keeps_hidden() const override;
  int vocab_size() const override;
  int hidden_size() const override;
  // The device pass of a kCuda engine (null on the CPU): its counters.
  const CudaForward* cuda() const;
  // The expert executor's remote ranks, as far as they have answered (empty when
  // every expert runs in this process).
  std::vector<RankStats> RankStatistics() const override;
  // ExpertExecutor::Late: callable from any thread.
  std::string LateRanks() const override;

  // Throws std::invalid_argument for rows that break the rules above (unknown
  // sequence, non-consecutive positions, capacity, token out of range).
  // `hidden_in` ([rows × hidden]) is required by, and only read by, an MTP engine.
  void Forward(std::span<const Row> rows, ForwardOutput& out, const float* hidden_in);
  void Forward(std::span<const Row> rows, ForwardOutput& out) override { Forward(rows, out, nullptr); }

  // One untimed forward of `rows` rows (a scratch sequence, opened and closed again),
  // so that a later step of up to that many rows finds its buffers already mapped: a
  // server's first requests should not pay for them (tandem-rt serve does this at
  // startup, as vLLM's profile run). Not for an MTP engine.
  void WarmUp(int rows) override;

  // Sample (runtime/sampling) of each logits row of `out`: row i with params[i] at
  // positions[i]. When `out` is a kCuda engine's latest output, on the device, from
  // the logits as the pass computed them (same choices as the CPU's): logits edited
  // since (a grammar mask) must be sampled with Sample instead.
  std::vector<TokenId> SampleRows(const ForwardOutput& out, std::span<const SamplingParams> params,
                                  std::span<const std::int64_t> positions);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tandem::rt
