#pragma once

// The row kernels behind MatMul(const QuantizedMatrix&) (private to runtime/kernels).
//
// Inputs are quantized too, per block of 32 values: d = max|x| / 127 and
// q = round-half-even(x · 127 / max|x|) (all zero, d = 0, for a block whose max|x|
// is below the smallest normal float). A block's product with 32 weights is then
// exact in integers.
//
// int8: a row's result is, block after block from acc = 0,
//   acc = fma(float(block sum), weight_scale(group) · d(block), acc)
// with the block sum the exact integer Σ w·q of its 32 columns. Every path, SIMD or
// not, computes exactly this, so results depend only on the inputs. The SIMD kernels
// compute 16 rows at once from the tile layout (quantized_matrix.hpp): per chunk of
// 4 columns, one 64-byte load of the tile's (w + 128) bytes against the input's 4
// bytes broadcast, started from −128 × the block's input sum (VNNI's vpdpbusd), or
// |w| against the input's bytes with w's signs (AVX2's vpmaddubsw), 8 rows at a time.
//
// int4 differs (row-major, two columns per byte, the even one in the low nibble):
// blocks go in pairs, and each row has eight lanes; lane l of a pair sums (in
// integers) eight columns: for l = 0–3 columns 8l … 8l+7 of the pair's first block,
// for l = 4–7 those of its second block; each lane's scale is its block's, and lane l
// accumulates acc_l = fma(float(lane sum), weight_scale · d, acc_l). A last unpaired
// block's lanes 4–7 add fma(0, 0, acc). The eight lanes are combined
// ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)): what horizontal adds give for four rows
// at once. (So a pair's 32 packed bytes unpack into its evens and odds with two masks
// and no shuffles, a lane's even and odd products meet in the integer sum — one
// conversion and one fma per lane — and four short rows end with three horizontal
// adds instead of four reductions.)

#include <cstdint>

namespace tandem::rt::kernels {

constexpr int kInputBlock = 32;
constexpr int kInt8TileRows = 16;  // QuantizedMatrix::kTileRows

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
  const std::int32_t* sums;  // int4: as above; int8 (VNNI only): per block, −128 × its input sum (the kernel's start)
  const float* pair_d;       // int4 only
};

// One row's quantized input (QuantizeInput's) in the int4 kernels' layout: pair_q,
// pair_sums and pair_d as QuantizedInput describes them.
void PairInt4Input(const std::int8_t* q, const float* d, std::int64_t blocks, std::int8_t* pair_q, std::int32_t* pair_sums, float* pair_d);

// int8: rows [begin, end) of y[b·y_stride + (o − begin)] for b < batch; `values` and
// `scales` are the whole QuantizedMatrix's (tile layout); `inputs` has batch entries.
void RowsInt8Portable(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                      std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end);
// int4: rows [begin, end) of y[b·y_stride + o]; `values`/`scales` are the
// QuantizedMatrix's; `group` a multiple of 32.
void RowsInt4Portable(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                      std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end);
// AVX2 (quantized_avx2.cpp), and the same with AVX-512 VNNI's dot-product
// instruction (quantized_vnni.cpp; the same integers), each as the portable ones.
void RowsInt8Avx2(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                  std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end);
void RowsInt4Avx2(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                  std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end);
void RowsInt8Vnni(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                  std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end);
void RowsInt4Vnni(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                  std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end);

}  // namespace tandem::rt::kernels
