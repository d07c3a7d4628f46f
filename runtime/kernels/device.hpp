#pragma once

#include <string>
#include <string_view>

namespace tandem::rt {

// Where a process computes: the CPU kernels (the default, every build) or the CUDA
// backend (builds configured with -DTANDEM_CUDA=ON, on a machine with a GPU).
enum class Device { kCpu, kCuda };

// "cpu" | "cuda"; anything else throws std::invalid_argument naming the value.
Device ParseDevice(std::string_view name);
std::string_view ToString(Device device);

}  // namespace tandem::rt
