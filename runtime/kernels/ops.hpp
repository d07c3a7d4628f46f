#pragma once

#include <cstdint>

// Row-wise elementwise kernels. Each works on one row at a time with a fixed
// order of operations, so results are independent of batching.
namespace tandem::rt {

// out = x / sqrt(mean(x²) + eps) · weight, for each of `rows` rows of width n.
// `out` may alias `x`.
void RmsNorm(const float* x, const float* weight, std::int64_t rows, std::int64_t n, float eps, float* out);

// gate[i] = silu(gate[i]) · up[i]
void SwiGlu(float* gate, const float* up, std::int64_t n);

// In-place softmax over n values (max-subtracted).
void Softmax(float* x, std::int64_t n);

}  // namespace tandem::rt
