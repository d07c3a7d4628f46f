#pragma once

#include <cstddef>

namespace tandem::stats {

// How many sessions per arm a two-arm campaign needs to detect a relative change
// `effect` (0.03 = 3 % faster; −0.03 = 3 % slower) with a two-sided test at
// `level` and the given `power`, when session log-scores vary with standard
// deviation `sd_log` (the same in both arms).
//
// Normal approximation: n = ⌈2 · (z_{(1+level)/2} + z_power)² · sd_log² / ln(1+effect)²⌉,
// at least 2. It slightly undercounts for small n, where the t reference is wider;
// docs/statistics.md explains when that matters.
std::size_t SessionsNeeded(double sd_log, double effect, double level = 0.95, double power = 0.8);

}  // namespace tandem::stats
