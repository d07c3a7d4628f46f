#pragma once

// The row kernels behind MatMul(const QuantizedMatrix&) (private to runtime/kernels).
//
// Inputs are quantized too, per block of 32 values: d = max|x| / 127 and
// q = round-half-even(x · 127 / max|x|) (all zero, d = 0, for a block whose max|x|
// is below the smallest normal float). A block's
// product with 32 weights is then exact in integers, split into eight lanes of
// four products each; lane l of the row accumulates, block after block,
//   acc_l = fma(float(lane sum), weight_scale(group) · d(block), acc_l)
// and the eight lanes are combined pairwise (l + 4, + 2, + 1). Every path, SIMD or
// not, computes exactly this, so results depend only on the inputs.
//
// int4 differs (two columns per byte, the even one in the low nibble): blocks go in
// pairs, and lane l of a pair sums (in integers) eight columns: for l = 0–3 columns
// 8l … 8l+7 of the pair's first block, for l = 4–7 those of its second block; each
// lane's scale is its block's. A last unpaired block's lanes 4–7 add fma(0, 0, acc).
// The eight lanes are combined ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)): what
// horizontal adds give for four rows at once. (So a pair's 32 packed bytes unpack
// into its evens and odds with two masks and no shuffles, a lane's even and odd
// products meet in the integer sum — one conversion and one fma per lane — and four
// short rows end with three horizontal adds instead of four reductions.)

#include <cstdint>

namespace tandem::rt::kernels {

constexpr int kInputBlock = 32;

// Quantizes `batch` rows of `cols` values (cols a multiple of 32) into q (int8,
// [batch × cols], in column order) and d ([batch × cols/32]). PairInt4Input then
// arranges a row in the int4 kernels' layout.
void QuantizeInput(const float* x, std::int64_t batch, std::int64_t cols, std::int8_t* q, float* d);

// The same, for AVX2 (quantized_avx2.cpp): identical bytes.
void QuantizeInputAvx2(const float* x, std::int64_t batch, std::int64_t cols, std::int8_t* q, float* d);

// The prepared input of one batch row. For int4, q holds per pair of blocks 64 bytes
// (first block's evens, second's evens, first's odds, second's odds), sums 8 lanes
// per pair (8 × each lane's input sum, evens and odds: the kernels read nibbles
// offset by 8 and take it back out) and pair_d 8 scales ([d_first × 4, d_second ×
// 4]); zeros stand for a missing second block.
struct QuantizedInput {
  const std::int8_t* q;
  const float* d;
  const std::int32_t* sums;  // int4: as above; int8: 8 lanes per block, −128 × each lane's input sum (the VNNI kernel's start)
  const float* pair_d;       // int4 only
};

// One row's quantized input (QuantizeInput's) in the int4 kernels' layout: pair_q,
// pair_sums and pair_d as QuantizedInput describes them.
void PairInt4Input(const std::int8_t* q, const float* d, std::int64_t blocks, std::int8_t* pair_q, std::int32_t* pair_sums, float* pair_d);

// Rows [begin, end) of y[b·y_stride + o] for b < batch; `inputs` has batch entries;
// `values`/`scales` are the QuantizedMatrix's; `group` a multiple of 32.
void RowsInt8Portable(const std::int8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                      std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end);
void RowsInt4Portable(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                      std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end);
// AVX2 (quantized_avx2.cpp), and the same with AVX-512 VNNI's dot-product
// instruction for the lane sums (quantized_vnni.cpp; the same integers).
void RowsInt8Avx2(const std::int8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                  std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end);
void RowsInt4Avx2(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                  std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end);
void RowsInt8Vnni(const std::int8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                  std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end);
void RowsInt4Vnni(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                  std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end);

}  // namespace tandem::rt::kernels
