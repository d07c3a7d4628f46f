#include "runtime/kernels/latent_attention.hpp"

#include "runtime/kernels/attention_rows.hpp"
#include "runtime/kernels/cpu_features.hpp"
#include "runtime/kernels/matmul.hpp"
#include "runtime/kernels/ops.hpp"

namespace tandem::rt {

namespace {

// Compiled per instruction set (as the portable matmul loops are): the weighted
// sum vectorises over the latent dimension, each output summing over t in order.
__attribute__((target_clones("arch=haswell", "fma", "default"))) void WeightedSum(const float* p, const float* cache,
                                                                                   std::int64_t stride, std::int64_t len,
                                                                                   std::int64_t latent, float* out) {
  for (std::int64_t c = 0; c < latent; ++c) out[c] = 0.0f;
  for (std::int64_t t = 0; t < len; ++t) {
    const float pt = p[t];
    const float* entry = cache + t * stride;
    for (std::int64_t c = 0; c < latent; ++c) out[c] += pt * entry[c];
  }
}

}  // namespace

void LatentAttention(const float* q_latent, const float* q_rope, const float* cache, std::int64_t stride, std::int64_t len,
                     std::int64_t latent, std::int64_t rope, float scale, float* scores, float* out) {
  // By the CPU, not TANDEM_ISA: the same bits as the loops below (see attention_rows.hpp).
  static const bool avx2 = DetectedIsa() >= Isa::kAvx2;
  if (avx2) {
    kernels::LatentScoresAvx2(q_latent, q_rope, cache, stride, len, latent, rope, scale, scores);
    Softmax(scores, len);
    kernels::WeightedSumAvx2(scores, cache, stride, len, latent, out);
    return;
  }
  for (std::int64_t t = 0; t < len; ++t) {
    const float* entry = cache + t * stride;
    scores[t] = (Dot(q_latent, entry, latent) + Dot(q_rope, entry + latent, rope)) * scale;
  }
  Softmax(scores, len);
  WeightedSum(scores, cache, stride, len, latent, out);
}

}  // namespace tandem::rt
