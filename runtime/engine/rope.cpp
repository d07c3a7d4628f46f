#include "runtime/engine/rope.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace tandem::rt {

namespace {

double YarnMscale(double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

// The rope dim at which a wavelength completes `rotations` turns over the
// original context (YaRN's correction dim).
double CorrectionDim(double rotations, int dim, double base, double original_max) {
  return dim * std::log(original_max / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
}

}  // namespace

RopeTable::RopeTable(const ModelConfig& config) : dim_(config.qk_rope_head_dim) {
  const int half = dim_ / 2;
  inv_freq_.resize(static_cast<std::size_t>(half));
  for (int i = 0; i < half; ++i) {
    inv_freq_[static_cast<std::size_t>(i)] = 1.0 / std::pow(config.rope_theta, 2.0 * i / dim_);
  }
  if (!config.rope_scaling) return;

  const YarnScaling& y = *config.rope_scaling;
  double low = std::max(std::floor(CorrectionDim(y.beta_fast, dim_, config.rope_theta, y.original_max_position_embeddings)), 0.0);
  double high = std::min(std::ceil(CorrectionDim(y.beta_slow, dim_, config.rope_theta, y.original_max_position_embeddings)),
                         static_cast<double>(dim_ - 1));
  if (low == high) high += 0.001;
  for (int i = 0; i < half; ++i) {
    // High-frequency dims (below `low`) keep their frequency ("extrapolation"); low
    // frequencies (above `high`) are divided by the factor; a linear ramp between.
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double extra = inv_freq_[static_cast<std::size_t>(i)];
    const double inter = extra / y.factor;
    inv_freq_[static_cast<std::size_t>(i)] = inter * ramp + extra * (1.0 - ramp);
  }
  mscale_ = YarnMscale(y.factor, y.mscale) / YarnMscale(y.factor, y.mscale_all_dim);
  if (y.mscale_all_dim != 0.0) {
    const double m = YarnMscale(y.factor, y.mscale_all_dim);
    softmax_scale_factor_ = m * m;
  }
}

void RopeTable::Apply(float* v, std::int64_t rows, std::int64_t position, std::int64_t stride) const {
  const int half = dim_ / 2;
  if (stride == 0) stride = dim_;
  for (int i = 0; i < half; ++i) {
    const double angle = static_cast<double>(position) * inv_freq_[static_cast<std::size_t>(i)];
    const auto c = static_cast<float>(std::cos(angle) * mscale_);
    const auto s = static_cast<float>(std::sin(angle) * mscale_);
    for (std::int64_t r = 0; r < rows; ++r) {
      float* p = v + r * stride + 2 * i;
      const float a = p[0];
      const float b = p[1];
      p[0] = a * c - b * s;
      p[1] = b * c + a * s;
    }
  }
}

}  // namespace tandem::rt
