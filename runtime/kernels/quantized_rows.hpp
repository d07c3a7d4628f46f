#pragma once

// The row kernels behind MatMul(const QuantizedMatrix&) (private to runtime/kernels).
//
// Inputs are quantized too, per block of 32 values: d = max|x| / 127 and
// q = round-half-even(x · 127 / max|x|) (all zero for a zero block). A block's
// product with 32 weights is then exact in integers, split into eight lanes of
// four products each; lane l of the row accumulates, block after block,
//   acc_l = fma(float(lane sum), weight_scale(group) · d(block), acc_l)
// and the eight lanes are combined pairwise (l + 4, + 2, + 1). Every path, SIMD or
// not, computes exactly this, so results depend only on the inputs.
//
// Which four products form a lane: for int8 weights, columns 4l … 4l+3 of the
// block. For int4 (two columns per byte, the even one in the low nibble): lanes
// 0–3 take even columns 8l, 8l+2, 8l+4, 8l+6 and lanes 4–7 the odd ones 8(l−4)+1,
// +3, +5, +7; the prepared input is laid out in that order (QuantizeInput).

#include <cstdint>

namespace tandem::rt::kernels {

constexpr int kInputBlock = 32;

// Quantizes `batch` rows of `cols` values (cols a multiple of 32) into q (int8,
// [batch × cols], in int4 lane order when `int4_order`), d ([batch × cols/32]) and,
// for int4, sums8 ([batch × cols/32 × 8]: 8 × the sum of each lane's four inputs,
// which the int4 kernels subtract because they read nibbles offset by 8).
void QuantizeInput(const float* x, std::int64_t batch, std::int64_t cols, bool int4_order, std::int8_t* q, float* d,
                   std::int32_t* sums8);

// The same, for AVX2 (quantized_avx2.cpp): identical bytes.
void QuantizeInputAvx2(const float* x, std::int64_t batch, std::int64_t cols, bool int4_order, std::int8_t* q, float* d,
                       std::int32_t* sums8);

// The prepared input of one batch row.
struct QuantizedInput {
  const std::int8_t* q;
  const float* d;
  const std::int32_t* sums8;  // int4 only
};

// Rows [begin, end) of y[b·y_stride + o] for b < batch; `inputs` has batch entries;
// `values`/`scales` are the QuantizedMatrix's; `group` a multiple of 32.
void RowsInt8Portable(const std::int8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                      std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end);
void RowsInt4Portable(const std::uint8_t* values, const float* scales, std::int64_t cols, int group,
                      const QuantizedInput* inputs, std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin,
                      std::int64_t end);
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
