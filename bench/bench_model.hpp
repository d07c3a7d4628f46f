#pragma once

#include <filesystem>

namespace tandem::bench {

// The checkpoint benchmarks run on: $TANDEM_BENCH_MODEL, or the "small" preset
// (seed 1) written fresh into a temporary directory that is removed at exit.
const std::filesystem::path& BenchModel();

}  // namespace tandem::bench
