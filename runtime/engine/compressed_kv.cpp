#include "runtime/engine/compressed_kv.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "runtime/numeric/rounded_math.hpp"

namespace tandem::rt {

GatedPooling::GatedPooling(int ratio, std::int64_t width)
    : ratio_(ratio), width_(width), kv_(static_cast<std::size_t>(ratio * width)), score_(static_cast<std::size_t>(ratio * width)) {
  if (ratio < 1 || ratio > 8) throw std::invalid_argument("GatedPooling: the ratio must be in [1, 8]");
}

std::optional<std::vector<float>> GatedPooling::Add(std::int64_t position, std::span<const float> kv, std::span<const float> score) {
  const auto slot = static_cast<std::size_t>(position % ratio_);
  std::copy(kv.begin(), kv.end(), kv_.begin() + static_cast<std::ptrdiff_t>(slot * width_));
  std::copy(score.begin(), score.end(), score_.begin() + static_cast<std::ptrdiff_t>(slot * width_));
  if ((position + 1) % ratio_ != 0) return std::nullopt;
  std::vector<float> latent(static_cast<std::size_t>(width_));
  if (ratio_ == 1) {
    std::copy(kv.begin(), kv.end(), latent.begin());
    return latent;
  }
  const auto w = static_cast<std::size_t>(width_);
  for (std::size_t c = 0; c < w; ++c) {
    float top = -INFINITY;
    for (int j = 0; j < ratio_; ++j) top = std::max(top, score_[static_cast<std::size_t>(j) * w + c]);
    float sum = 0.0f;
    float e[8];  // ratio ≤ 8 (the constructor checks)
    for (int j = 0; j < ratio_; ++j) sum += e[j] = RoundedExp(score_[static_cast<std::size_t>(j) * w + c] - top);
    float pooled = 0.0f;
    for (int j = 0; j < ratio_; ++j) pooled += kv_[static_cast<std::size_t>(j) * w + c] * (e[j] / sum);
    latent[c] = pooled;
  }
  return latent;
}

}  // namespace tandem::rt
