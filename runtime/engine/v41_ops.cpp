#include "runtime/engine/v41_ops.hpp"

#include <algorithm>
#include <cmath>

#include "runtime/engine/v41_weights.hpp"
#include "runtime/kernels/matmul.hpp"
#include "runtime/kernels/microscaled_matrix.hpp"
#include "runtime/numeric/dtype.hpp"

namespace tandem::rt {

float V41Bf16(float v) { return Bf16ToF32(F32ToBf16(v)); }

void V41Bf16(float* v, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) v[i] = V41Bf16(v[i]);
}

void V41Norm(const float* x, const std::vector<float>& w, std::int64_t n, float eps, float* out) {
  double squares = 0.0;
  for (std::int64_t i = 0; i < n; ++i) squares += static_cast<double>(x[i]) * x[i];
  const float r = 1.0f / std::sqrt(static_cast<float>(squares / static_cast<double>(n)) + eps);
  for (std::int64_t i = 0; i < n; ++i) out[i] = V41Bf16(w[static_cast<std::size_t>(i)] * (x[i] * r));
}

void PlainMatMul(const WeightMatrix& w, const float* x, std::int64_t batch, float* y, ThreadPool* pool) {
  std::vector<double> wide(static_cast<std::size_t>(batch * w.rows));
  MatMulF64(w, x, batch, wide.data(), pool);
  for (std::size_t i = 0; i < wide.size(); ++i) y[i] = static_cast<float>(wide[i]);
}

void V41GroupedOutput(const V41Attention& a, const float* o, std::int64_t rows, std::int64_t heads, std::int64_t head_dim,
                      std::int64_t groups, std::int64_t lora, float* out, ThreadPool* pool) {
  const std::int64_t group_in = heads * head_dim / groups;
  std::vector<float> grouped(static_cast<std::size_t>(rows * groups * lora)), in(static_cast<std::size_t>(rows * group_in)),
      part(static_cast<std::size_t>(rows * lora));
  for (std::int64_t g = 0; g < groups; ++g) {
    for (std::int64_t r = 0; r < rows; ++r) std::copy_n(o + r * heads * head_dim + g * group_in, group_in, in.data() + r * group_in);
    PlainMatMul(a.wo_a.RowSlice(g * lora, lora), in.data(), rows, part.data(), pool);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t k = 0; k < lora; ++k) {
        grouped[static_cast<std::size_t>(r * groups * lora + g * lora + k)] = V41Bf16(part[static_cast<std::size_t>(r * lora + k)]);
      }
    }
  }
  MatMul(a.wo_b, grouped.data(), rows, out, pool);
}

}  // namespace tandem::rt
