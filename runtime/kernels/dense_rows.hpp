#pragma once

// The per-instruction-set row kernels behind MatMul (private to runtime/kernels).
//
// Every kernel computes, for output rows o in [begin, end) and batch rows b,
//   y[b·y_stride + o] = Σ_i w[o, i] · x[b, i]
// in the one fixed order all paths share: sixteen lanes, lane l summing the
// products of columns i ≡ l (mod 16) in increasing i with fused multiply-adds,
// then the lanes combined pairwise (l + 8, then + 4, + 2, + 1). Hence a row's
// result depends neither on the batch around it, nor on the thread, nor on which
// of these paths ran it (the AVX-512 BF16 path aside, which rounds x to bf16: below).
//
// `x` is [batch × cols] fp32 in the layout the kernel's Prepare function wrote.

#include <cstdint>

namespace tandem::rt::kernels {

// Fixed-lane reduction of sixteen partial sums (in place; returns the total).
float ReduceLanes(float* lanes);

// Where a thread's reading goes on after a range of rows: a step reads many small
// matrices (128 KiB per expert projection in the small preset), and a prefetch
// stream that stopped at each one's end and restarted at the next one's head lost
// a memory latency per matrix. `next` is the first byte of the rows the thread
// reads next (the next product in its share of a MatMulMany), `next_bytes` their
// length; `head_warm` says an earlier range already prefetched these rows' head.
struct RowStream {
  const char* next = nullptr;
  std::int64_t next_bytes = 0;
  bool head_warm = false;
};

// Portable (matmul_portable.cpp): the plain loops for the baseline target. The
// compiler decides where they fuse multiply-adds, so their results are only close
// to the SIMD paths'. The F64 variants accumulate in double (exact products).
void RowsBf16Portable(const std::uint16_t* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                      std::int64_t begin, std::int64_t end);
void RowsF32Portable(const float* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                     std::int64_t begin, std::int64_t end);
// e4m3 bytes; x must already carry the block scales (see MatMul).
void RowsFp8Portable(const std::uint8_t* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                     std::int64_t begin, std::int64_t end);
void RowsBf16F64Portable(const std::uint16_t* w, std::int64_t cols, const float* x, std::int64_t batch, double* y, std::int64_t y_stride,
                         std::int64_t begin, std::int64_t end);
void RowsF32F64Portable(const float* w, std::int64_t cols, const float* x, std::int64_t batch, double* y, std::int64_t y_stride,
                        std::int64_t begin, std::int64_t end);
void RowsFp8F64Portable(const std::uint8_t* w, std::int64_t cols, const float* x, std::int64_t batch, double* y, std::int64_t y_stride,
                        std::int64_t begin, std::int64_t end);
float DotPortable(const float* a, const float* b, std::int64_t n);
// MatMulTransposed's columns [begin, end), as TransposedF32Avx2 (attention_rows.hpp).
void TransposedF32Portable(const float* w, std::int64_t rows, std::int64_t cols, const float* x, std::int64_t batch, float* y,
                           std::int64_t begin, std::int64_t end);
void TransposedBf16Portable(const std::uint16_t* w, std::int64_t rows, std::int64_t cols, const float* x, std::int64_t batch, float* y,
                            std::int64_t begin, std::int64_t end);

// AVX + FMA + F16C, no AVX2 (matmul_avx_fma.cpp). bf16 by hand (widening by
// interleaving zero halfwords, two 8-lane accumulators per row: exact to the bit
// against the AVX2 path); the others are the plain loops compiled for this target
// (fp8's reads e4m3 through a table: only close). The F64 variants also serve AVX2
// and AVX-512 machines: their products are exact, so every path gives the same bits.
void RowsBf16AvxFma(const std::uint16_t* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                    std::int64_t begin, std::int64_t end);
void RowsF32AvxFma(const float* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                   std::int64_t begin, std::int64_t end);
void RowsFp8AvxFma(const std::uint8_t* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                   std::int64_t begin, std::int64_t end);
void RowsBf16F64AvxFma(const std::uint16_t* w, std::int64_t cols, const float* x, std::int64_t batch, double* y, std::int64_t y_stride,
                       std::int64_t begin, std::int64_t end);
void RowsF32F64AvxFma(const float* w, std::int64_t cols, const float* x, std::int64_t batch, double* y, std::int64_t y_stride,
                      std::int64_t begin, std::int64_t end);
void RowsFp8F64AvxFma(const std::uint8_t* w, std::int64_t cols, const float* x, std::int64_t batch, double* y, std::int64_t y_stride,
                      std::int64_t begin, std::int64_t end);
// Dot for every CPU with AVX + FMA (the attention kernels' bits).
float DotAvxFma(const float* a, const float* b, std::int64_t n);

// AVX2 + FMA + F16C (matmul_avx2.cpp).
// bf16 wants x with each block of 16 columns reordered as its 8 even then its 8
// odd columns (weights are then widened without shuffles); the columns past the
// last full block stay in place.
void PrepareBf16InputAvx2(const float* x, std::int64_t batch, std::int64_t cols, float* out);
// Returns whether it prefetched the head of `stream.next` (then the next range
// can skip its own; not when these rows are shorter than the prefetch distance).
bool RowsBf16Avx2(const std::uint16_t* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                  std::int64_t begin, std::int64_t end, const RowStream& stream);
void RowsF32Avx2(const float* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin,
                 std::int64_t end);
// e4m3 bytes; x must already carry the block scales times 256 (see MatMul). The
// NaN codes 0x7F/0xFF read as ±480 here (the portable loops give NaN); weights
// never hold them.
void RowsFp8Avx2(const std::uint8_t* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                 std::int64_t begin, std::int64_t end);

// AVX-512 F/BW/VL (matmul_avx512.cpp): x in natural order. bf16 for two inputs or
// more (RowsBf16ManyAvx512, 4 × 4 tiles, the last 1–3 inputs together), and for one on
// Intel CPUs (four adjacent rows a tile; on AMD's the AVX2 kernel reads one input
// faster: see matmul.cpp). Same bits as the AVX2 path.
// With five inputs or more it prefetches the next block (or `stream.next`) while its
// later passes compute, with one its last tiles prefetch `stream.next`'s head; returns
// whether it prefetched the head of `stream.next`.
bool RowsBf16ManyAvx512(const std::uint16_t* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                        std::int64_t begin, std::int64_t end, const RowStream& stream);
void RowsF32Avx512(const float* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                   std::int64_t begin, std::int64_t end);
void RowsFp8Avx512(const std::uint8_t* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                   std::int64_t begin, std::int64_t end);

// AVX-512 BF16 (matmul_avx512_bf16.cpp; only with TANDEM_ISA=avx512-bf16): bf16 weights by dot products of bf16 pairs
// (vdpbf16ps), for every batch size; x rounded to bf16 by PrepareBf16InputDpbf16, each
// input Bf16DotStride(cols) values apart and zero-padded. Its own order (lane l sums
// columns 2l and 2l + 1 of each block of 32; the lanes combined as ReduceLanes), so
// its results are not the other paths' bits: they differ by at most the rounding of
// x, 2^-9 of Σ|w·x|, plus fp32 summation error. Batch and threads still change nothing.
std::int64_t Bf16DotStride(std::int64_t cols);
void PrepareBf16InputDpbf16(const float* x, std::int64_t batch, std::int64_t cols, std::uint16_t* out);
bool RowsBf16Dpbf16(const std::uint16_t* w, std::int64_t cols, const std::uint16_t* x, std::int64_t batch, float* y, std::int64_t y_stride,
                    std::int64_t begin, std::int64_t end, const RowStream& stream);

// AMX (matmul_amx.cpp; only with TANDEM_ISA=amx): bf16 weights whose rows are a multiple
// of 32 values, in tiles of 32 rows × 16 or 32 inputs (TDPBF16PS); x rounded to bf16 as
// PrepareBf16InputDpbf16 rounds it and laid out by PrepareBf16InputAmx in groups of 16
// inputs, column pairs interleaved (Bf16AmxInputValues(batch, cols) values, zero for the
// inputs past `batch`). Its own order within blocks of 32 columns, so its own bits, as
// close to the exact paths' as kAvx512Bf16's; batch and threads change nothing.
std::int64_t Bf16AmxInputValues(std::int64_t batch, std::int64_t cols);
void PrepareBf16InputAmx(const float* x, std::int64_t batch, std::int64_t cols, std::uint16_t* out);
// `w_rows`: the matrix's rows (a pass may read rows of it outside [begin, end); it
// stores only those).
void RowsBf16Amx(const std::uint16_t* w, std::int64_t w_rows, std::int64_t cols, const std::uint16_t* x, std::int64_t batch, float* y,
                 std::int64_t y_stride, std::int64_t begin, std::int64_t end);

}  // namespace tandem::rt::kernels
