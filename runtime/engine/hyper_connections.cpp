#include "runtime/engine/hyper_connections.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/numeric/dtype.hpp"
#include "runtime/numeric/rounded_math.hpp"

namespace tandem::rt {

namespace {

float Bf16(float v) { return Bf16ToF32(F32ToBf16(v)); }

float Sigmoid(float v) { return RoundedSigmoid(v); }

}  // namespace

void HcMixes(const HyperConnectionWeights& w, const float* x, float* pre, float* post, float* comb) {
  const int hc = w.hc;
  const std::int64_t n = static_cast<std::int64_t>(hc) * w.dim;
  const int mixes = (2 + hc) * hc;
  // The stream's RMS over all copies, without a weight; applied after the product.
  // Sums in double, rounded once: the same value whatever the order of the reference's.
  double squares = 0.0;
  for (std::int64_t k = 0; k < n; ++k) squares += static_cast<double>(x[k]) * x[k];
  const float rsqrt = 1.0f / std::sqrt(static_cast<float>(squares / static_cast<double>(n)) + w.norm_eps);
  std::vector<float> m(static_cast<std::size_t>(mixes));
  for (int r = 0; r < mixes; ++r) {
    const float* row = w.fn + static_cast<std::int64_t>(r) * n;
    double dot = 0.0;
    for (std::int64_t k = 0; k < n; ++k) dot += static_cast<double>(x[k]) * row[k];
    m[static_cast<std::size_t>(r)] = static_cast<float>(dot) * rsqrt;
  }
  for (int j = 0; j < hc; ++j) {
    pre[j] = Sigmoid(m[static_cast<std::size_t>(j)] * w.scale[0] + w.base[j]) + w.hc_eps;
    post[j] = 2.0f * Sigmoid(m[static_cast<std::size_t>(hc + j)] * w.scale[1] + w.base[hc + j]);
  }
  // comb: a row softmax (+ eps), then Sinkhorn: columns, then rows and columns again.
  const auto at = [&](int j, int i) -> float& { return comb[j * hc + i]; };
  for (int j = 0; j < hc; ++j) {
    float top = -INFINITY;
    for (int i = 0; i < hc; ++i) {
      at(j, i) = m[static_cast<std::size_t>(2 * hc + j * hc + i)] * w.scale[2] + w.base[2 * hc + j * hc + i];
      top = std::max(top, at(j, i));
    }
    float sum = 0.0f;
    for (int i = 0; i < hc; ++i) sum += (at(j, i) = RoundedExp(at(j, i) - top));
    for (int i = 0; i < hc; ++i) at(j, i) = at(j, i) / sum + w.hc_eps;
  }
  auto normalize_columns = [&] {
    for (int i = 0; i < hc; ++i) {
      float sum = 0.0f;
      for (int j = 0; j < hc; ++j) sum += at(j, i);
      for (int j = 0; j < hc; ++j) at(j, i) /= sum + w.hc_eps;
    }
  };
  auto normalize_rows = [&] {
    for (int j = 0; j < hc; ++j) {
      float sum = 0.0f;
      for (int i = 0; i < hc; ++i) sum += at(j, i);
      for (int i = 0; i < hc; ++i) at(j, i) /= sum + w.hc_eps;
    }
  };
  normalize_columns();
  for (int it = 1; it < w.sinkhorn_iters; ++it) {
    normalize_rows();
    normalize_columns();
  }
}

void HcPre(const float* x, int hc, std::int64_t dim, const float* pre, float* out) {
  for (std::int64_t d = 0; d < dim; ++d) {
    float sum = 0.0f;
    for (int j = 0; j < hc; ++j) sum += pre[j] * x[j * dim + d];
    out[d] = Bf16(sum);
  }
}

void HcPost(const float* f, const float* residual, int hc, std::int64_t dim, const float* post, const float* comb, float* out) {
  for (int i = 0; i < hc; ++i) {
    for (std::int64_t d = 0; d < dim; ++d) {
      float mixed = 0.0f;
      for (int j = 0; j < hc; ++j) mixed += comb[j * hc + i] * residual[j * dim + d];
      out[i * dim + d] = Bf16(post[i] * f[d] + mixed);
    }
  }
}

}  // namespace tandem::rt
