#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "stats/decode_metrics.hpp"

// A battery's samples as a JSON array, one object per request:
//   {"case": "code", "weight": 2, "completion_tokens": 512,
//    "t_first_output": 0.41, "t_finish": 5.32, "repeat": 0}
// `repeat` is optional (default 0); times are seconds. Unknown keys are errors,
// so a misspelt field is never silently ignored.
namespace tandem::harness {

struct BatterySample {
  std::int64_t repeat = 0;
  stats::WeightedRequest request;
};

// Throws InputError naming `source`, the sample index and the key at fault.
// Also checks that every sample of a case carries the same weight.
std::vector<BatterySample> ParseBatterySamples(std::string_view json_text, std::string_view source);

std::vector<BatterySample> ReadBatterySamples(const std::filesystem::path& file);

}  // namespace tandem::harness
