#pragma once

#include <cstddef>

namespace tandem::rt {
class ThreadPool;
}

namespace tandem::bench {

// Bytes per second of a large vectorised read (a sum over a buffer far larger than
// the caches), split over the pool's threads: the ceiling decode can approach.
double MeasureReadBandwidth(tandem::rt::ThreadPool& pool, std::size_t bytes = std::size_t{1} << 30, int repeats = 5);

}  // namespace tandem::bench
