#pragma once

#include <cstdint>

namespace tandem::rt {

// One query head over one sequence's compressed MLA cache, with the key and value
// up-projections absorbed into the query and the output:
//   s_t = (q_latent · c_t + q_rope · k_t) · scale   for t < len
//   out = Σ_t softmax(s)_t · c_t
// `cache` holds len entries of `stride` floats: c_t (`latent` floats) then k_t
// (`rope` floats). `scores` is scratch of at least len floats. The sums run in
// a fixed order (the dot products as Dot, the weighted sum over t ascending),
// so the result depends on nothing but the inputs.
void LatentAttention(const float* q_latent, const float* q_rope, const float* cache, std::int64_t stride, std::int64_t len,
                     std::int64_t latent, std::int64_t rope, float scale, float* scores, float* out);

}  // namespace tandem::rt
