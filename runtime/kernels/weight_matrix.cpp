#include "runtime/kernels/weight_matrix.hpp"

#include <cassert>
#include <cstring>
#include <utility>

#include "runtime/kernels/quantized_matrix.hpp"
#include "runtime/numeric/dtype.hpp"

namespace tandem::rt {

std::size_t WeightMatrix::element_size() const {
  switch (type) {
    case Type::kF32:
      return 4;
    case Type::kBF16:
      return 2;
    case Type::kF8E4M3:
      return 1;
    case Type::kQuantized:
      return 0;
  }
  return 0;
}

std::size_t WeightMatrix::bytes() const {
  if (type == Type::kQuantized) return quantized->bytes();
  std::size_t total = static_cast<std::size_t>(rows * cols) * element_size();
  if (type == Type::kF8E4M3) {
    const std::int64_t block_rows = (rows + kFp8Block - 1) / kFp8Block, block_cols = (cols + kFp8Block - 1) / kFp8Block;
    total += static_cast<std::size_t>(block_rows * block_cols) * sizeof(float);
  }
  return total;
}

WeightMatrix WeightMatrix::RowSlice(std::int64_t first, std::int64_t count) const {
  assert(first >= 0 && count >= 0 && first + count <= rows);
  WeightMatrix slice = *this;
  slice.rows = count;
  if (type == Type::kQuantized) {
    slice.quantized = std::make_shared<const QuantizedMatrix>(quantized->Rows(first, count));
    return slice;
  }
  slice.quantized.reset();  // a slice reads the full-precision rows
  slice.data = static_cast<const std::byte*>(data) + static_cast<std::size_t>(first * cols) * element_size();
  if (type == Type::kF8E4M3) slice.block_origin_row += first;
  return slice;
}

float WeightMatrix::At(std::int64_t row, std::int64_t col) const {
  const std::size_t i = static_cast<std::size_t>(row * cols + col);
  switch (type) {
    case Type::kF32:
      return static_cast<const float*>(data)[i];
    case Type::kBF16: {
      std::uint16_t bits;
      std::memcpy(&bits, static_cast<const std::byte*>(data) + 2 * i, 2);
      std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
      float value;
      std::memcpy(&value, &wide, 4);
      return value;
    }
    case Type::kF8E4M3: {
      const std::int64_t block_row = (row + block_origin_row) / kFp8Block, block_col = (col + block_origin_col) / kFp8Block;
      return F8E4M3ToF32(static_cast<const std::uint8_t*>(data)[i]) * block_scales[block_row * scale_cols + block_col];
    }
    case Type::kQuantized:
      return quantized->At(row, col);
  }
  return 0;
}

namespace {

// A matrix of `type` over `data`, kept alive by `owner`.
WeightMatrix Owned(WeightMatrix::Type type, std::int64_t rows, std::int64_t cols, const void* data, std::shared_ptr<const void> owner) {
  WeightMatrix m;
  m.type = type;
  m.rows = rows;
  m.cols = cols;
  m.data = data;
  m.owner = std::move(owner);
  return m;
}

}  // namespace

WeightMatrix WeightMatrix::OwnedF32(std::int64_t rows, std::int64_t cols, std::shared_ptr<const float[]> values) {
  const void* data = values.get();
  return Owned(Type::kF32, rows, cols, data, std::move(values));
}

WeightMatrix WeightMatrix::OwnedBf16(std::int64_t rows, std::int64_t cols, std::shared_ptr<const std::uint16_t[]> values) {
  const void* data = values.get();
  return Owned(Type::kBF16, rows, cols, data, std::move(values));
}

WeightMatrix WeightMatrix::OwnedF8E4M3(std::int64_t rows, std::int64_t cols, std::shared_ptr<const std::uint8_t[]> values,
                                       std::shared_ptr<const float[]> scales) {
  const void* data = values.get();
  WeightMatrix m = Owned(Type::kF8E4M3, rows, cols, data, std::move(values));
  m.block_scales = scales.get();
  m.block_scales_owner = std::move(scales);
  m.scale_cols = (cols + kFp8Block - 1) / kFp8Block;
  return m;
}

WeightMatrix WeightMatrix::FromQuantized(std::shared_ptr<const QuantizedMatrix> q) {
  WeightMatrix m;
  m.type = Type::kQuantized;
  m.rows = q->rows;
  m.cols = q->cols;
  m.quantized = std::move(q);
  return m;
}

void CopyRow(const WeightMatrix& w, std::int64_t row, float* dst) {
  if (w.type == WeightMatrix::Type::kF32) {
    std::memcpy(dst, static_cast<const float*>(w.data) + row * w.cols, static_cast<std::size_t>(w.cols) * 4);
  } else if (w.type == WeightMatrix::Type::kBF16) {
    const auto* src = static_cast<const std::uint16_t*>(w.data) + row * w.cols;
    for (std::int64_t i = 0; i < w.cols; ++i) dst[i] = Bf16ToF32(src[i]);
  } else {
    for (std::int64_t i = 0; i < w.cols; ++i) dst[i] = w.At(row, i);
  }
}

}  // namespace tandem::rt
