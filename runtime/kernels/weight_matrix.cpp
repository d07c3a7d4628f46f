#include "runtime/kernels/weight_matrix.hpp"

#include <cassert>
#include <cstring>

namespace tandem::rt {

WeightMatrix WeightMatrix::RowSlice(std::int64_t first, std::int64_t count) const {
  assert(first >= 0 && count >= 0 && first + count <= rows);
  WeightMatrix slice = *this;
  slice.rows = count;
  slice.quantized.reset();  // a slice reads the full-precision rows
  slice.data = static_cast<const std::byte*>(data) + static_cast<std::size_t>(first * cols) * element_size();
  return slice;
}

float WeightMatrix::At(std::int64_t row, std::int64_t col) const {
  const std::size_t i = static_cast<std::size_t>(row * cols + col);
  if (type == Type::kF32) return static_cast<const float*>(data)[i];
  std::uint16_t bits;
  std::memcpy(&bits, static_cast<const std::byte*>(data) + 2 * i, 2);
  std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}

WeightMatrix WeightMatrix::OwnedF32(std::int64_t rows, std::int64_t cols, std::shared_ptr<const float[]> values) {
  WeightMatrix m;
  m.type = Type::kF32;
  m.rows = rows;
  m.cols = cols;
  m.data = values.get();
  m.owner = std::move(values);
  return m;
}

}  // namespace tandem::rt
