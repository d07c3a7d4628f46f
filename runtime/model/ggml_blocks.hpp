#pragma once

#include <cstddef>
#include <span>

// ggml's 32-value quantized blocks, as llama.cpp-family runtimes read them:
//   Q8_0: fp16 scale d, then 32 int8 q;          value = d * q
//   Q4_0: fp16 scale d, then 16 bytes of nibbles; value = d * (nibble - 8), the low
//         nibbles hold values 0..15 of the block, the high nibbles values 16..31.
// Encoded as ggml's reference quantizers do, so a file written here has the bytes
// llama.cpp's own `quantize` of the same fp32 values would write:
//   Q8_0: d = max|x| / 127, q = round(x / d) (halves away from zero)
//   Q4_0: d = m / -8 with m the value of largest magnitude (its sign kept), nibble =
//         min(15, trunc(x / d + 8.5))
namespace tandem::rt {

inline constexpr std::size_t kGgmlBlockValues = 32;
inline constexpr std::size_t kQ8_0BlockBytes = 34;
inline constexpr std::size_t kQ4_0BlockBytes = 18;

// `values.size()` must be a multiple of 32; `out` holds values.size() / 32 blocks.
void EncodeQ8_0(std::span<const float> values, std::span<std::byte> out);
void EncodeQ4_0(std::span<const float> values, std::span<std::byte> out);

}  // namespace tandem::rt
