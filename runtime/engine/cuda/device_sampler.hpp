#pragma once

// Sampling rows of device logits with the CPU sampler's choices. Internal.

#include <span>
#include <vector>

#include "runtime/kernels/cuda/device_memory.hpp"
#include "runtime/kernels/cuda/kernels.hpp"
#include "runtime/model/tokenizer.hpp"
#include "runtime/sampling/sampler.hpp"

namespace tandem::rt::cuda {

class DeviceSampler {
 public:
  // logits: [params.size() × vocab] on the device; waits for the choices.
  std::vector<TokenId> Sample(const float* logits, std::int64_t vocab, std::span<const SamplingParams> params,
                              std::span<const std::int64_t> positions, cudaStream_t stream);

 private:
  PinnedBuffer<SampleParams> params_pinned_;
  PinnedBuffer<std::int32_t> tokens_pinned_, offsets_pinned_;
  DeviceBuffer<SampleParams> params_;
  DeviceBuffer<std::int32_t> tokens_, ids_in_, sorted_ids_, offsets_;
  DeviceBuffer<float> keys_in_, sorted_logits_;
  DeviceBuffer<double> prob_;
  DeviceBuffer<std::byte> temp_;
};

}  // namespace tandem::rt::cuda
