#include "runtime/engine/cuda/device_weights.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "runtime/numeric/dtype.hpp"

namespace tandem::rt::cuda {

namespace {

// The part's values in the stack's type, in host memory (parts already of that
// type are copied straight from their mapping instead).
std::vector<std::byte> Widened(const WeightMatrix& m, DType type) {
  const auto n = static_cast<std::size_t>(m.rows * m.cols);
  std::vector<std::byte> out(n * (type == DType::kF32 ? 4 : 2));
  for (std::int64_t r = 0; r < m.rows; ++r) {
    for (std::int64_t c = 0; c < m.cols; ++c) {
      const float v = m.At(r, c);
      const auto i = static_cast<std::size_t>(r * m.cols + c);
      if (type == DType::kF32) {
        std::memcpy(out.data() + 4 * i, &v, 4);
      } else {
        const std::uint16_t bits = F32ToBf16(v);
        std::memcpy(out.data() + 2 * i, &bits, 2);
      }
    }
  }
  return out;
}

bool SameType(const WeightMatrix& m, DType type) {
  return (type == DType::kF32 && m.type == WeightMatrix::Type::kF32) || (type == DType::kBF16 && m.type == WeightMatrix::Type::kBF16);
}

}  // namespace

DeviceMatrix Upload(const WeightMatrix& m) {
  const WeightMatrix* parts[] = {&m};
  return UploadStacked(parts);
}

DeviceMatrix UploadStacked(std::span<const WeightMatrix* const> parts) {
  DeviceMatrix out;
  if (parts.empty()) return out;
  const std::int64_t rows = parts[0]->rows, cols = parts[0]->cols;
  bool all_bf16 = true;
  for (const WeightMatrix* m : parts) {
    if (m->rows != rows || m->cols != cols) {
      throw std::invalid_argument(
          fmt::format("device upload: stacked matrices differ in shape ([{} × {}] and [{} × {}])", rows, cols, m->rows, m->cols));
    }
    all_bf16 = all_bf16 && m->type == WeightMatrix::Type::kBF16;
  }
  // bf16 stays bf16; everything else becomes fp32, which holds an fp8 value times its
  // block scale, or a quantized level times its group scale, exactly as the CPU
  // kernels compute it.
  const DType type = all_bf16 ? DType::kBF16 : DType::kF32;
  const std::size_t part_bytes = static_cast<std::size_t>(rows * cols) * (type == DType::kF32 ? 4 : 2);
  out.storage.Reserve(part_bytes * parts.size());
  for (std::size_t p = 0; p < parts.size(); ++p) {
    std::byte* dst = out.storage.get() + p * part_bytes;
    if (SameType(*parts[p], type)) {
      Check(cudaMemcpy(dst, parts[p]->data, part_bytes, cudaMemcpyHostToDevice), "cudaMemcpy (weights)");
    } else {
      const std::vector<std::byte> widened = Widened(*parts[p], type);
      Check(cudaMemcpy(dst, widened.data(), part_bytes, cudaMemcpyHostToDevice), "cudaMemcpy (weights)");
    }
  }
  out.view = {type, rows, cols, out.storage.get()};
  return out;
}

DeviceMlp DeviceMlp::Upload(const MlpWeights& w) { return {cuda::Upload(w.gate), cuda::Upload(w.up), cuda::Upload(w.down)}; }

void DeviceMlp::Forward(const float* x, std::int64_t rows, float* gate_scratch, float* up_scratch, float* out, bool accumulate,
                        cudaStream_t stream) const {
  const std::int64_t inter = intermediate(), hidden = gate.view.cols;
  Gemv(gate.view, x, hidden, rows, gate_scratch, inter, false, stream);
  Gemv(up.view, x, hidden, rows, up_scratch, inter, false, stream);
  SwiGlu(gate_scratch, up_scratch, rows * inter, stream);
  Gemv(down.view, gate_scratch, inter, rows, out, hidden, accumulate, stream);
}

DeviceBuffer<float> UploadFloats(std::span<const float> values) {
  DeviceBuffer<float> out(std::max<std::size_t>(values.size(), 1));
  if (!values.empty()) Check(cudaMemcpy(out.get(), values.data(), values.size_bytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
  return out;
}

DeviceBuffer<double> UploadDoubles(std::span<const double> values) {
  DeviceBuffer<double> out(std::max<std::size_t>(values.size(), 1));
  if (!values.empty()) Check(cudaMemcpy(out.get(), values.data(), values.size_bytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
  return out;
}

}  // namespace tandem::rt::cuda
