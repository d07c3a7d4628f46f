#include "runtime/kernels/ops.hpp"

#include <algorithm>
#include <cmath>

#include "runtime/numeric/dtype.hpp"

namespace tandem::rt {

void RmsNorm(const float* x, const float* weight, std::int64_t rows, std::int64_t n, float eps, float* out) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * n;
    float* o = out + r * n;
    double sum_sq = 0.0;  // double: the norm of a wide row is the one sum that benefits
    for (std::int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(in[i]) * in[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps));
    for (std::int64_t i = 0; i < n; ++i) o[i] = in[i] * scale * weight[i];
  }
}

namespace {

template <typename T>
void AddScaledImpl(double* __restrict out, const T* __restrict v, double weight, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] += weight * static_cast<double>(v[i]);
}

}  // namespace

void AddScaled(double* out, const float* v, double weight, std::int64_t n) { AddScaledImpl(out, v, weight, n); }
void AddScaled(double* out, const double* v, double weight, std::int64_t n) { AddScaledImpl(out, v, weight, n); }

int Fp8BlockExponent(const float* block, int n) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(block[i]));
  if (!(amax > 0.0f) || !std::isfinite(amax)) return 0;
  return std::clamp(static_cast<int>(std::ceil(std::log2(amax / 448.0f))), -127, 127);
}

void RoundExpertInput(float* x, std::int64_t rows, std::int64_t width, ExpertInputPrecision precision) {
  const std::int64_t n = rows * width;
  switch (precision) {
    case ExpertInputPrecision::kF32:
      return;
    case ExpertInputPrecision::kBf16:
      for (std::int64_t i = 0; i < n; ++i) x[i] = Bf16ToF32(F32ToBf16(x[i]));
      return;
    case ExpertInputPrecision::kFp8Block32:
      for (std::int64_t r = 0; r < rows; ++r) {
        float* row = x + r * width;
        for (std::int64_t b = 0; b < width; b += kFp8BlockSize) {
          const int len = static_cast<int>(std::min<std::int64_t>(kFp8BlockSize, width - b));
          const int e = Fp8BlockExponent(row + b, len);
          for (int i = 0; i < len; ++i) row[b + i] = std::ldexp(F8E4M3ToF32(F32ToF8E4M3(std::ldexp(row[b + i], -e))), e);
        }
      }
      return;
  }
}

}  // namespace tandem::rt
