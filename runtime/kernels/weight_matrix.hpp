#pragma once

#include <cstdint>
#include <memory>

namespace tandem::rt {

struct QuantizedMatrix;

// A row-major [rows × cols] weight matrix as the kernels read it: fp32 or bf16,
// usually a view into a memory-mapped checkpoint. Linear layers store [out × in],
// so y = W·x reads one row per output.
struct WeightMatrix {
  enum class Type { kF32, kBF16 };

  Type type = Type::kF32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  const void* data = nullptr;
  std::shared_ptr<const void> owner;  // keeps converted storage alive; empty for mapped views
  // When set, MatMul reads this group-quantized copy instead of `data` (a drafter's
  // cheaper reading of the same matrix); every other use still reads `data`.
  std::shared_ptr<const QuantizedMatrix> quantized;

  bool empty() const { return data == nullptr; }
  std::size_t element_size() const { return type == Type::kF32 ? 4 : 2; }
  std::size_t bytes() const { return static_cast<std::size_t>(rows * cols) * element_size(); }

  // Rows [first, first + count) as a matrix sharing this one's storage.
  WeightMatrix RowSlice(std::int64_t first, std::int64_t count) const;
  // One element as fp32 (for tests and tools, not hot loops).
  float At(std::int64_t row, std::int64_t col) const;

  static WeightMatrix OwnedF32(std::int64_t rows, std::int64_t cols, std::shared_ptr<const float[]> values);
};

}  // namespace tandem::rt
