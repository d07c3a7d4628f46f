#pragma once

#include <cstddef>

namespace tandem::rt {
class ThreadPool;
}

namespace tandem::bench {

// Bytes per second of a large vectorised read (a sum over a buffer far larger than
// the caches, on huge pages), split over the pool's threads: the ceiling decode can
// approach. The best of `repeats` passes in each of several ways of reading (SSE and
// AVX2 loads; no software prefetch, or 8 or 32 KiB ahead as the kernels prefetch).
double MeasureReadBandwidth(tandem::rt::ThreadPool& pool, std::size_t bytes = std::size_t{1} << 30, int repeats = 5);

}  // namespace tandem::bench
