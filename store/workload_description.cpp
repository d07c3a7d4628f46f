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
  } else if (kind == WorkloadKind::kRetainedContext && s.children > 0) {  // a store from before contexts were exact
    parts.push_back(
        fmt::format("a parent turn filling {} tokens of context, then {} follow-up turns on it", fmt::join(s.contexts, " / "), s.children));
  } else if (kind == WorkloadKind::kRetainedContext) {
    parts.push_back(
        fmt::format("first every {} as a fresh conversation (the fresh-launch control); then for each context size {} tokens: a parent "
                    "prompt of exactly that many tokens by the server's usage (thinking {}), which must end with stop within {} tokens, "
                    "then each of those cases as a child turn on it, its cache hit between the parent's own text and the conversation "
                    "before its own message "
                    "(0: no parent, a near-zero hit); {}; prompts from {} (sha256 {})",
                    s.cases.empty() ? "weighted case" : fmt::format("case of {}", fmt::join(s.cases, ", ")), fmt::join(s.contexts, " / "),
                    fmt::join(s.thinking, " / "), s.parent_max_tokens, repeats, s.source, s.source_sha256.substr(0, 16)));
  } else if (kind == WorkloadKind::kPrefill) {
    parts.push_back(
        fmt::format("for each cell of retained base {} × new tokens {}: a parent prompt of exactly the base (1 token out), then a child "
                    "adding exactly the new tokens (1 token out), which must report the base cached and the new tokens uncached ({} "
                    "tr{} for a clean miss); rate = new tokens / time to first token; one discarded round per cell, then {}; prompts "
                    "from {} (sha256 {})",
                    fmt::join(s.bases, " / "), fmt::join(s.new_tokens, " / "), s.tries, s.tries == 1 ? "y" : "ies", repeats, s.source,
                    s.source_sha256.substr(0, 16)));
  }
  if (s.greedy) {
    parts.push_back("greedy");
  } else {
    parts.push_back(fmt::format("sampled (temperature {}, top_p {}, seed {})", s.temperature, s.top_p, s.seed));
  }
  if (kind != WorkloadKind::kPrefill) {
    parts.push_back(s.max_tokens > 0 ? fmt::format("at most {} tokens", s.max_tokens) : "each case's own token budget");
  }
  parts.push_back(fmt::format("nonce seed {}", s.nonce_seed));
  if (!s.latency.empty()) {
    std::vector<std::string> words;
    for (const FamilyMetric m : s.latency) words.emplace_back(LatencyName(m));
    parts.push_back(fmt::format("latency families: p50, p90, p99 of {}", fmt::join(words, ", ")));
  }
  return fmt::format("`{}` ({}): {}", name, ToString(kind), fmt::join(parts, "; "));
}

}  // namespace tandem::store
