// bf16 rows by AMX tiles (TDPBF16PS), for every batch size: one instruction multiplies
// a 16 × 32 block of weights by a 32 × 16 block of inputs into 16 × 16 fp32 sums, 16 times
// the pairs of one AVX-512 BF16 dot product. The weights are the tiles' left operand as
// they lie in memory (16 rows, 64 bytes each, a row's stride apart), so nothing is
// repacked; the inputs, rounded to bf16 as the AVX-512 BF16 path rounds them, are the
// right operand, which AMX wants as pairs of columns: PrepareBf16InputAmx lays them out
// so. A sum (row o, input b) is always the same sequence of tile products over the
// columns in blocks of 32, on its own element of a tile, whatever rows and inputs share
// the tile: batch and thread count never change a row's bits. The results are not the
// other paths' bits: inputs rounded to bf16 (as kAvx512Bf16), and the hardware's own
// order within a block of 32. Only for rows whose length is a multiple of 32 (matmul.cpp
// sends others to the AVX-512 BF16 kernel). Compiled for that target only through the
// pragma; nothing here may be reached unless DetectedIsa() says the CPU has AMX and the
// kernel granted this process its tile state. No standard-library templates in this
// file (see matmul_avx2.cpp).
#if !defined(__clang__)
#pragma GCC target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c")
#endif
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <cstdint>
#include <cstring>
#include <new>

#include <immintrin.h>

#include "runtime/kernels/dense_rows.hpp"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c"))), \
                             apply_to = function)
#endif

