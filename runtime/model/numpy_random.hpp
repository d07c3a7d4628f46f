#pragma once

#include <cstdint>
#include <vector>

namespace tandem::rt {

// numpy.random.default_rng(seed).integers(0, high, size=count, dtype=numpy.int64): numpy's
// SeedSequence, PCG64 (XSL-RR 128/64) and its bounded draw (Lemire's method with rejection),
// reproduced bit for bit — DeepSeek V4.1's reference draws its Engram hash multipliers so, and
// a checkpoint's constants must be the ones it would draw. `high` > 2^32 (the 64-bit path
// numpy takes for such bounds); throws std::invalid_argument otherwise.
std::vector<std::int64_t> NumpyIntegers(std::uint64_t seed, std::int64_t high, int count);

}  // namespace tandem::rt
