#pragma once

// The AVX2 + FMA and AVX-512 forms of attention's small loops (private to
// runtime/kernels; latent_attention_avx2.cpp, latent_attention_avx512.cpp). Each gives the same bits as the loop it stands for,
// so the callers choose them by what the CPU has, as the target clones they replace
// did, and not by TANDEM_ISA.

#include <cstdint>

namespace tandem::rt {
struct QuantizedMatrix;
}

namespace tandem::rt::kernels {

// scores[t] = Dot(q, e_t, dims) · scale for t < len: Dot's fused sixteen lanes and
// tree over an entry's first `dims` floats (entries `stride` floats apart), the latent
// and rope parts of query and entry taken as one vector each.
void LatentScoresAvx2(const float* q, const float* cache, std::int64_t stride, std::int64_t len, std::int64_t dims, float scale,
                      float* scores);
// out[c] = fma(p[t], c_t[c], out[c]) for t ascending: each product fused into the sum.
void AddWeightedSumAvx2(const float* p, const float* cache, std::int64_t stride, std::int64_t len, std::int64_t latent, float* out);
// The AVX-512 forms of the two for `heads` query heads over the same block of `len`
// entries (head h's query at q + h·q_stride, its scores at scores + h·scores_stride,
// its weights at p + h·p_stride, its sums at out + h·out_stride): the same bits as the
// loops above, head by head (latent_attention_avx512.cpp).
void LatentScoresHeadsAvx512(const float* q, std::int64_t q_stride, std::int64_t heads, const float* cache, std::int64_t stride,
                             std::int64_t len, std::int64_t dims, float scale, float* scores, std::int64_t scores_stride);
void AddWeightedSumHeadsAvx512(const float* p, std::int64_t p_stride, std::int64_t heads, const float* cache, std::int64_t stride,
                               std::int64_t len, std::int64_t latent, float* out, std::int64_t out_stride);
// MatMulTransposed's columns [begin, end): y[b, c] = Σ_r w[r, c] · x[b, r] over r
// ascending, each product rounded before it is added.
void TransposedBf16Avx2(const std::uint16_t* w, std::int64_t rows, std::int64_t cols, const float* x, std::int64_t batch, float* y,
                        std::int64_t begin, std::int64_t end);
void TransposedF32Avx2(const float* w, std::int64_t rows, std::int64_t cols, const float* x, std::int64_t batch, float* y,
                       std::int64_t begin, std::int64_t end);
// The bf16 one on AVX-512 (attention's key absorption: a decode step's one input, or a
// prompt chunk's or a batch's rows in fours): the same bits (latent_attention_avx512.cpp).
void TransposedBf16Avx512(const std::uint16_t* w, std::int64_t rows, std::int64_t cols, const float* x, std::int64_t batch, float* y,
                          std::int64_t begin, std::int64_t end);
// The same for a QuantizedMatrix (int8 or int4, its tile layout): y[b, c] =
// Σ_r q[r, c] · (scale[r, c] · x[b, r]) over r ascending, the scale's product with the
// input rounded, then the product with the level, before it is added (rows past
// w.rows, a tile's padding, are not read). TransposedQuantizedPortable is the loop it
// stands for (latent_attention.cpp, compiled as this file is): the same bits. AVX2
// takes a tile's 8 rows × 32 columns at a time; AVX-512 up to 128 columns of a tile's
// rows, reading the matrix tile after tile. Both (latent_attention.cpp) give the
// columns either side of whole 32-column blocks to the portable loop and the blocks to
// their SIMD file's TransposedQuantizedBlocks*, over a QuantizedTiles: the matrix's
// storage as plain pointers, for files that may not use standard-library templates.
struct QuantizedTiles {
  const std::uint8_t* values;
  const float* scales;
  std::int64_t rows, cols, group;
  bool int8;
};
void TransposedQuantizedAvx2(const QuantizedMatrix& w, const float* x, std::int64_t batch, float* y, std::int64_t begin, std::int64_t end);
void TransposedQuantizedAvx512(const QuantizedMatrix& w, const float* x, std::int64_t batch, float* y, std::int64_t begin,
                               std::int64_t end);
void TransposedQuantizedBlocksAvx2(const QuantizedTiles& w, const float* x, std::int64_t batch, float* y, std::int64_t first_block,
                                   std::int64_t last_block);
void TransposedQuantizedBlocksAvx512(const QuantizedTiles& w, const float* x, std::int64_t batch, float* y, std::int64_t first_block,
                                     std::int64_t last_block);
void TransposedQuantizedPortable(const QuantizedMatrix& w, const float* x, std::int64_t batch, float* y, std::int64_t begin,
                                 std::int64_t end);

}  // namespace tandem::rt::kernels
