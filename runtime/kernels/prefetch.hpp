#pragma once

// Software prefetch for the SIMD row kernels (private to runtime/kernels; included
// by the per-target files, everything here has internal linkage).
#include <cstdint>

#include <immintrin.h>

namespace tandem::rt::kernels {
namespace {

// How far ahead of a tile the kernels prefetch, into L2. A tile interleaves several
// rows, which the hardware prefetcher follows poorly; software prefetches of the
// contiguous bytes 8 KiB on, issued at the pace the tile consumes its own, keep
// enough reads in flight. The distance is short because a decode step is mostly
// small matrices (an expert's is 128 KiB in the small preset): the first 8 KiB of a
// range are warmed up front (PrefetchHead) and a tile never prefetches past the rows
// its thread reads (the end of its caller's rows or, where MatMulMany names the
// next product, that one's head), so nothing fetched goes unread. Measured on a 2-vCPU Zen 5
// (EPYC family 26) VM, one thread: 32 KiB unclamped → 8 KiB clamped took a whole-model bf16 decode
// from 266 to 317 tok/s and a 128 MiB product from 25 to 28.6 GB/s (plain
// sequential sum: 31–32); 4 KiB was too short (213 tok/s), 16 KiB 308.
constexpr std::int64_t kAheadBytes = 8192;

// Prefetches the cache lines of [from, from + bytes) that start in it, into L2
// (_MM_HINT_T0: into L1, for a kernel whose own compute is too little to hide an L2
// hit; see TileZmm, quantized_simd.hpp).
template <int kHint = _MM_HINT_T1>
inline void PrefetchRange(const char* from, std::int64_t bytes) {
  for (std::int64_t b = 0; b < bytes; b += 64) _mm_prefetch(from + b, static_cast<decltype(_MM_HINT_T1)>(kHint));
}

// The head of the range a tile's prefetches run on into past the end of their own
// rows: the rows the thread reads next (RowStream in dense_rows.hpp), at most
// kAheadBytes of them.
struct NextRange {
  const char* begin = nullptr;
  std::int64_t bytes = 0;
};

inline NextRange HeadOf(const char* begin, std::int64_t bytes) { return {begin, bytes < kAheadBytes ? bytes : kAheadBytes}; }

// A tile's prefetch of `bytes` at `at` into its look-ahead: from `ahead` (kAheadBytes
// past where it reads) while that is within its rows (`room` bytes from `ahead`), then
// as far on into `next`, so the stream runs on without a gap into the next range.
inline void PrefetchAhead(const char* ahead, std::int64_t room, const NextRange& next, std::int64_t at, std::int64_t bytes) {
  if (at < room) {
    PrefetchRange(ahead + at, bytes);
  } else if (next.begin != nullptr && at - room < next.bytes) {
    PrefetchRange(next.begin + (at - room), bytes);
  }
}

// Warms the first kAheadBytes of a row range, which the tiles' own prefetches
// (kAheadBytes ahead of where they read) never reach.
inline void PrefetchHead(const void* begin, const void* stop) {
  const char* b = static_cast<const char*>(begin);
  const std::int64_t bytes = static_cast<const char*>(stop) - b;
  PrefetchRange(b, bytes < kAheadBytes ? bytes : kAheadBytes);
}

}  // namespace
}  // namespace tandem::rt::kernels
