#pragma once

// The row kernels behind MatMul(const QuantizedMatrix&) (private to runtime/kernels).
//
// Inputs are quantized too, per block of 32 values: d = max|x| / 127 and
// q = round-half-even(x · 127 / max|x|) (all zero, d = 0, for a block whose max|x|
// is below the smallest normal float). A block's product with 32 weights is then
// exact in integers.
//
// A row's result is, block after block from acc = 0,
//   acc = fma(float(block sum), weight_scale(group) · d(block), acc)
// with the block sum the exact integer Σ w·q of its 32 columns. Every path, SIMD or
// not, computes exactly this, so results depend only on the inputs.
//
// The SIMD kernels compute 16 rows at once from the tile layout (quantized_matrix.hpp):
// a 64-byte load holds 16 rows' 4 bytes of a chunk. int8 (stored w + 128): one
// vpdpbusd against the input's 4 bytes broadcast, the block's sum started from
// −128 × its input sum (VNNI), or |w| against the input's bytes with w's signs
// (AVX2's vpmaddubsw), 8 rows at a time. int4 (stored w + 8, columns i and 4 + i of
// the chunk's 8 in byte i's low and high nibble): the low and the high nibbles, each
// against their 4 inputs broadcast, the sum started from −8 × the block's input sum
// (vpdpbusd, or vpmaddubsw, whose pairs of nibble × byte products never saturate).

#include <cstdint>

namespace tandem::rt {
enum class QuantFormat;
}

namespace tandem::rt::kernels {

constexpr int kInputBlock = 32;
constexpr int kTileRows = 16;  // QuantizedMatrix::kTileRows: rows per tile

// Quantizes `batch` rows of `cols` values (cols a multiple of 32) into q (int8,
// [batch × cols], in column order) and d ([batch × cols/32]).
void QuantizeInput(const float* x, std::int64_t batch, std::int64_t cols, std::int8_t* q, float* d);

// The same, for AVX2 (quantized_avx2.cpp): identical bytes.
void QuantizeInputAvx2(const float* x, std::int64_t batch, std::int64_t cols, std::int8_t* q, float* d);

// The prepared input of one batch row.
struct QuantizedInput {
  const std::int8_t* q;
  const float* d;
  const std::int32_t* sums;  // per block, Σ q (where the kernels read it: PreparedQuantizedInput)
};

// Rows [begin, end) of y[b·y_stride + (o − begin)] for b < batch; `values` and `scales`
// are the whole QuantizedMatrix's (tile layout); `inputs` has batch entries.
void RowsPortable(QuantFormat format, const std::uint8_t* values, const float* scales, std::int64_t cols, int group,
                  const QuantizedInput* inputs, std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end);
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
