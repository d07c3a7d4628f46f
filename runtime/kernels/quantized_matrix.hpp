#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/kernels/weight_matrix.hpp"
#include "runtime/kernels/weight_memory.hpp"

namespace tandem::rt {

class ThreadPool;

enum class QuantFormat { kInt8, kInt4 };

std::string_view ToString(QuantFormat format);  // "int8" | "int4"

// A quantized matrix's values and scales in row-major order, as files hold them: int8
// one signed byte per value; int4 two's-complement nibbles, the even column's in the
// low one; scales [rows][cols/group].
struct RowMajorQuantized {
  std::vector<std::uint8_t> values;
  std::vector<float> scales;
};

// A [rows × cols] matrix stored as signed integers with one fp32 scale per group of
// `group` consecutive values of a row (symmetric: w ≈ q · scale, q in [−127, 127]
// for int8 and [−7, 7] for int4). What `tandem-rt quantize` writes and the runtime
// computes with: half or a quarter of the bytes of bf16, read with fp32 accumulation.
//
// The storage is the kernels' (see kernels/quantized_rows.hpp): tiles of 16 rows (the
// last padded with zero rows), each tile block (32 columns) after block, each block
// as 64-byte chunks of the 16 rows' 4 bytes: int8 8 chunks of 4 columns, stored as
// q + 128; int4 4 chunks of 8 columns, byte i of a row holding columns i (low
// nibble) and 4 + i (high) as q + 8. Scales [tile][group][16 rows]. So one 64-byte
// load gives the kernels 16 rows × 4 (or 8) columns, for byte dot-product
// instructions against an input's 4 values broadcast.
// Files keep row-major order: FromRowMajor and RowMajor convert.
struct QuantizedMatrix {
  static constexpr std::int64_t kTileRows = 16;

  QuantFormat format = QuantFormat::kInt8;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  int group = 32;
  // In weight memory (huge pages where the kernel gives them: see weight_memory.hpp).
  WeightVector<std::uint8_t> values;  // padded rows · cols bytes (int8) or cols/2 (int4)
  WeightVector<float> scales;         // padded rows · cols/group

  // Throws std::invalid_argument when `group` is not a multiple of 32 (the kernels
  // quantize their inputs in blocks of 32) or does not divide cols.
  static QuantizedMatrix Quantize(const WeightMatrix& w, QuantFormat format, int group);
  // The same quantization in row-major order (what `tandem-rt quantize` writes).
  static RowMajorQuantized QuantizeRowMajor(const WeightMatrix& w, QuantFormat format, int group);
  // From row-major values and scales (RowMajorQuantized's order), as a checkpoint holds
  // them. Sizes must match (else std::invalid_argument).
  static QuantizedMatrix FromRowMajor(QuantFormat format, std::int64_t rows, std::int64_t cols, int group,
                                      std::span<const std::uint8_t> values, std::span<const float> scales);
  RowMajorQuantized RowMajor() const;

  std::size_t bytes() const { return values.size() + scales.size() * sizeof(float); }
  int Level(std::int64_t row, std::int64_t col) const;    // q
  float Scale(std::int64_t row, std::int64_t col) const;  // the scale of the value's group
  float At(std::int64_t row, std::int64_t col) const { return static_cast<float>(Level(row, col)) * Scale(row, col); }
  // Rows [first, first + count), copied.
  QuantizedMatrix Rows(std::int64_t first, std::int64_t count) const;
  // a's rows, then b's, in one matrix (same columns, format and group; else
  // std::invalid_argument).
  static QuantizedMatrix StackRows(const QuantizedMatrix& a, const QuantizedMatrix& b);
  // Columns [begin, end), copied. Throws std::invalid_argument unless both are
  // multiples of `group` (a slice keeps whole groups and their scales).
  QuantizedMatrix Columns(std::int64_t begin, std::int64_t end) const;
};

// Y[b, o] = Σ_i W[o, i] · X[b, i] with the inputs quantized to int8 per block of 32
// and integer block products (see kernels/quantized_rows.hpp for the exact order);
// a row's result does not depend on the batch, the threads or the code path.
void MatMul(const QuantizedMatrix& w, const float* x, std::int64_t batch, float* y, ThreadPool* pool);
// MatMul with double output (what MoeSlices' exact mode calls for down projections).
// Both run through MatMulMany (kernels/matmul.cpp), as a kQuantized WeightMatrix does.
void MatMulF64(const QuantizedMatrix& w, const float* x, std::int64_t batch, double* y, ThreadPool* pool);

}  // namespace tandem::rt
