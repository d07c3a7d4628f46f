#pragma once

#include <cstdint>
#include <memory>
#include <span>

// DeepSeek V4.1's weights as published, read as stored (no widened copy): FP8 E4M3 with a
// power-of-two (E8M0) scale per 32×32 block, and FP4 E2M1 packed two a byte (the even
// column low) with an E8M0 scale per row and 32 columns. The product follows the
// reference's fp8_gemm / fp4_gemm: each input row quantized to E4M3 per 32 columns
// (act_quant), every 32-wide block's partial sum taken exactly (double, then one fp32
// rounding — the products of two E4M3 or E4M3 × E2M1 values and their sum of 32 fit in
// a double's mantissa, so no order can change it), multiplied by the input's then the
// weight's scale, accumulated in fp32 block by block, and rounded once to bf16.
namespace tandem::rt {

class ThreadPool;

struct MicroscaledMatrix {
  enum class Format { kFp8Block32, kFp4Row32 };
  static constexpr std::int64_t kBlock = 32;

  Format format = Format::kFp8Block32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;  // a multiple of 32
  // FP8: rows·cols E4M3 codes; FP4: rows·cols/2 bytes.
  std::shared_ptr<const std::uint8_t[]> values;
  // FP8: ⌈rows/32⌉ × cols/32 E8M0 scales; FP4: rows × cols/32.
  std::shared_ptr<const std::uint8_t[]> scales;
  // FP4: the same scales of each whole tile of 16 rows, block by block ([tile][block][16]):
  // the SIMD path reads a tile's 16 scales of a block in one load.
  std::shared_ptr<const std::uint8_t[]> tile_scales;

  bool empty() const { return values == nullptr; }
  std::size_t bytes() const;
  // One value as fp32 (tests and tools).
  float At(std::int64_t row, std::int64_t col) const;
  // Copies of `values` and `scales` (sizes checked: std::invalid_argument).
  // Copies of rows [begin, end) (FP8: whole 32-row scale blocks, or up to the last row) or
  // of columns [begin, end) (multiples of 32): what a rank holding a slice of an expert
  // keeps. std::invalid_argument for a range that cuts a scale block.
  MicroscaledMatrix Rows(std::int64_t begin, std::int64_t end) const;
  MicroscaledMatrix Columns(std::int64_t begin, std::int64_t end) const;
  static MicroscaledMatrix Copy(Format format, std::int64_t rows, std::int64_t cols, std::span<const std::uint8_t> values,
                                std::span<const std::uint8_t> scales);
};

// y[b, o] = bf16(Σ_blocks partial · a_scale · w_scale) for b < batch; `x` is [batch ×
// cols] of bf16 values held in fp32, `y` [batch × rows]. A row's result depends on
// nothing but that row: not the batch, the threads or the split of the outputs.
void MatMul(const MicroscaledMatrix& w, const float* x, std::int64_t batch, float* y, ThreadPool* pool);

// Whether FP4 tiles may take the byte path (AVX-512 VNNI + GFNI, where the CPU has both)
// rather than the int16 one (AVX-512 BW); both give the same bits. Returns the previous
// setting. For tests and benchmarks comparing the paths; not while products run.
bool AllowFp4BytePath(bool allow);

// The same block terms (each block's exact sum rounded once to fp32, times both scales)
// added in double and not rounded after: y[b, o] = Σ_blocks term. A term is an integer
// below 2^27 times 2^-10 · a_scale · w_scale, so the double sum is exact — the same in any
// order, and the sums over column ranges cut at multiples of 32 (ranks holding slices of an
// expert, each with its part of the input) add up to the whole row's — as long as a row's
// products of scales span less than 2^(26 − ⌈log2 terms⌉) (2^20 for 64 terms).
void MatMulF64(const MicroscaledMatrix& w, const float* x, std::int64_t batch, double* y, ThreadPool* pool);

}  // namespace tandem::rt
