#pragma once

#include <cstdint>

// The exact block sums of DeepSeek V4.1's FP4 products, for the per-ISA paths
// (microscaled_avx512.cpp): an input row quantized to E4M3 per 32 is held as the integers
// x · 512 (E4M3's smallest step is 2^-9, its largest value 448: 19 bits with the sign),
// split into x·512 = high · 512 + low with low in [0, 512) — both fit int16 — in each block
// the even columns first, then the odd ones (the order an FP4 byte's low and high nibbles
// give) for a row stored row by row. An E2M1 weight is the integer 2w in [−12, 12]. A block's Σ (x·512)(2w) is below
// 2^27, exact in int32, and its fp32 rounding times 2^-10 is the exact block sum rounded
// once, as the portable path computes it in double.
namespace tandem::rt::kernels {

struct Fp4Input {
  const std::int16_t* high = nullptr;  // [blocks × 32]
  const std::int16_t* low = nullptr;   // [blocks × 32]
  std::int64_t blocks = 0;
};

// partials[b] = Σ over block b of (x·512)(2w) for one row of packed FP4 bytes (cols/2),
// stored row by row (the rows past a matrix's last whole tile).
void Fp4RowSumsAvx512(const std::uint8_t* packed, const Fp4Input& input, std::int32_t* partials);

// A whole tile of 16 FP4 rows is stored interleaved, block by block (256 bytes a block):
// group g (0–7) is 32 bytes, row r's bytes 2g and 2g + 1 of the block at 2r and 2r + 1. As
// 16-bit lanes, lane 2r holds row r's columns 4g (low nibble) and 4g + 1 (high nibble),
// lane 2r + 1 its columns 4g + 2 and 4g + 3: one load gives every row's next four weights,
// and a lane pair's multiply-add against a broadcast input pair sums into row r's lane.
// An input row for the tiles: per block and group, four int32 each holding two int16
// input values (low half first): high(4g), high(4g + 2); high(4g + 1), high(4g + 3); the
// same of the low halves.
struct Fp4TileInput {
  const std::int32_t* pairs = nullptr;  // [blocks × 8 × 4]
  const float* a_scale = nullptr;       // [blocks]
};

// 16 rows of one tile against `batch` inputs: out[j·16 + r] = the fp32 running sum
// Σ_b fp32(block sum)·2^-10 · a_scale[b] · w_scale[r][b] of input j, the blocks added in
// order — each lane the reference's fp8/fp4_gemm accumulation of its row (rounded to bf16
// by the caller). `tile_scales` holds the 16 rows' E8M0 scales block by block ([blocks][16]);
// `stream_end` is the end of the tiles the caller reads on (prefetched ahead up to there).
void Fp4Tile16Avx512(const std::uint8_t* tile, std::int64_t blocks, const std::uint8_t* tile_scales, const Fp4TileInput* inputs,
                     std::int64_t batch, const std::uint8_t* stream_end, float* out);
// The same block terms (the fp32 block sum times 2^-10, times both scales in double) added
// in double, not rounded: for rows whose columns a layout may split.
void Fp4Tile16F64Avx512(const std::uint8_t* tile, std::int64_t blocks, const std::uint8_t* tile_scales, const Fp4TileInput* inputs,
                        std::int64_t batch, const std::uint8_t* stream_end, double* out);
// Both with AVX-512 VNNI's multiply-accumulate (microscaled_vnni.cpp): the same integers,
// so the same bits. Only when HasAvx512Vnni().
void Fp4Tile16Vnni(const std::uint8_t* tile, std::int64_t blocks, const std::uint8_t* tile_scales, const Fp4TileInput* inputs,
                   std::int64_t batch, const std::uint8_t* stream_end, float* out);
void Fp4Tile16F64Vnni(const std::uint8_t* tile, std::int64_t blocks, const std::uint8_t* tile_scales, const Fp4TileInput* inputs,
                      std::int64_t batch, const std::uint8_t* stream_end, double* out);

// FP8 E4M3 weights (one byte each) against an input split as for FP4 but in column order
// (`input.high`, `input.low`, 32 a block): a weight is the integer w·512 = high·512 + low
// too, and a block's Σ (x·512)(w·512) is summed as three exact int32 parts (high·high,
// the cross terms, low·low), joined in double. 16 rows of one 32-row scale block: `scales`
// is that block row's E8M0 scales, one per 32 columns.
void Fp8Rows16Avx512(const std::uint8_t* values, std::int64_t row_bytes, const std::uint8_t* scales, const Fp4Input& input,
                     const float* a_scale, float* out);

}  // namespace tandem::rt::kernels
