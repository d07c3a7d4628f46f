// The quantized kernels with AVX-512 VNNI's byte dot product (vpdpbusd): the same
// integers as the AVX2 kernels' instructions, a tile's 16 rows in one 512-bit
// register. Only reached when HasAvx512Vnni(). No standard-library templates here (see matmul_avx2.cpp).
#if !defined(__clang__)
#pragma GCC target("avx2,fma,f16c,avx512f,avx512vl,avx512vnni")
#endif
// GCC 12's own AVX-512 headers trip this warning (their _mm512_undefined_* helpers).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include "runtime/kernels/quantized_rows.hpp"

// Clang applies `#pragma GCC target` to plain functions only, not to template
// instantiations: give every function from here on the target instead.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512vnni"))), apply_to = function)
#endif

#include "runtime/kernels/quantized_simd.hpp"

namespace tandem::rt::kernels {

void RowsInt8Vnni(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                  std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end) {
  QuantizedTileRows<true, false>(values, scales, cols, group, inputs, batch, y, y_stride, begin, end);
}

void RowsInt4Vnni(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                  std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end) {
  QuantizedTileRows<true, true>(values, scales, cols, group, inputs, batch, y, y_stride, begin, end);
}

}  // namespace tandem::rt::kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
