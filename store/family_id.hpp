#pragma once

#include <optional>
#include <string>
#include <string_view>

// What identifies a family of session scores, apart from the label the reports print, and
// which way is better. `gate.families` names a family by its label or by this structure.
namespace tandem::store {

// What a family measures.
enum class FamilyMetric {
  kWeighted,   // battery: median over repeats of the weighted decode
  kCase,       // battery: median decode rate of one case's requests
  kAggregate,  // concurrency / mixed: median over repeats of a batch's aggregate tok/s
  kRetained,   // retained_context: median decode rate of the children
  // Pooled families, as the reference report publishes them: one session score over many.
  kPooledCases,   // battery: geometric mean of the weighted cases' per-case medians
  kPooledLevels,  // concurrency / mixed: geometric mean of the levels above 1 (their medians)
  // Latency (lower is better): a percentile over one session's requests of a battery, or of
  // one level of a concurrency or mixed workload.
  kTtft,  // time to first output: t_first_output − t_start
  kItl,   // inter-token latency: the gaps between streamed text deltas, pooled over the requests
  kTpot,  // time per output token after the first: (t_finish − t_first_output) / (tokens − 1)
  kE2e,   // end to end: t_finish − t_start
  // A session's launch (lower is better; one value a session, its first launches per arm discarded).
  kStartup,  // seconds from the launch's start to a phase (case: workers_listening, coordinator_listening, ready, first_output)
  kMemory,   // once ready (case: coordinator_rss, workers_rss in bytes; gpu:HOST:INDEX in MiB)
  // The prefill matrix (rates, higher is better): a cell's new tokens / time to first token,
  // and the geometric mean of a session's cells.
  kPrefill,
  kPooledPrefill,
};

// The decode rates (higher is better), which a gate without `families` decides; the others
// (latency, startup, memory: times and sizes; prefill: rates) are gated where named.
bool IsDecodeRate(FamilyMetric metric);
bool IsPrefill(FamilyMetric metric);

// The latency metrics; each family of one is a percentile (FamilyId::percentile).
bool IsLatency(FamilyMetric metric);
// As the reports name a latency metric: "TTFT", "ITL", "TPOT", "E2E".
std::string_view LatencyName(FamilyMetric metric);

// Rates are better higher; times (startup, latency) lower. The comparison's ratio is
// always candidate / baseline of the measured value; the gate and the reports read it
// through the direction (a lower-is-better family regresses when the ratio rises).
enum class Direction { kHigherIsBetter, kLowerIsBetter };

struct FamilyId {
  std::string workload;
  FamilyMetric metric = FamilyMetric::kWeighted;
  std::string case_id;  // kCase, kAggregate, kPooledLevels ("mixed" for mixed traffic)
  int level = 1;        // kAggregate, and latency of a concurrency or mixed workload: requests at once
  int context = 0;      // kRetained: tokens of retained context; kPrefill: the cell's base
  int new_tokens = 0;   // kPrefill: the tokens the cell adds to its base
  int percentile = 0;   // latency metrics: 50, 90 or 99
  // The workload's sampling; absent in a selector (`gate.families`): either.
  std::optional<bool> greedy;

  // Whether `family` is this one (a selector's absent sampling matches both).
  bool Matches(const FamilyId& family) const;
  // As `gate.families` states it: "{workload: w, metric: aggregate, case: code, level: 4}".
  std::string Describe() const;
  bool operator==(const FamilyId&) const = default;
};

std::string_view ToString(FamilyMetric metric);
std::string_view ToString(Direction direction);  // "higher" | "lower"
// Throws InputError naming `where` and the words it knows.
FamilyMetric ParseFamilyMetric(std::string_view word, const std::string& where);

// A gated family, as `gate.families` names it: by label or by id (one of them).
struct FamilySelector {
  std::string label;
  std::optional<FamilyId> id;

  std::string Describe() const;  // the label, or the id's description
  bool Selects(const std::string& family_label, const FamilyId& family_id) const;
  bool operator==(const FamilySelector&) const = default;
};

}  // namespace tandem::store
