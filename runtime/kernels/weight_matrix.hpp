#pragma once

#include <cstdint>
#include <memory>

namespace tandem::rt {

struct QuantizedMatrix;

// A row-major [rows × cols] weight matrix as the kernels read it, usually a view
// into a memory-mapped checkpoint. Linear layers store [out × in], so y = W·x
// reads one row per output.
//
// - kF32, kBF16: `data` holds the values.
// - kF8E4M3: `data` holds e4m3 bytes; the value of (r, c) is byte · block_scales at
//   block ((r + block_origin_row) / 128, (c + block_origin_col) / 128) of a
//   [⌈R/128⌉ × scale_cols] grid (DeepSeek-V3's `weight_scale_inv`). The origins let
//   row and column slices keep reading the grid of the full matrix.
// - kQuantized: only `quantized` holds the values (a group-quantized checkpoint).
struct WeightMatrix {
  enum class Type { kF32, kBF16, kF8E4M3, kQuantized };

  static constexpr std::int64_t kFp8Block = 128;

  Type type = Type::kF32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  const void* data = nullptr;
  std::shared_ptr<const void> owner;  // keeps `data` alive (its copy, or the file's mapping)
  // kF8E4M3 only.
  const float* block_scales = nullptr;
  std::shared_ptr<const void> block_scales_owner;  // a slice keeps its full matrix's grid
  std::int64_t scale_cols = 0;
  std::int64_t block_origin_row = 0;
  std::int64_t block_origin_col = 0;
  // For kQuantized, the values. For other types, when set, MatMul reads this
  // group-quantized copy instead of `data` (a drafter's cheaper reading of the same
  // matrix); every other use still reads `data`.
  std::shared_ptr<const QuantizedMatrix> quantized;

  bool empty() const { return data == nullptr && !quantized; }
  // Bytes per value of `data` (kQuantized: 0; see QuantizedMatrix::bytes).
  std::size_t element_size() const;
  // Bytes the kernels read for the whole matrix (values and scales).
  std::size_t bytes() const;

  // Rows [first, first + count) as a matrix sharing this one's storage (a kQuantized
  // matrix copies them).
  WeightMatrix RowSlice(std::int64_t first, std::int64_t count) const;
  // One element as fp32 (for tests and tools, not hot loops).
  float At(std::int64_t row, std::int64_t col) const;

  // Matrices that own their values (tests, benchmarks, converted tensors). An fp8
  // matrix's `scales` is its ⌈rows/128⌉ × ⌈cols/128⌉ block-scale grid.
  static WeightMatrix OwnedF32(std::int64_t rows, std::int64_t cols, std::shared_ptr<const float[]> values);
  static WeightMatrix OwnedBf16(std::int64_t rows, std::int64_t cols, std::shared_ptr<const std::uint16_t[]> values);
  static WeightMatrix OwnedF8E4M3(std::int64_t rows, std::int64_t cols, std::shared_ptr<const std::uint8_t[]> values,
                                  std::shared_ptr<const float[]> scales);
  // A kQuantized matrix over `q` (its shape).
  static WeightMatrix FromQuantized(std::shared_ptr<const QuantizedMatrix> q);
};

// dst[i] = row `row` of W as fp32 (embedding lookup).
void CopyRow(const WeightMatrix& w, std::int64_t row, float* dst);

}  // namespace tandem::rt
