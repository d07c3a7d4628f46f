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
// The same with DeepSeek V4.1's clamp (`limit` > 0): gate[i] = silu(min(gate[i], limit)) ·
// clamp(up[i], −limit, limit) — the gate bounded from above only, as the reference does.
void SwiGluClamped(float* gate, const float* up, std::int64_t n, float limit);

// In-place softmax over n values (max-subtracted).
void Softmax(float* x, std::int64_t n);

// out[i] += weight · v[i] in double (v widened exactly), element by element: how
// expert outputs are combined. `out` must not alias `v`.
void AddScaled(double* out, const float* v, double weight, std::int64_t n);
void AddScaled(double* out, const double* v, double weight, std::int64_t n);

// The precision the experts see their input rows in. A hybrid layout sends rows
// over the wire in bf16 or block-scaled fp8; every rank, the coordinator included,
// computes from the rounded rows, so placement never changes what is computed.
// A single process can use the same rounding to compare like with like.
enum class ExpertInputPrecision { kF32, kBf16, kFp8Block32 };

constexpr int kFp8BlockSize = 32;
// The power-of-two exponent of a block of fp8 values: the smallest e with
// max|x| / 2^e <= 448 (e4m3's largest finite value), clamped to [−127, 127]; 0 for zeros.
int Fp8BlockExponent(const float* block, int n);

// Rounds `rows` rows of `width` values in place to `precision` (bf16: round to
// nearest even; fp8: per 32-value block, scale by 2^−e, round to e4m3, scale back).
void RoundExpertInput(float* x, std::int64_t rows, std::int64_t width, ExpertInputPrecision precision);

}  // namespace tandem::rt
