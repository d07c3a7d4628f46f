#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <string_view>

// Element types of checkpoint tensors and their conversions to fp32.
namespace tandem::rt {

// kF8E8M0: power-of-two scales (DeepSeek V4.1's weight scales; microscaling.hpp).
enum class DType { kF64, kF32, kF16, kBF16, kF8E4M3, kF8E8M0, kI64, kI32, kI16, kI8, kU8, kBool };

// Safetensors dtype names ("BF16", "F8_E4M3", ...); empty for unknown names.
std::optional<DType> DTypeFromName(std::string_view name);
std::string_view DTypeName(DType dtype);
std::size_t DTypeSize(DType dtype);

inline float Bf16ToF32(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

// Round to nearest even; NaN stays NaN.
inline std::uint16_t F32ToBf16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

float F16ToF32(std::uint16_t bits);
// Round to nearest even (subnormals included; beyond 65504 rounds to infinity); NaN stays NaN.
std::uint16_t F32ToF16(float value);
// OCP FP8 E4M3 ("e4m3fn"): no infinities, 0x7f/0xff are NaN.
float F8E4M3ToF32(std::uint8_t bits);
// Round to nearest even, saturating at ±448; NaN → 0x7f.
std::uint8_t F32ToF8E4M3(float value);

}  // namespace tandem::rt
