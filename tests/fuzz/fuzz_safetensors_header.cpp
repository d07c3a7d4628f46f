// Fuzzes the safetensors header parser: any bytes a checkpoint file may hold.
// Only ModelError may escape; offsets it accepts must lie inside the file.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "runtime/model/model_error.hpp"
#include "runtime/model/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const auto header = tandem::rt::ParseSafetensorsHeader(bytes, "fuzz.safetensors");
    for (const auto& [name, info] : header.tensors) {
      if (header.data_offset + info.end > size || info.begin > info.end) std::abort();
    }
  } catch (const tandem::rt::ModelError&) {
  }
  return 0;
}
