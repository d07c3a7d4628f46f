#pragma once

// Weights copied to the device once, at load. bf16 and fp32 matrices keep their
// type; fp8 e4m3 and group-quantized matrices are widened to fp32 at upload (the
// device kernels read bf16 and fp32 only; fp32 keeps their values exact, at 4 bytes
// a weight). Internal to the CUDA backend.

#include <cstddef>
#include <span>
#include <vector>

#include "runtime/engine/mlp.hpp"
#include "runtime/kernels/cuda/device_memory.hpp"
#include "runtime/kernels/cuda/kernels.hpp"
#include "runtime/kernels/weight_matrix.hpp"

namespace tandem::rt::cuda {

struct DeviceMatrix {
  DeviceBuffer<std::byte> storage;
  MatrixView view;  // rows and cols of one part; data = storage
};

// One matrix.
DeviceMatrix Upload(const WeightMatrix& m);

// Matrices of one shape stacked part after part ([parts × rows × cols]); the view
// has the shape of one part. bf16 when every part is bf16, fp32 otherwise.
DeviceMatrix UploadStacked(std::span<const WeightMatrix* const> parts);

// A SwiGLU block on the device (dense layer, shared experts): down · (silu(gate · x) ⊙ (up · x)).
struct DeviceMlp {
  DeviceMatrix gate, up, down;

  static DeviceMlp Upload(const MlpWeights& w);
  std::int64_t intermediate() const { return gate.view.rows; }
  std::uint64_t bytes() const { return gate.storage.bytes() + up.storage.bytes() + down.storage.bytes(); }
  // out[b] (+)= mlp(x[b]) for b < rows (x and out `hidden` wide); `gate_scratch` and
  // `up_scratch` hold rows × intermediate() floats.
  void Forward(const float* x, std::int64_t rows, float* gate_scratch, float* up_scratch, float* out, bool accumulate,
               cudaStream_t stream) const;
};

DeviceBuffer<float> UploadFloats(std::span<const float> values);
DeviceBuffer<double> UploadDoubles(std::span<const double> values);

}  // namespace tandem::rt::cuda
