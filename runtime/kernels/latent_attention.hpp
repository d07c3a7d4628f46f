#pragma once

#include <cstdint>

namespace tandem::rt {

// One query head over one sequence's compressed MLA cache, with the key and value
// up-projections absorbed into the query and the output:
//   s_t = (q_latent, q_rope) · (c_t, k_t) · scale   for t < len
//   out = Σ_t softmax(s)_t · c_t
// `cache` holds len entries of `stride` floats: c_t (`latent` floats) then k_t
// (`rope` floats). `scores` is scratch of at least len floats. The sums run in
// a fixed order (a score as one Dot over the latent + rope floats of query and entry;
// the weighted sum over t ascending, each product fused into it), so the result
// depends on nothing but the inputs.
void LatentAttention(const float* q_latent, const float* q_rope, const float* cache, std::int64_t stride, std::int64_t len,
                     std::int64_t latent, std::int64_t rope, float scale, float* scores, float* out);

// LatentAttention for `heads` query heads over the same cache: head h reads its
// queries at q_latent + h·q_latent_stride and q_rope + h·q_rope_stride and writes
// out + h·latent; `scores` is scratch of heads·len floats. Each head gets exactly
// the bits LatentAttention gives it alone. The scores, and then the weighted sums,
// take the cache a block of entries at a time for all the heads, so each of the two
// passes reads it from memory once rather than once per head.
void LatentAttentionHeads(const float* q_latent, std::int64_t q_latent_stride, const float* q_rope, std::int64_t q_rope_stride,
                          std::int64_t heads, const float* cache, std::int64_t stride, std::int64_t len, std::int64_t latent,
                          std::int64_t rope, float scale, float* scores, float* out);

}  // namespace tandem::rt
