// DeepSeek V4.1's FP4 tiles with AVX-512 VNNI (vpdpwssd: the multiply-add and the add in
// one instruction): the same integers as microscaled_avx512.cpp, so the same bits. Only
// reached when HasAvx512Vnni().
#if !defined(__clang__)
#pragma GCC target("avx2,avx512f,avx512bw,avx512vl,avx512vnni")
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include "runtime/kernels/microscaled_rows.hpp"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,avx512f,avx512bw,avx512vl,avx512vnni"))), apply_to = function)
#endif

// After the target: the tile kernel is compiled for it.
#include "runtime/kernels/microscaled_tile_kernel.hpp"

namespace tandem::rt::kernels {

void Fp4Tile16Vnni(const std::uint8_t* tile, std::int64_t blocks, const std::uint8_t* tile_scales, const Fp4TileInput* inputs,
                   std::int64_t batch, const std::uint8_t* stream_end, float* out) {
  Tile16Batch<true, TileF32Sum>(tile, blocks, tile_scales, inputs, batch, stream_end, out);
}

void Fp4Tile16F64Vnni(const std::uint8_t* tile, std::int64_t blocks, const std::uint8_t* tile_scales, const Fp4TileInput* inputs,
                      std::int64_t batch, const std::uint8_t* stream_end, double* out) {
  Tile16Batch<true, TileF64Sum>(tile, blocks, tile_scales, inputs, batch, stream_end, out);
}

}  // namespace tandem::rt::kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
