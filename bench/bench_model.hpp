#pragma once

#include <filesystem>

#include "runtime/kernels/quantized_matrix.hpp"

namespace tandem::bench {

// The checkpoint benchmarks run on: $TANDEM_BENCH_MODEL, or the "small" preset
// (seed 1) written fresh into a temporary directory that is removed at exit.
const std::filesystem::path& BenchModel();

// BenchModel() with its routed experts (and with `all_experts` its shared experts)
// group-quantized (group 32) by `tandem-rt quantize`'s library function, written
// next to it once per variant.
const std::filesystem::path& BenchModelQuantized(rt::QuantFormat format, bool all_experts = false);

}  // namespace tandem::bench
