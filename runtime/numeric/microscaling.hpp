#pragma once

#include <cstddef>
#include <cstdint>

// The block formats of DeepSeek V4.1's weights, and the quantize-dequantize round trips its
// reference applies to activations (the window KV, the compressed KV, the indexer's queries
// and keys), bit for bit as the reference's kernels compute them.
namespace tandem::rt {

// E8M0: a power-of-two scale, 2^(bits − 127); 0xff is NaN.
float E8M0ToF32(std::uint8_t bits);
// E2M1 (FP4) in the low 4 bits: bit 3 the sign, magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}.
float E2M1ToF32(std::uint8_t nibble);
// Round to nearest, ties to the even code, saturating at ±6; the sign kept (−0 too).
std::uint8_t F32ToE2M1(float value);
// 2^⌈log2(amax · inv_max)⌉, from the bits of the fp32 product (the reference's
// fast_round_scale); the product must be a normal number.
float RoundScalePow2(float amax, float inv_max);

// In place over `n` values, each a bf16 held in fp32, `n` a multiple of the block:
// FP8 E4M3 with a power-of-two scale per 32 values, max|x| floored at 1e-4
// (act_quant(x, 32, "ue8m0")).
void RoundTripFp8(float* x, std::size_t n);
// FP4 E2M1 with a power-of-two scale per 32 values, max|x| floored at 6·2^-126 (the
// indexer's fp4_act_quant).
void RoundTripFp4Pow2(float* x, std::size_t n);
// FP4 E2M1 with an E4M3 scale per 16 values, max|x| floored at 6·2^-9 (the compressed
// KV's fp4_act_quant).
void RoundTripFp4E4M3(float* x, std::size_t n);

// One row of FP4 weights: `packed` holds cols/2 bytes (element 2j in the low nibble),
// `scales` cols/32 E8M0 scales; writes `cols` values to `out`.
void DequantizeFp4Row(const std::uint8_t* packed, const std::uint8_t* scales, std::int64_t cols, float* out);

}  // namespace tandem::rt
