#pragma once

// A group-quantized product's inputs, quantized once for its kernels (private to
// runtime/kernels: MatMul of a QuantizedMatrix and MatMulMany use it).

#include <cstdint>
#include <vector>

#include "runtime/kernels/cpu_features.hpp"
#include "runtime/kernels/quantized_rows.hpp"

namespace tandem::rt {

struct QuantizedMatrix;

namespace kernels {

// Buffers grow and are then reused: preparing allocates nothing once warm.
struct PreparedQuantizedInput {
  std::vector<std::int8_t> q;  // column order
  std::vector<float> d;
  std::vector<std::int32_t> sums;  // each block's input sum, where the kernels read it (block_sums)
  std::vector<QuantizedInput> rows;
  // What was prepared: a product with the same inputs (and sums, if its kernels read them) reuses it.
  const float* source = nullptr;
  std::int64_t batch = 0, cols = 0;
  bool block_sums = false;

  bool Serves(const QuantizedMatrix& w, const float* x, std::int64_t batch, Isa isa) const;
  void Prepare(const QuantizedMatrix& w, const float* x, std::int64_t batch, Isa isa);
};

// Rows [begin, end) of W · inputs into y[b · y_stride + (o − begin)].
void QuantizedRows(const QuantizedMatrix& w, const PreparedQuantizedInput& in, float* y, std::int64_t y_stride, std::int64_t begin,
                   std::int64_t end, Isa isa);

}  // namespace kernels
}  // namespace tandem::rt
