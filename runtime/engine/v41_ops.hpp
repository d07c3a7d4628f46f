#pragma once

#include <cstdint>
#include <vector>

#include "runtime/kernels/weight_matrix.hpp"

// Row operations DeepSeek V4.1's backbone (V41Engine) and its DSpark stages (V41DSpark)
// share, with the reference's roundings.
namespace tandem::rt {

class ThreadPool;
struct V41Attention;

// bf16 rounding of values held in fp32.
float V41Bf16(float v);
void V41Bf16(float* v, std::int64_t n);

// The reference's RMSNorm: bf16(w · (x · rsqrt(mean(x²) + eps))) in fp32, the mean's sum in
// double.
void V41Norm(const float* x, const std::vector<float>& w, std::int64_t n, float eps, float* out);

// y = W·x for the plain (BF16, F32) matrices, each sum taken in double and rounded once to
// fp32: the reference's fp32 product whatever order it sums in, but at near-ties.
void PlainMatMul(const WeightMatrix& w, const float* x, std::int64_t batch, float* y, ThreadPool* pool);

// The grouped output projection: each group of heads of `o` ([rows × heads·head_dim]) through
// its own o_lora rows of wo_a (bf16 out), then wo_b → out [rows × dim].
void V41GroupedOutput(const V41Attention& a, const float* o, std::int64_t rows, std::int64_t heads, std::int64_t head_dim,
                      std::int64_t groups, std::int64_t lora, float* out, ThreadPool* pool);

}  // namespace tandem::rt
