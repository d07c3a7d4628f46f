#include "runtime/kernels/ops.hpp"

#include <algorithm>
#include <cmath>

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

void SwiGlu(float* gate, const float* up, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void Softmax(float* x, std::int64_t n) {
  if (n <= 0) return;
  const float max = *std::max_element(x, x + n);
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (std::int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace tandem::rt
