#pragma once

#include <cstdint>

// The exact block sums of DeepSeek V4.1's FP4 products, for the per-ISA paths
// (microscaled_avx512.cpp): an input row quantized to E4M3 per 32 is held as the integers
// x · 512 (E4M3's smallest step is 2^-9, its largest value 448: 19 bits with the sign),
// split into x·512 = high · 512 + low with low in [0, 512) — both fit int16 — in each block
// the even columns first, then the odd ones (the order an FP4 byte's low and high nibbles
// give). An E2M1 weight is the integer 2w in [−12, 12]. A block's Σ (x·512)(2w) is below
// 2^27, exact in int32, and its fp32 rounding times 2^-10 is the exact block sum rounded
// once, as the portable path computes it in double.
namespace tandem::rt::kernels {

struct Fp4Input {
  const std::int16_t* high = nullptr;  // [blocks × 32]
  const std::int16_t* low = nullptr;   // [blocks × 32]
  std::int64_t blocks = 0;
  // The same values by pairs of blocks (b, b + 1), 128 int16 a pair: high evens (block b's
  // 16, then b + 1's), high odds, low evens, low odds — what 32 bytes of two blocks give
  // widened to 16-bit lanes.
  const std::int16_t* pairs = nullptr;
};

// partials[b] = Σ over block b of (x·512)(2w) for one row of packed FP4 bytes (cols/2).
void Fp4RowSumsAvx512(const std::uint8_t* packed, const Fp4Input& input, std::int32_t* partials);

// 16 rows at once (rows `packed`, `packed + row_bytes`, …), their results in the lanes of
// one register: out[r] = bf16(Σ_b fp32(block sum)·2^-10 · a_scale[b] · w_scale[r][b]),
// the blocks added in order in fp32 — each lane the reference's fp8/fp4_gemm accumulation
// of its row. `tile_scales` holds the 16 rows' E8M0 scales block by block ([blocks][16]).
void Fp4Rows16Avx512(const std::uint8_t* packed, std::int64_t row_bytes, const std::uint8_t* tile_scales, const Fp4Input& input,
                     const float* a_scale, float* out);

// The same block terms (the fp32 block sum times 2^-10, times both scales in double) added
// in double, not rounded: out[r] for rows whose columns a layout may split.
void Fp4Rows16F64Avx512(const std::uint8_t* packed, std::int64_t row_bytes, const std::uint8_t* tile_scales, const Fp4Input& input,
                        const float* a_scale, double* out);

// FP8 E4M3 weights (one byte each) against an input split as for FP4 but in column order
// (`input.high`, `input.low`, 32 a block): a weight is the integer w·512 = high·512 + low
// too, and a block's Σ (x·512)(w·512) is summed as three exact int32 parts (high·high,
// the cross terms, low·low), joined in double. 16 rows of one 32-row scale block: `scales`
// is that block row's E8M0 scales, one per 32 columns.
void Fp8Rows16Avx512(const std::uint8_t* values, std::int64_t row_bytes, const std::uint8_t* scales, const Fp4Input& input,
                     const float* a_scale, float* out);

}  // namespace tandem::rt::kernels
