#include "runtime/engine/sink_attention.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/numeric/dtype.hpp"
#include "runtime/numeric/rounded_math.hpp"

namespace tandem::rt {

void SinkAttention(const float* q, const float* kv, std::span<const std::int32_t> indices, std::int64_t d, float scale, float sink,
                   float* out) {
  // Every sum of the reference's fp32 tensors (a logit's dot product, a block's
  // probabilities and its weighted values) is taken in double and rounded once, so its
  // value does not hang on a summation order; the running rescaling stays fp32 as the
  // reference's.
  std::vector<float> acc(static_cast<std::size_t>(d), 0.0f);
  std::vector<double> block_acc(static_cast<std::size_t>(d));
  float running_max = -1e30f;  // finite, as the reference's
  float sum = 0.0f;
  bool any = false;
  float logits[kSinkAttentionBlock];
  for (std::size_t b = 0; b < indices.size(); b += kSinkAttentionBlock) {
    const std::size_t n = std::min<std::size_t>(kSinkAttentionBlock, indices.size() - b);
    float block_max = -INFINITY;
    for (std::size_t t = 0; t < n; ++t) {
      const std::int32_t row = indices[b + t];
      if (row < 0) {
        logits[t] = -INFINITY;
        continue;
      }
      any = true;
      const float* k = kv + static_cast<std::int64_t>(row) * d;
      double dot = 0.0;
      for (std::int64_t i = 0; i < d; ++i) dot += static_cast<double>(q[i]) * k[i];
      logits[t] = static_cast<float>(dot) * scale;
      block_max = std::max(block_max, logits[t]);
    }
    const float new_max = std::max(running_max, block_max);
    const float alpha = RoundedExp(running_max - new_max);
    double block_sum = 0.0;
    std::fill(block_acc.begin(), block_acc.end(), 0.0);
    for (std::size_t t = 0; t < n; ++t) {
      if (indices[b + t] < 0) continue;
      const float p = RoundedExp(logits[t] - new_max);
      block_sum += p;
      const double weight = Bf16ToF32(F32ToBf16(p));
      const float* v = kv + static_cast<std::int64_t>(indices[b + t]) * d;
      for (std::int64_t i = 0; i < d; ++i) block_acc[static_cast<std::size_t>(i)] += weight * v[i];
    }
    sum = sum * alpha + static_cast<float>(block_sum);
    for (std::int64_t i = 0; i < d; ++i) {
      float& a = acc[static_cast<std::size_t>(i)];
      a = a * alpha + static_cast<float>(block_acc[static_cast<std::size_t>(i)]);
    }
    running_max = new_max;
  }
  if (!any) {
    std::fill(out, out + d, 0.0f);
    return;
  }
  sum += RoundedExp(sink - running_max);
  for (std::int64_t i = 0; i < d; ++i) out[i] = Bf16ToF32(F32ToBf16(acc[static_cast<std::size_t>(i)] / sum));
}

void WindowIndices(std::int64_t position, int window, bool ring, std::int64_t rows, std::int32_t* out) {
  if (!ring) {
    // Rows are positions 0…rows−1 of this call; the window ends at `position`.
    const std::int64_t width = std::min<std::int64_t>(window, rows);
    const std::int64_t first = std::max<std::int64_t>(0, position - window + 1);
    for (std::int64_t k = 0; k < width; ++k) {
      const std::int64_t p = first + k;
      out[k] = p > position ? -1 : static_cast<std::int32_t>(p);
    }
    return;
  }
  // The ring from its oldest slot: the one after `position`'s.
  const std::int64_t oldest = (position % window + 1) % window;
  for (int k = 0; k < window; ++k) {
    const std::int64_t slot = (oldest + k) % window;
    // The slot's latest position at or before `position`.
    const std::int64_t p = position - ((position % window - slot + window) % window);
    out[k] = p < 0 ? -1 : static_cast<std::int32_t>(slot);
  }
}

}  // namespace tandem::rt
