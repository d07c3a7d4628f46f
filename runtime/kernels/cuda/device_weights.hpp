#pragma once

// Weights copied to the device once, at load. bf16 and fp32 matrices keep their
// type; fp8 e4m3 and group-quantized matrices are widened to fp32 at upload (the
// device kernels read bf16 and fp32 only; fp32 keeps their values exact, at 4 bytes
// a weight). Internal to the CUDA backend.

#include <cstddef>
#include <span>
#include <vector>

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

DeviceBuffer<float> UploadFloats(std::span<const float> values);
DeviceBuffer<double> UploadDoubles(std::span<const double> values);

}  // namespace tandem::rt::cuda
