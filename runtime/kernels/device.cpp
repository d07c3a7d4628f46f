#include "runtime/kernels/device.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace tandem::rt {

Device ParseDevice(std::string_view name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  throw std::invalid_argument(fmt::format("unknown device '{}': expected cpu or cuda", name));
}

std::string_view ToString(Device device) { return device == Device::kCuda ? "cuda" : "cpu"; }

}  // namespace tandem::rt
