#include "runtime/engine/cuda/device_sampler.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "runtime/engine/cuda/cuda_forward.hpp"
#include "runtime/kernels/cuda/cuda_device.hpp"

namespace tandem::rt {
namespace cuda {

std::vector<TokenId> DeviceSampler::Sample(const float* logits, std::int64_t vocab, std::span<const SamplingParams> params,
                                           std::span<const std::int64_t> positions, cudaStream_t stream) {
  if (params.size() != positions.size()) {
    throw std::invalid_argument(fmt::format("device sampler: {} sampling settings for {} positions", params.size(), positions.size()));
  }
  const auto rows = static_cast<std::int64_t>(params.size());
  if (rows == 0) return {};
  // The sort's offsets are int32: rows × vocab must stay below 2^31, so very wide
  // batches are sampled in parts.
  const std::int64_t part = std::max<std::int64_t>(1, (std::int64_t{1} << 31) / std::max<std::int64_t>(vocab, 1) - 1);
  if (rows > part) {
    std::vector<TokenId> tokens;
    for (std::int64_t first = 0; first < rows; first += part) {
      const auto count = static_cast<std::size_t>(std::min(part, rows - first));
      const auto at = static_cast<std::size_t>(first);
      const std::vector<TokenId> some =
          Sample(logits + first * vocab, vocab, params.subspan(at, count), positions.subspan(at, count), stream);
      tokens.insert(tokens.end(), some.begin(), some.end());
    }
    return tokens;
  }
  const auto n = static_cast<std::size_t>(rows);
  params_pinned_.Reserve(n);
  tokens_pinned_.Reserve(n);
  params_.Reserve(n);
  tokens_.Reserve(n);
  bool sampled = false;
  for (std::size_t i = 0; i < n; ++i) {
    params_pinned_.get()[i] = {params[i].temperature, params[i].top_k, params[i].top_p, params[i].min_p, params[i].seed, positions[i]};
    sampled = sampled || params[i].temperature > 0.0f;
  }
  Check(cudaMemcpyAsync(params_.get(), params_pinned_.get(), n * sizeof(SampleParams), cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
  ArgMax(logits, rows, vocab, params_.get(), tokens_.get(), stream);
  if (sampled) {
    const auto total = static_cast<std::size_t>(rows * vocab);
    keys_in_.Reserve(total);
    sorted_logits_.Reserve(total);
    ids_in_.Reserve(total);
    sorted_ids_.Reserve(total);
    prob_.Reserve(total);
    offsets_pinned_.Reserve(n + 1);
    offsets_.Reserve(n + 1);
    for (std::size_t i = 0; i <= n; ++i) offsets_pinned_.get()[i] = static_cast<std::int32_t>(static_cast<std::int64_t>(i) * vocab);
    Check(cudaMemcpyAsync(offsets_.get(), offsets_pinned_.get(), (n + 1) * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync");
    const std::size_t temp_bytes = SortTemporaryBytes(rows, vocab);
    temp_.Reserve(temp_bytes);
    SortByLogit(logits, rows, vocab, keys_in_.get(), sorted_logits_.get(), ids_in_.get(), sorted_ids_.get(), offsets_.get(), temp_.get(),
                temp_bytes, stream);
    SampleSorted(sorted_logits_.get(), sorted_ids_.get(), rows, vocab, params_.get(), prob_.get(), tokens_.get(), stream);
  }
  Check(cudaMemcpyAsync(tokens_pinned_.get(), tokens_.get(), n * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
  Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return {tokens_pinned_.get(), tokens_pinned_.get() + n};
}

}  // namespace cuda

std::vector<TokenId> CudaSample(std::span<const float> logits, std::int64_t vocab, std::span<const SamplingParams> params,
                                std::span<const std::int64_t> positions) {
  RequireCudaDevice();
  if (logits.size() != params.size() * static_cast<std::size_t>(vocab)) {
    throw std::invalid_argument(fmt::format("device sampler: {} logits are not {} rows of {}", logits.size(), params.size(), vocab));
  }
  cuda::Stream stream;
  cuda::DeviceBuffer<float> device(std::max<std::size_t>(logits.size(), 1));
  cuda::Check(cudaMemcpy(device.get(), logits.data(), logits.size_bytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
  cuda::DeviceSampler sampler;
  return sampler.Sample(device.get(), vocab, params, positions, stream.get());
}

}  // namespace tandem::rt
