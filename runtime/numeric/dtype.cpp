#include "runtime/numeric/dtype.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace tandem::rt {

namespace {

struct DTypeEntry {
  DType dtype;
  std::string_view name;
  std::size_t size;
};

constexpr std::array<DTypeEntry, 12> kDTypes = {{
    {DType::kF64, "F64", 8},
    {DType::kF32, "F32", 4},
    {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2},
    {DType::kF8E4M3, "F8_E4M3", 1},
    {DType::kF8E8M0, "F8_E8M0", 1},
    {DType::kI64, "I64", 8},
    {DType::kI32, "I32", 4},
    {DType::kI16, "I16", 2},
    {DType::kI8, "I8", 1},
    {DType::kU8, "U8", 1},
    {DType::kBool, "BOOL", 1},
}};

const DTypeEntry& Entry(DType dtype) {
  for (const auto& e : kDTypes) {
    if (e.dtype == dtype) return e;
  }
  return kDTypes[0];  // unreachable: every enumerator has an entry
}

}  // namespace

std::optional<DType> DTypeFromName(std::string_view name) {
  for (const auto& e : kDTypes) {
    if (e.name == name) return e.dtype;
  }
  return std::nullopt;
}

std::string_view DTypeName(DType dtype) { return Entry(dtype).name; }
std::size_t DTypeSize(DType dtype) { return Entry(dtype).size; }

float F16ToF32(std::uint16_t bits) {
  const float sign = (bits & 0x8000u) ? -1.0f : 1.0f;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
  if (exponent == 31) return mantissa ? std::numeric_limits<float>::quiet_NaN() : sign * std::numeric_limits<float>::infinity();
  return sign * std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
}

std::uint16_t F32ToF16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;                    // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;                   // from 65520 (halfway past 65504) up: infinity
  if (magnitude < 0x38800000u) {                                         // below 2^-14: a subnormal half, units of 2^-24
    const float scaled = std::bit_cast<float>(magnitude) * 16777216.0f;  // exact: a power of two
    return sign | static_cast<std::uint16_t>(std::nearbyint(scaled));    // ties to even (the default mode); 1024 is the smallest normal
  }
  std::uint32_t half = ((((magnitude >> 23) - 127 + 15) << 10) | ((magnitude >> 13) & 0x3ffu));
  const std::uint32_t rest = magnitude & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // a carry into the exponent is right
  return sign | static_cast<std::uint16_t>(half);
}

float F8E4M3ToF32(std::uint8_t bits) {
  const float sign = (bits & 0x80u) ? -1.0f : 1.0f;
  const int exponent = (bits >> 3) & 0xf;
  const int mantissa = bits & 0x7;
  if (exponent == 0xf && mantissa == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m/8 · 2^-6
  return sign * std::ldexp(static_cast<float>(mantissa | 0x8), exponent - 10);    // (1 + m/8) · 2^(e−7)
}

std::uint8_t F32ToF8E4M3(float value) {
  // Nearest code, ties to even, saturating at 448 (what a table search over the 127 finite
  // non-negative codes gives: the same for every one of the 2^32 floats).
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint8_t>((bits >> 24) & 0x80u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return 0x7f;                           // NaN
  if (magnitude >= 0x43e00000u) return sign | 0x7e;                   // 448 and up
  if (magnitude < 0x3c800000u) {                                      // below 2^-6: a subnormal, units of 2^-9
    const float scaled = std::bit_cast<float>(magnitude) * 512.0f;    // exact: a power of two
    return sign | static_cast<std::uint8_t>(std::nearbyint(scaled));  // ties to even (the default mode); 8 is the smallest normal
  }
  std::uint32_t code = (((magnitude >> 23) - 127 + 7) << 3) | ((magnitude >> 20) & 0x7u);
  const std::uint32_t rest = magnitude & 0xfffffu;
  if (rest > 0x80000u || (rest == 0x80000u && (code & 1u))) ++code;  // a carry into the exponent is right
  return sign | static_cast<std::uint8_t>(std::min<std::uint32_t>(code, 0x7e));
}

}  // namespace tandem::rt
