#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "store/session_scores.hpp"
#include "store/session_startup.hpp"

// The session scores of one workload run, one scorer per workload kind (each in a file of
// its own: a new kind is a new scorer and a row in ScorerFor). Internal to store/:
// ComputeSessionScores reads the samples, hands each run's to its kind's scorer, and
// gathers what the scorers put into families.
namespace tandem::store {

// A sample as the scorers read it (valid samples of measured workloads of complete sessions).
struct ScoredSample {
  std::int64_t session;
  int layout_position;
  bool greedy;
  std::string layout, arm, workload;
  WorkloadKind kind;
  std::string case_id, role;
  int repeat, level, batch, slot, context;
  double weight;
  int completion_tokens;
  double t_first_output, t_finish;
  bool valid;  // as stored, and with times a request can have (ImplausibleTimes)
  double t_start = 0;
  int new_tokens = 0;                 // prefill: the tokens a child adds to its base (context)
  std::vector<double> gaps;           // between streamed text deltas, seconds
  std::vector<FamilyMetric> latency;  // the workload's latency families
};

// The decode rate of one request; none for an invalid sample or fewer than 2 tokens.
std::optional<double> DecodeRateOf(const ScoredSample& s);

// A prefill child's rate: its new tokens / seconds to its first token; none for a sample
// that is not a clean, measured child (a discarded round, a retry, a probe, a parent).
std::optional<double> PrefillRateOf(const ScoredSample& s);

// A family (its label, metric, case, level or context) and the values one session scored
// in it: the session's score is their median.
using FamilySink = std::function<void(FamilyScores family, std::vector<double> values)>;
using WorkloadScorer = void (*)(const std::vector<const ScoredSample*>& run, const FamilySink& put);

void ScoreBattery(const std::vector<const ScoredSample*>& run, const FamilySink& put);
void ScoreConcurrency(const std::vector<const ScoredSample*>& run, const FamilySink& put);  // and mixed traffic
void ScoreRetainedContext(const std::vector<const ScoredSample*>& run, const FamilySink& put);
void ScorePrefill(const std::vector<const ScoredSample*>& run, const FamilySink& put);
// The latency families of a battery, concurrency or mixed run (besides its kind's scorer);
// an empty `values` puts a session in which a percentile is not estimable.
void ScoreLatency(const std::vector<const ScoredSample*>& run, const FamilySink& put);
// The startup and memory families of one session's launch (none for a discarded launch).
void ScoreStartup(const SessionStartup& startup, const FamilySink& put);

WorkloadScorer ScorerFor(WorkloadKind kind);

}  // namespace tandem::store
