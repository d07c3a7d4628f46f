#pragma once

#include <string>

// What the CUDA backend can do in this build and on this machine. Every build has
// these functions; a build without -DTANDEM_CUDA=ON answers "not built".
namespace tandem::rt {

// Whether this build has the CUDA backend.
bool CudaBuilt();

// Visible CUDA devices (0 when not built, no driver or no GPU).
int CudaDeviceCount();

// "NVIDIA H200, compute 9.0, 139.8 GiB" for device 0, or why there is none.
std::string CudaDeviceSummary();

// Throws std::invalid_argument saying why `--device cuda` cannot run here (not built,
// no usable device, a card older than the build's compute capability 9.0); returns
// when device 0 can be used.
void RequireCudaDevice();

}  // namespace tandem::rt
