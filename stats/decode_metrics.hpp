#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

// Decode figures exactly as DESIGN.md defines them. Times are seconds on the
// harness's monotonic clock.
namespace tandem::stats {

struct RequestTiming {
  std::int64_t completion_tokens = 0;
  double t_first_output = 0.0;  // first SSE delta with non-empty content or reasoning_content; 0: none came
  double t_finish = 0.0;        // the event carrying finish_reason
};

// Whether a request has a decode interval: ≥ 2 tokens and text that arrived before the
// finish. A request that streamed no text (its only token was end-of-sequence) or one
// token has none: it counts as a request, but enters no rate.
bool HasDecodeInterval(const RequestTiming& request);

// (completion_tokens − 1) / (t_finish − t_first_output): the first token is
// prefill's, so it is not counted. Needs ≥ 2 tokens and t_finish > t_first_output.
double DecodeRate(const RequestTiming& request);

// One request of a battery repeat and the weight of its case in the corpus.
struct WeightedRequest {
  std::string case_name;
  double weight = 0.0;
  RequestTiming timing;
};

// Weighted decode of one battery repeat: Σ w·(ct − 1) / Σ w·(t_finish − t_first_output)
// over the requests with a decode interval. Every request of a case must carry the same
// weight (a mismatch is an error naming the case). The reported figure is the Median
// over repeats.
double WeightedDecode(std::span<const WeightedRequest> repeat);

// Aggregate throughput of a concurrent batch: Σ(ct − 1) / (max t_finish − min t_first_output)
// over the requests with a decode interval.
double AggregateThroughput(std::span<const RequestTiming> batch);

// Lifetime draft counters of a server's /v1/stats, read before and after a workload.
struct DraftCounters {
  std::uint64_t accepted_drafts = 0;
  std::uint64_t verified_drafts = 0;
  std::uint64_t request_rounds = 0;
};

struct DraftRates {
  // Δaccepted / Δverified; empty when nothing was verified (drafting off).
  std::optional<double> acceptance;
  // (Δaccepted + Δrounds) / Δrounds: tokens each request emitted per verify round.
  double emitted_per_round = 0.0;
};

// after − before, counter by counter; a counter that went backwards (the server
// restarted between the reads) is an error.
DraftCounters DraftCountersBetween(const DraftCounters& before, const DraftCounters& after);

// The rates of counters accumulated over an interval (one delta, or a sum of them):
// needs request_rounds > 0 and accepted ≤ verified.
DraftRates DraftRatesOf(const DraftCounters& interval);

// DraftRatesOf(DraftCountersBetween(before, after)).
DraftRates DraftRatesBetween(const DraftCounters& before, const DraftCounters& after);

}  // namespace tandem::stats
