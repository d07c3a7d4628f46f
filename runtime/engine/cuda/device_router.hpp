#pragma once

// The device router's settings from a model's config. Internal to the CUDA backend.

#include "runtime/kernels/cuda/kernels.hpp"
#include "runtime/model/model_config.hpp"

namespace tandem::rt::cuda {

// Throws std::invalid_argument when the model has more routed experts than the
// device router takes (kMaxRoutedExperts).
RouterParams RouterParamsOf(const ModelConfig& config);

}  // namespace tandem::rt::cuda
