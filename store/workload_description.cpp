#include "store/workload_description.hpp"

#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tandem::store {

std::string DescribeWorkload(const std::string& name, const std::string& kind, const nlohmann::json& s) {
  using nlohmann::json;
  std::vector<std::string> parts;
  const auto list = [](const json& j) {
    std::vector<std::string> items;
    if (j.is_array()) {
      for (const json& x : j) items.push_back(x.is_string() ? x.get<std::string>() : x.dump());
    }
    return items;
  };
  const std::vector<std::string> cases = list(s.value("cases", json::array()));
  if (kind == "battery") {
    parts.push_back(cases.empty() ? "every weighted case" : fmt::format("cases {}", fmt::join(cases, ", ")));
    if (s.value("counting", true) && cases.empty()) parts.push_back("plus the counting diagnostic");
    parts.push_back(fmt::format("{} repeat{}", s.value("repeats", 1), s.value("repeats", 1) == 1 ? "" : "s"));
  } else if (kind == "concurrency") {
    parts.push_back(fmt::format("cases {}", fmt::join(cases, ", ")));
    parts.push_back(fmt::format("C identical requests at once for C in {}", fmt::join(list(s.value("levels", json::array())), ", ")));
    parts.push_back(fmt::format("{} repeat{}", s.value("repeats", 1), s.value("repeats", 1) == 1 ? "" : "s"));
  } else if (kind == "mixed") {
    parts.push_back(
        fmt::format("C requests at once rotating code, fable, topic for C in {}", fmt::join(list(s.value("levels", json::array())), ", ")));
    parts.push_back(fmt::format("{} repeat{}", s.value("repeats", 1), s.value("repeats", 1) == 1 ? "" : "s"));
  } else if (kind == "retained_context") {
    parts.push_back(fmt::format("a parent turn filling {} tokens of context, then {} follow-up turns on it",
                                fmt::join(list(s.value("contexts", json::array())), " / "), s.value("children", 2)));
  }
  if (s.value("greedy", true)) {
    parts.push_back("greedy");
  } else {
    parts.push_back(
        fmt::format("sampled (temperature {}, top_p {}, seed {})", s.value("temperature", 0.0), s.value("top_p", 1.0), s.value("seed", 0)));
  }
  const int max_tokens = s.value("max_tokens", 0);
  parts.push_back(max_tokens > 0 ? fmt::format("at most {} tokens", max_tokens) : "each case's own token budget");
  parts.push_back(fmt::format("nonce seed {}", s.value("nonce_seed", 0)));
  return fmt::format("`{}` ({}): {}", name, kind, fmt::join(parts, "; "));
}

}  // namespace tandem::store
