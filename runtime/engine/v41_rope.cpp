#include "runtime/engine/v41_rope.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "runtime/model/v41_config.hpp"
#include "runtime/numeric/dtype.hpp"
#include "runtime/numeric/rounded_math.hpp"

namespace tandem::rt {

V41Rope::V41Rope(int rope_dim, double base, std::optional<Yarn> yarn) : dim_(rope_dim) {
  const int pairs = rope_dim / 2;
  freqs_.resize(static_cast<std::size_t>(pairs));
  for (int i = 0; i < pairs; ++i) {
    // The reference's fp32 power, rounded from double (RoundedExp's reasoning).
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rope_dim);
    const auto power = static_cast<float>(std::pow(static_cast<double>(static_cast<float>(base)), static_cast<double>(exponent)));
    freqs_[static_cast<std::size_t>(i)] = 1.0f / power;
  }
  if (!yarn || yarn->original_seq_len <= 0) return;
  // The pair index where a frequency makes `rotations` turns over the original context.
  auto correction = [&](double rotations) {
    return rope_dim * std::log(yarn->original_seq_len / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
  };
  low_ = std::max(static_cast<int>(std::floor(correction(yarn->beta_fast))), 0);
  high_ = std::min(static_cast<int>(std::ceil(correction(yarn->beta_slow))), rope_dim - 1);
  const float span = static_cast<float>(high_ == low_ ? 0.001 : high_ - low_);
  const auto factor = static_cast<float>(yarn->factor);
  for (int i = 0; i < pairs; ++i) {
    // As the reference writes it (smooth = 1 − ramp, then 1 − smooth), for its fp32 bits.
    const float smooth = 1.0f - std::clamp((static_cast<float>(i) - static_cast<float>(low_)) / span, 0.0f, 1.0f);
    float& f = freqs_[static_cast<std::size_t>(i)];
    f = f / factor * (1.0f - smooth) + f * smooth;
  }
}

V41Rope V41Rope::ForLayer(const V41Config& c, int layer) {
  if (c.compress_ratios.at(static_cast<std::size_t>(layer)) == 0) return V41Rope(c.rope_head_dim, c.rope_theta, std::nullopt);
  return V41Rope(c.rope_head_dim, c.compress_rope_theta,
                 Yarn{static_cast<double>(c.original_seq_len), c.rope_factor, c.beta_fast, c.beta_slow});
}

void V41Rope::Apply(float* v, std::int64_t rows, std::int64_t width, std::int64_t position, bool inverse) const {
  const int pairs = dim_ / 2;
  for (int i = 0; i < pairs; ++i) {
    const float angle = static_cast<float>(position) * freqs_[static_cast<std::size_t>(i)];
    const float c = RoundedCos(angle), s = inverse ? -RoundedSin(angle) : RoundedSin(angle);
    for (std::int64_t r = 0; r < rows; ++r) {
      float* pair = v + r * width + (width - dim_) + 2 * i;
      const float x0 = pair[0], x1 = pair[1];
      pair[0] = Bf16ToF32(F32ToBf16(x0 * c - x1 * s));
      pair[1] = Bf16ToF32(F32ToBf16(x0 * s + x1 * c));
    }
  }
}

}  // namespace tandem::rt
