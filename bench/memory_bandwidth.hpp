#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::rt {
class ThreadPool;
}

namespace tandem::bench {

// Bytes per second of a large vectorised read (a sum over a buffer far larger than
// the caches, on huge pages), split over the pool's threads: the ceiling decode can
// approach. The best of `repeats` passes in each of several ways of reading (SSE and
// AVX2 loads; no software prefetch, or 8 or 32 KiB ahead as the kernels prefetch).
double MeasureReadBandwidth(tandem::rt::ThreadPool& pool, std::size_t bytes = std::size_t{1} << 30, int repeats = 5);

// Reads [p, p + n) (n a multiple of 16) by the sum MeasureReadBandwidth uses, the lines
// 8 KiB on prefetched into L2 as the kernels do: the plain read a product of the same
// bytes is measured against. Returns the sum so that the reads stay.
float ReadFloats(const float* p, std::int64_t n);

}  // namespace tandem::bench
