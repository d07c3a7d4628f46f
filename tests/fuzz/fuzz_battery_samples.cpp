// Fuzzes the battery samples parser (`tandem stats weighted --samples`) and the
// weighted-decode arithmetic behind it. Only InputError and StatsError may escape
// the parser and the statistics; anything else is a bug.
#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "common/input_error.hpp"
#include "harness/traffic/battery_samples.hpp"
#include "stats/stats_error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto samples = tandem::harness::ParseBatterySamples(text, "fuzz.json");
    std::map<std::int64_t, std::vector<tandem::stats::WeightedRequest>> by_repeat;
    for (const auto& s : samples) by_repeat[s.repeat].push_back(s.request);
    for (const auto& [repeat, requests] : by_repeat) {
      try {
        (void)tandem::stats::WeightedDecode(requests);
      } catch (const tandem::stats::StatsError&) {
      }
    }
  } catch (const tandem::InputError&) {
  }
  return 0;
}