namespace tandem::rt::kernels {

namespace {

constexpr std::int64_t kTile = 16;         // rows of a tile; inputs of a group
constexpr std::int64_t kBlock = 32;        // bf16 columns of a weight tile row (64 bytes)
constexpr std::int64_t kRowsAPass = 32;    // two weight tiles
constexpr std::int64_t kGroupValues = 16;  // bf16 values of one input group per column pair: 16 inputs × 2

// Tiles 0-3: sums (rows 0-15 / 16-31 × input group 0 / 1); 4, 5: weights; 6, 7: inputs.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

// LDTILECFG once per thread: nothing else in the process configures tiles.
void ConfigureTiles() {
  static thread_local bool configured = false;
  if (configured) return;
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = static_cast<std::uint8_t>(kTile);
    config.colsb[t] = 64;
  }
  _tile_loadconfig(&config);
  configured = true;
}

// A thread's copy of a range's last rows, zero past them, so that a tile never reads
// beyond the matrix (grown as needed; freed with the thread).
struct TailRows {
  std::uint16_t* data = nullptr;
  std::int64_t values = 0;
  TailRows() = default;
  TailRows(const TailRows&) = delete;
  TailRows& operator=(const TailRows&) = delete;
  ~TailRows() { ::operator delete(data); }
  std::uint16_t* Fill(const std::uint16_t* w, std::int64_t cols, std::int64_t rows) {
    const std::int64_t want = kRowsAPass * cols;
    if (want > values) {
      ::operator delete(data);
      data = nullptr;  // should the allocation throw
      data = static_cast<std::uint16_t*>(::operator new(static_cast<std::size_t>(want) * sizeof(std::uint16_t)));
      values = want;
    }
    std::memcpy(data, w, static_cast<std::size_t>(rows * cols) * sizeof(std::uint16_t));
    std::memset(data + rows * cols, 0, static_cast<std::size_t>((kRowsAPass - rows) * cols) * sizeof(std::uint16_t));
    return data;
  }
};

// A tile's sums (rows r0 on, inputs b0 on) into y: those of the rows in [first, last)
// and of the inputs that exist.
inline void StoreSums(const float* sums, float* y, std::int64_t y_stride, std::int64_t r0, std::int64_t first, std::int64_t last,
                      std::int64_t b0, std::int64_t batch) {
  const std::int64_t lo = first > r0 ? first - r0 : 0, hi = last - r0 < kTile ? last - r0 : kTile;
  for (std::int64_t b = 0; b < kTile && b0 + b < batch; ++b) {
    float* out = y + (b0 + b) * y_stride + r0;
    for (std::int64_t r = lo; r < hi; ++r) out[r] = sums[r * kTile + b];
  }
}

// 32 rows (the weights at `a`, `a_stride` bytes a row; those in [first, last) stored)
// against the input group at `xg` and, with kTwoGroups, the next one; input b0 is the
// first's first.
// `prefetch`, if set, is the next 32 rows (as far apart as these), fetched a block at a
// time alongside.
template <bool kTwoGroups>
inline void Pass(const std::uint16_t* a, std::int64_t a_stride, std::int64_t cols, const std::uint16_t* xg, std::int64_t group_stride,
                 float* y, std::int64_t y_stride, std::int64_t first, std::int64_t last, std::int64_t b0, std::int64_t batch,
                 const char* prefetch) {
  _tile_zero(0);
  _tile_zero(2);
  if constexpr (kTwoGroups) {
    _tile_zero(1);
    _tile_zero(3);
  }
  const std::uint16_t* a1 = a + kTile * (a_stride / 2);
  for (std::int64_t k = 0; k < cols; k += kBlock) {
    if (prefetch != nullptr) {
      // The next pass's rows at this block: one line a row, into L1, while these
      // compute (from memory, 64 inputs: ~300 GFLOP/s against ~200 with the hardware
      // prefetcher alone or prefetches into L2; Emerald Rapids, one thread).
      for (std::int64_t r = 0; r < kRowsAPass; ++r) _mm_prefetch(prefetch + r * a_stride + k * 2, _MM_HINT_T0);
    }
    _tile_loadd(4, a + k, a_stride);
    _tile_loadd(5, a1 + k, a_stride);
    const std::uint16_t* x0 = xg + k * kGroupValues;
    _tile_loadd(6, x0, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(2, 5, 6);
    if constexpr (kTwoGroups) {
      _tile_loadd(7, x0 + group_stride, 64);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  alignas(64) float sums[kTile * kTile];
  _tile_stored(0, sums, 64);
  StoreSums(sums, y, y_stride, 0, first, last, b0, batch);
  _tile_stored(2, sums, 64);
  StoreSums(sums, y, y_stride, kTile, first, last, b0, batch);
  if constexpr (kTwoGroups) {
    _tile_stored(1, sums, 64);
    StoreSums(sums, y, y_stride, 0, first, last, b0 + kTile, batch);
    _tile_stored(3, sums, 64);
    StoreSums(sums, y, y_stride, kTile, first, last, b0 + kTile, batch);
  }
}

}  // namespace

std::int64_t Bf16AmxInputValues(std::int64_t batch, std::int64_t cols) { return (batch + kTile - 1) / kTile * kTile * cols; }

void PrepareBf16InputAmx(const float* x, std::int64_t batch, std::int64_t cols, std::uint16_t* out) {
  // Group g, column pair p, input b: out[(g · cols/2 + p) · 32 + 2b + {0, 1}].
  std::memset(out, 0, static_cast<std::size_t>(Bf16AmxInputValues(batch, cols)) * sizeof(std::uint16_t));
  for (std::int64_t b = 0; b < batch; ++b) {
    const float* in = x + b * cols;
    std::uint32_t* group = reinterpret_cast<std::uint32_t*>(out + (b / kTile) * cols * kTile) + b % kTile;
    for (std::int64_t i = 0; i < cols; i += 32) {
      // Round to nearest even, as PrepareBf16InputDpbf16.
      const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(in + i + 16), _mm512_loadu_ps(in + i));
      alignas(64) std::uint32_t pairs[16];
      _mm512_store_si512(pairs, (__m512i)v);
      for (int p = 0; p < 16; ++p) group[(i / 2 + p) * kTile] = pairs[p];
    }
  }
}

void RowsBf16Amx(const std::uint16_t* w, std::int64_t w_rows, std::int64_t cols, const std::uint16_t* x, std::int64_t batch, float* y,
                 std::int64_t y_stride, std::int64_t begin, std::int64_t end) {
  if (batch <= 0 || begin >= end) return;
  ConfigureTiles();
  static thread_local TailRows tail;
  const std::int64_t groups = (batch + kTile - 1) / kTile, group_stride = cols * kTile, row_bytes = cols * 2;
  for (std::int64_t o = begin; o < end; o += kRowsAPass) {
    const std::int64_t rows = end - o < kRowsAPass ? end - o : kRowsAPass;
    // A range's last rows short of a pass: the pass over the 32 rows of the matrix that
    // end with them (a thread's range rarely ends on a multiple of 32), storing only
    // theirs; a copy only where the whole matrix is shorter than a pass.
    std::int64_t start = o;
    const std::uint16_t* a = w + o * cols;
    if (rows < kRowsAPass && w_rows >= kRowsAPass) {
      start = o < w_rows - kRowsAPass ? o : w_rows - kRowsAPass;
      a = w + start * cols;
    } else if (rows < kRowsAPass) {
      a = tail.Fill(a, cols, rows);
    }
    // The next pass's rows, fetched while this one computes (only a whole one), where
    // there is computing to hide them behind: with one group of inputs a pass is mostly
    // loads, and 32 more lines a block only stall it (decode, 2 threads: 238 against
    // ~270 tok/s without; Emerald Rapids).
    const bool next_whole = groups > 1 && end - (o + kRowsAPass) >= kRowsAPass;
    const char* next = next_whole ? reinterpret_cast<const char*>(w + (o + kRowsAPass) * cols) : nullptr;
    float* window = y + start;
    const std::int64_t first = o - start, last = first + rows;
    std::int64_t g = 0;
    for (; g + 2 <= groups; g += 2) {
      Pass<true>(a, row_bytes, cols, x + g * group_stride, group_stride, window, y_stride, first, last, g * kTile, batch,
                 g == 0 ? next : nullptr);
    }
    if (g < groups) {
      Pass<false>(a, row_bytes, cols, x + g * group_stride, group_stride, window, y_stride, first, last, g * kTile, batch,
                  g == 0 ? next : nullptr);
    }
  }
}

}  // namespace tandem::rt::kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
