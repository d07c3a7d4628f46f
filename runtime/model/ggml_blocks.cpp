#include "runtime/model/ggml_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "runtime/numeric/dtype.hpp"

namespace tandem::rt {

namespace {

void CheckSizes(std::span<const float> values, std::span<std::byte> out, std::size_t block_bytes) {
  if (values.size() % kGgmlBlockValues != 0 || out.size() != values.size() / kGgmlBlockValues * block_bytes) {
    throw std::invalid_argument("ggml blocks: values must be whole blocks of 32 and the output sized for them");
  }
}

void PutScale(std::byte* block, float d) {
  const std::uint16_t half = F32ToF16(d);
  block[0] = static_cast<std::byte>(half & 0xff);
  block[1] = static_cast<std::byte>(half >> 8);
}

}  // namespace

void EncodeQ8_0(std::span<const float> values, std::span<std::byte> out) {
  CheckSizes(values, out, kQ8_0BlockBytes);
  for (std::size_t b = 0; b < values.size() / kGgmlBlockValues; ++b) {
    const float* x = values.data() + b * kGgmlBlockValues;
    std::byte* block = out.data() + b * kQ8_0BlockBytes;
    float amax = 0.0f;
    for (std::size_t j = 0; j < kGgmlBlockValues; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    PutScale(block, d);
    for (std::size_t j = 0; j < kGgmlBlockValues; ++j) {
      block[2 + j] = static_cast<std::byte>(static_cast<std::int8_t>(std::round(x[j] * id)));
    }
  }
}

void EncodeQ4_0(std::span<const float> values, std::span<std::byte> out) {
  CheckSizes(values, out, kQ4_0BlockBytes);
  constexpr std::size_t kHalf = kGgmlBlockValues / 2;
  for (std::size_t b = 0; b < values.size() / kGgmlBlockValues; ++b) {
    const float* x = values.data() + b * kGgmlBlockValues;
    std::byte* block = out.data() + b * kQ4_0BlockBytes;
    float amax = 0.0f, extreme = 0.0f;
    for (std::size_t j = 0; j < kGgmlBlockValues; ++j) {
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), extreme = x[j];
    }
    const float d = extreme / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    PutScale(block, d);
    auto nibble = [&](float v) { return static_cast<unsigned>(std::min(15, static_cast<int>(static_cast<std::int8_t>(v * id + 8.5f)))); };
    for (std::size_t j = 0; j < kHalf; ++j) block[2 + j] = static_cast<std::byte>(nibble(x[j]) | (nibble(x[j + kHalf]) << 4));
  }
}

}  // namespace tandem::rt
