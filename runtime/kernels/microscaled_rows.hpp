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

// A whole tile of 16 FP4 rows is stored interleaved, block by block (256 bytes a block), in
// 8 groups of 32 bytes: group 2q + h holds rows 8h … 8h + 7, each its bytes 4q … 4q + 3 of the
// block (columns 8q … 8q + 7), row after row. Read as bytes, with the low nibbles in one
// half of a register and the high nibbles in the other, each 32-bit lane is one row's four
// weights of the same parity (columns 8q, +2, +4, +6, or 8q + 1, +3, +5, +7): a 4-byte dot
// product sums straight into a row's lane.
//
// An input row for the tiles, per block, in the form each path reads:
//  - `bytes` (AVX-512 VNNI + GFNI: unsigned weights 2w + 12 against signed bytes): x·512 =
//    a·2^14 + b·2^7 + c with a in [−14, 14], b and c in [0, 128); for each q (0–3) and part
//    (a, b, c) 64 bytes: lanes 0–7 each the part of columns 8q, +2, +4, +6, lanes 8–15 of
//    8q + 1, +3, +5, +7 — [blocks][4][3][64]; and `offset`, 12 · Σ x·512 over the block, which
//    the weights' +12 added;
//  - `words` (AVX-512 BW: int16 weights 2w against the input's high and low halves): for each
//    q four int64, each two int32 lanes' pairs of int16 (low first): high(8q), high(8q + 2) |
//    high(8q + 4), high(8q + 6); the same of 8q + 1, +3, +5, +7; then both of the low halves
//    — [blocks][4][4].
struct Fp4TileInput {
  const std::int8_t* bytes = nullptr;
  const std::int32_t* offset = nullptr;
  const std::int64_t* words = nullptr;
  const float* a_scale = nullptr;  // [blocks]
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
// Both by bytes, with AVX-512 VNNI's 4-byte dot products and GFNI's nibble split
// (microscaled_vnni.cpp): the same integers, so the same bits. Only when
// HasAvx512VnniGfni().
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
