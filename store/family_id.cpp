#include "store/family_id.hpp"

#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tandem::store {

bool IsDecodeRate(FamilyMetric metric) {
  return !IsLatency(metric) && metric != FamilyMetric::kStartup && metric != FamilyMetric::kMemory && !IsPrefill(metric);
}

bool IsPrefill(FamilyMetric metric) { return metric == FamilyMetric::kPrefill || metric == FamilyMetric::kPooledPrefill; }

bool IsLatency(FamilyMetric metric) {
  return metric == FamilyMetric::kTtft || metric == FamilyMetric::kItl || metric == FamilyMetric::kTpot || metric == FamilyMetric::kE2e;
}

std::string_view LatencyName(FamilyMetric metric) {
  switch (metric) {
    case FamilyMetric::kTtft:
      return "TTFT";
    case FamilyMetric::kItl:
      return "ITL";
    case FamilyMetric::kTpot:
      return "TPOT";
    case FamilyMetric::kE2e:
      return "E2E";
    default:
      return "";
  }
}

std::string_view ToString(Direction direction) { return direction == Direction::kLowerIsBetter ? "lower" : "higher"; }

bool FamilyId::Matches(const FamilyId& family) const {
  return workload == family.workload && metric == family.metric && case_id == family.case_id && level == family.level &&
         context == family.context && new_tokens == family.new_tokens && percentile == family.percentile &&
         (!greedy || !family.greedy || *greedy == *family.greedy);
}

std::string FamilyId::Describe() const {
  std::vector<std::string> parts = {fmt::format("workload: {}", workload), fmt::format("metric: {}", ToString(metric))};
  if (!case_id.empty()) parts.push_back(fmt::format("case: {}", case_id));
  if (metric == FamilyMetric::kAggregate || (IsLatency(metric) && level != 1)) parts.push_back(fmt::format("level: {}", level));
  if (IsLatency(metric)) parts.push_back(fmt::format("percentile: {}", percentile));
  if (metric == FamilyMetric::kRetained) parts.push_back(fmt::format("context: {}", context));
  if (metric == FamilyMetric::kPrefill) {
    parts.push_back(fmt::format("base: {}", context));
    parts.push_back(fmt::format("new_tokens: {}", new_tokens));
  }
  if (greedy) parts.push_back(fmt::format("sampling: {}", *greedy ? "greedy" : "sampled"));
  return fmt::format("{{{}}}", fmt::join(parts, ", "));
}

std::string FamilySelector::Describe() const { return id ? id->Describe() : label; }

bool FamilySelector::Selects(const std::string& family_label, const FamilyId& family_id) const {
  return id ? id->Matches(family_id) : label == family_label;
}

}  // namespace tandem::store
