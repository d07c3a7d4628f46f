#include "store/workload_description.hpp"

#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tandem::store {

std::string DescribeWorkload(const std::string& name, WorkloadKind kind, const WorkloadSettings& s) {
  std::vector<std::string> parts;
  const std::string repeats = fmt::format("{} repeat{}", s.repeats, s.repeats == 1 ? "" : "s");
  if (kind == WorkloadKind::kBattery) {
    parts.push_back(s.cases.empty() ? "every weighted case" : fmt::format("cases {}", fmt::join(s.cases, ", ")));
    if (s.counting && s.cases.empty()) parts.push_back("plus the counting diagnostic");
    parts.push_back(repeats);
  } else if (kind == WorkloadKind::kConcurrency) {
    parts.push_back(fmt::format("cases {}", fmt::join(s.cases, ", ")));
    parts.push_back(fmt::format("C identical requests at once for C in {}", fmt::join(s.levels, ", ")));
    parts.push_back(repeats);
  } else if (kind == WorkloadKind::kMixed) {
    parts.push_back(fmt::format("C requests at once rotating code, fable, topic for C in {}", fmt::join(s.levels, ", ")));
    parts.push_back(repeats);
  } else if (kind == WorkloadKind::kRetainedContext) {
    parts.push_back(
        fmt::format("a parent turn filling {} tokens of context, then {} follow-up turns on it", fmt::join(s.contexts, " / "), s.children));
  }
  if (s.greedy) {
    parts.push_back("greedy");
  } else {
    parts.push_back(fmt::format("sampled (temperature {}, top_p {}, seed {})", s.temperature, s.top_p, s.seed));
  }
  parts.push_back(s.max_tokens > 0 ? fmt::format("at most {} tokens", s.max_tokens) : "each case's own token budget");
  parts.push_back(fmt::format("nonce seed {}", s.nonce_seed));
  if (!s.latency.empty()) {
    std::vector<std::string> words;
    for (const FamilyMetric m : s.latency) words.emplace_back(LatencyName(m));
    parts.push_back(fmt::format("latency families: p50, p90, p99 of {}", fmt::join(words, ", ")));
  }
  return fmt::format("`{}` ({}): {}", name, ToString(kind), fmt::join(parts, "; "));
}

}  // namespace tandem::store
