// Fuzzes the safetensors header parser: any bytes a checkpoint file may hold.
// Only ModelError may escape; offsets it accepts must lie inside the file, and no
// byte may belong to two tensors.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <utility>
#include <vector>

#include "runtime/model/model_error.hpp"
#include "runtime/model/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const auto header = tandem::rt::ParseSafetensorsHeader(bytes, "fuzz.safetensors");
    std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
    for (const auto& [name, info] : header.tensors) {
      if (header.data_offset + info.end > size || info.begin > info.end) std::abort();
      if (info.end > info.begin) spans.emplace_back(info.begin, info.end);
    }
    std::sort(spans.begin(), spans.end());
    for (std::size_t i = 1; i < spans.size(); ++i) {
      if (spans[i].first < spans[i - 1].second) std::abort();
    }
  } catch (const tandem::rt::ModelError&) {
  }
  return 0;
}
