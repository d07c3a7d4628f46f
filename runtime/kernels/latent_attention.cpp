#include "runtime/kernels/latent_attention.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/kernels/attention_rows.hpp"
#include "runtime/kernels/cpu_features.hpp"
#include "runtime/kernels/matmul.hpp"
#include "runtime/kernels/ops.hpp"
#include "runtime/kernels/quantized_matrix.hpp"

namespace tandem::rt {

namespace {

// The portable weighted sum (AVX2 machines run AddWeightedSumAvx2): each output adds
// over t in order, each product fused into the sum (std::fma: the bits of the FMA
// instructions the SIMD forms use, on a CPU without them too, only slower).
void AddWeightedSum(const float* p, const float* cache, std::int64_t stride, std::int64_t len, std::int64_t latent, float* out) {
  for (std::int64_t t = 0; t < len; ++t) {
    const float pt = p[t];
    const float* entry = cache + t * stride;
    for (std::int64_t c = 0; c < latent; ++c) out[c] = std::fma(pt, entry[c], out[c]);
  }
}

// Cache entries per block: at most about 16 KiB, half the smallest L1 data cache, so
// every head after the first reads the block from L1 (small preset: 24 entries of
// 160 floats; DeepSeek-V3's 576-float entries: 4, 9 KiB). A multiple of four, the
// entries LatentScoresAvx2 takes at a time, for speed only: blocks never change a
// result, only the order in which independent sums are worked on.
std::int64_t EntriesPerBlock(std::int64_t stride) {
  const std::int64_t fit = 16384 / (std::max<std::int64_t>(stride, 1) * static_cast<std::int64_t>(sizeof(float)));
  return std::max<std::int64_t>(4, fit - fit % 4);
}

}  // namespace

void LatentAttention(const float* q_latent, const float* q_rope, const float* cache, std::int64_t stride, std::int64_t len,
                     std::int64_t latent, std::int64_t rope, float scale, float* scores, float* out) {
  LatentAttentionHeads(q_latent, 0, q_rope, 0, 1, cache, stride, len, latent, rope, scale, scores, out);
}

void LatentAttentionHeads(const float* q_latent, std::int64_t q_latent_stride, const float* q_rope, std::int64_t q_rope_stride,
                          std::int64_t heads, const float* cache, std::int64_t stride, std::int64_t len, std::int64_t latent,
                          std::int64_t rope, float scale, float* scores, float* out) {
  // By the CPU, not TANDEM_ISA: the same bits as the loops below (see attention_rows.hpp).
  static const bool avx2 = DetectedIsa() >= Isa::kAvx2, avx512 = DetectedIsa() >= Isa::kAvx512;
  // Each head's query as one vector of latent + rope floats, as its cache entries are:
  // a score is then one Dot, one reduction instead of two.
  const std::int64_t dims = latent + rope;
  thread_local std::vector<float> joined;
  joined.resize(static_cast<std::size_t>(heads * dims));
  for (std::int64_t h = 0; h < heads; ++h) {
    std::copy_n(q_latent + h * q_latent_stride, latent, joined.data() + h * dims);
    std::copy_n(q_rope + h * q_rope_stride, rope, joined.data() + h * dims + latent);
  }
  const float* q = joined.data();
  const std::int64_t block = EntriesPerBlock(stride);
  for (std::int64_t first = 0; first < len; first += block) {
    const std::int64_t n = std::min(block, len - first);
    const float* entries = cache + first * stride;
    if (avx512) {
      kernels::LatentScoresHeadsAvx512(q, dims, heads, entries, stride, n, dims, scale, scores + first, len);
      continue;
    }
    for (std::int64_t h = 0; h < heads; ++h) {
      const float* qh = q + h * dims;
      float* s = scores + h * len + first;
      if (avx2) {
        kernels::LatentScoresAvx2(qh, entries, stride, n, dims, scale, s);
      } else {
        for (std::int64_t t = 0; t < n; ++t) s[t] = Dot(qh, entries + t * stride, dims) * scale;
      }
    }
  }
  for (std::int64_t h = 0; h < heads; ++h) {
    Softmax(scores + h * len, len);
    std::fill_n(out + h * latent, latent, 0.0f);
  }
  for (std::int64_t first = 0; first < len; first += block) {
    const std::int64_t n = std::min(block, len - first);
    const float* entries = cache + first * stride;
    if (avx512) {
      kernels::AddWeightedSumHeadsAvx512(scores + first, len, heads, entries, stride, n, latent, out, latent);
      continue;
    }
    for (std::int64_t h = 0; h < heads; ++h) {
      const float* p = scores + h * len + first;
      if (avx2) {
        kernels::AddWeightedSumAvx2(p, entries, stride, n, latent, out + h * latent);
      } else {
        AddWeightedSum(p, entries, stride, n, latent, out + h * latent);
      }
    }
  }
}

namespace kernels {

void TransposedQuantizedPortable(const QuantizedMatrix& w, const float* x, std::int64_t batch, float* y, std::int64_t begin,
                                 std::int64_t end) {
  for (std::int64_t b = 0; b < batch; ++b) {
    const float* xb = x + b * w.rows;
    for (std::int64_t c = begin; c < end; ++c) {
      float acc = 0.0f;
      for (std::int64_t r = 0; r < w.rows; ++r) acc += static_cast<float>(w.Level(r, c)) * (w.Scale(r, c) * xb[r]);
      y[b * w.cols + c] = acc;
    }
  }
}

namespace {

// The columns of [begin, end) either side of its whole 32-column blocks by the
// portable loop, the blocks by `blocks` (a SIMD file's TransposedQuantizedBlocks*).
template <class Blocks>
void ByWholeBlocks(const QuantizedMatrix& w, const float* x, std::int64_t batch, float* y, std::int64_t begin, std::int64_t end,
                   Blocks blocks) {
  constexpr std::int64_t kBlock = 32;  // QuantizedMatrix's columns a block
  const std::int64_t first = (begin + kBlock - 1) / kBlock, last = std::max(first, end / kBlock);
  TransposedQuantizedPortable(w, x, batch, y, begin, std::min(end, first * kBlock));
  TransposedQuantizedPortable(w, x, batch, y, std::max(begin, last * kBlock), end);
  blocks(QuantizedTiles{w.values.data(), w.scales.data(), w.rows, w.cols, w.group, w.format == QuantFormat::kInt8}, x, batch, y, first,
         last);
}

}  // namespace

void TransposedQuantizedAvx2(const QuantizedMatrix& w, const float* x, std::int64_t batch, float* y, std::int64_t begin, std::int64_t end) {
  ByWholeBlocks(w, x, batch, y, begin, end, TransposedQuantizedBlocksAvx2);
}

void TransposedQuantizedAvx512(const QuantizedMatrix& w, const float* x, std::int64_t batch, float* y, std::int64_t begin,
                               std::int64_t end) {
  ByWholeBlocks(w, x, batch, y, begin, end, TransposedQuantizedBlocksAvx512);
}

}  // namespace kernels

}  // namespace tandem::rt
