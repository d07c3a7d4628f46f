#include "store/stored_enums.hpp"

#include <array>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/input_error.hpp"
#include "store/family_id.hpp"

namespace tandem::store {

namespace {

constexpr std::array<std::pair<SessionStatus, std::string_view>, 5> kSessionStatuses = {{
    {SessionStatus::kPlanned, "planned"},
    {SessionStatus::kRunning, "running"},
    {SessionStatus::kComplete, "complete"},
    {SessionStatus::kFailed, "failed"},
    {SessionStatus::kSkipped, "skipped"},
}};

constexpr std::array<std::pair<WorkloadKind, std::string_view>, 5> kWorkloadKinds = {{
    {WorkloadKind::kBattery, "battery"},
    {WorkloadKind::kConcurrency, "concurrency"},
    {WorkloadKind::kMixed, "mixed"},
    {WorkloadKind::kRetainedContext, "retained_context"},
    {WorkloadKind::kPrefill, "prefill"},
}};

constexpr std::array<std::pair<ArmKind, std::string_view>, 6> kArmKinds = {{
    {ArmKind::kBinary, "binary"},
    {ArmKind::kGit, "git"},
    {ArmKind::kCommand, "command"},
    {ArmKind::kExternal, "external"},
    {ArmKind::kContainer, "container"},
    {ArmKind::kMixed, "mixed"},
}};

constexpr std::array<std::pair<FamilyMetric, std::string_view>, 14> kFamilyMetrics = {{
    {FamilyMetric::kWeighted, "weighted"},
    {FamilyMetric::kCase, "case"},
    {FamilyMetric::kAggregate, "aggregate"},
    {FamilyMetric::kRetained, "retained"},
    {FamilyMetric::kPooledCases, "pooled_cases"},
    {FamilyMetric::kPooledLevels, "pooled_levels"},
    {FamilyMetric::kTtft, "ttft"},
    {FamilyMetric::kItl, "itl"},
    {FamilyMetric::kTpot, "tpot"},
    {FamilyMetric::kE2e, "e2e"},
    {FamilyMetric::kStartup, "startup"},
    {FamilyMetric::kMemory, "memory"},
    {FamilyMetric::kPrefill, "prefill"},
    {FamilyMetric::kPooledPrefill, "pooled_prefill"},
}};

template <class Enum, std::size_t N>
std::string_view Word(const std::array<std::pair<Enum, std::string_view>, N>& words, Enum value) {
  for (const auto& [v, w] : words) {
    if (v == value) return w;
  }
  return "?";
}

template <class Enum, std::size_t N>
Enum Parse(const std::array<std::pair<Enum, std::string_view>, N>& words, std::string_view word, const std::string& where,
           const char* what) {
  for (const auto& [v, w] : words) {
    if (w == word) return v;
  }
  std::vector<std::string_view> known;
  for (const auto& [v, w] : words) known.push_back(w);
  throw InputError(
      fmt::format("{}: {} '{}' is not one this Tandem knows ({}); a newer Tandem wrote it?", where, what, word, fmt::join(known, ", ")));
}

}  // namespace

std::string_view ToString(SessionStatus status) { return Word(kSessionStatuses, status); }
std::string_view ToString(WorkloadKind kind) { return Word(kWorkloadKinds, kind); }
std::string_view ToString(ArmKind kind) { return Word(kArmKinds, kind); }

SessionStatus ParseSessionStatus(std::string_view word, const std::string& where) {
  return Parse(kSessionStatuses, word, where, "session status");
}
WorkloadKind ParseWorkloadKind(std::string_view word, const std::string& where) {
  return Parse(kWorkloadKinds, word, where, "workload kind");
}
ArmKind ParseArmKind(std::string_view word, const std::string& where) { return Parse(kArmKinds, word, where, "arm kind"); }

// Declared with the family id (store/family_id.hpp); the words live with the others.
std::string_view ToString(FamilyMetric metric) { return Word(kFamilyMetrics, metric); }
FamilyMetric ParseFamilyMetric(std::string_view word, const std::string& where) { return Parse(kFamilyMetrics, word, where, "metric"); }

}  // namespace tandem::store
