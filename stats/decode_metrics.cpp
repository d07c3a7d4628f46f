#include "stats/decode_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "stats/stats_error.hpp"

namespace tandem::stats {

namespace {

// Checks one request's fields; `where` names it in messages ("request 3 (case \"code\")").
void RequireValidTiming(const RequestTiming& r, std::int64_t min_tokens, const std::string& where) {
  if (r.completion_tokens < min_tokens) {
    throw StatsError(fmt::format("{}: completion_tokens is {}, needs at least {}", where, r.completion_tokens, min_tokens));
  }
  if (!std::isfinite(r.t_first_output) || !std::isfinite(r.t_finish)) {
    throw StatsError(fmt::format("{}: t_first_output and t_finish must be finite", where));
  }
  if (r.t_finish < r.t_first_output) {
    throw StatsError(fmt::format("{}: t_finish {} is before t_first_output {}", where, r.t_finish, r.t_first_output));
  }
}

std::uint64_t Delta(std::uint64_t before, std::uint64_t after, const char* name) {
  if (after < before) {
    throw StatsError(
        fmt::format("draft counters: {} went backwards ({} before, {} after); did the server restart "
                    "between the two reads?",
                    name, before, after));
  }
  return after - before;
}

}  // namespace

bool HasDecodeInterval(const RequestTiming& r) {
  return r.completion_tokens >= 2 && r.t_first_output > 0 && std::isfinite(r.t_first_output) && std::isfinite(r.t_finish) &&
         r.t_finish > r.t_first_output;
}

double DecodeRate(const RequestTiming& request) {
  RequireValidTiming(request, 2, "request");
  const double dt = request.t_finish - request.t_first_output;
  if (!(dt > 0.0)) {
    throw StatsError(fmt::format("request: t_finish equals t_first_output ({}); no decode time", request.t_finish));
  }
  if (!std::isfinite(dt)) throw StatsError("request: decode time overflows a double");
  return static_cast<double>(request.completion_tokens - 1) / dt;
}

double WeightedDecode(std::span<const WeightedRequest> repeat) {
  if (repeat.empty()) throw StatsError("weighted decode: the repeat has no requests");
  std::map<std::string, double> weight_of_case;
  double tokens = 0.0;
  double seconds = 0.0;
  for (std::size_t i = 0; i < repeat.size(); ++i) {
    const WeightedRequest& r = repeat[i];
    const std::string where = fmt::format("request {} (case \"{}\")", i, r.case_name);
    if (!(std::isfinite(r.weight) && r.weight > 0.0)) {
      throw StatsError(fmt::format("{}: weight {} must be positive and finite", where, r.weight));
    }
    const auto [it, inserted] = weight_of_case.emplace(r.case_name, r.weight);
    if (!inserted && it->second != r.weight) {
      throw StatsError(fmt::format("{}: weight {} differs from {} given earlier for the same case", where, r.weight, it->second));
    }
    RequireValidTiming(r.timing, 0, where);
    if (!HasDecodeInterval(r.timing)) continue;  // no text, or one token: no decode time to weigh
    tokens += r.weight * static_cast<double>(r.timing.completion_tokens - 1);
    seconds += r.weight * (r.timing.t_finish - r.timing.t_first_output);
  }
  if (!(seconds > 0.0)) {
    throw StatsError("weighted decode: no request of the repeat has a decode interval (≥ 2 tokens of streamed text)");
  }
  if (!std::isfinite(seconds) || !std::isfinite(tokens)) {
    throw StatsError("weighted decode: weighted sums overflow a double; check weights and times");
  }
  return tokens / seconds;
}

double AggregateThroughput(std::span<const RequestTiming> batch) {
  if (batch.empty()) throw StatsError("aggregate throughput: the batch has no requests");
  double tokens = 0.0;
  double first = std::numeric_limits<double>::infinity();
  double last = -std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < batch.size(); ++i) {
    RequireValidTiming(batch[i], 0, fmt::format("request {}", i));
    if (!HasDecodeInterval(batch[i])) continue;  // e.g. no text: its t_first_output is no time at all
    tokens += static_cast<double>(batch[i].completion_tokens - 1);
    first = std::min(first, batch[i].t_first_output);
    last = std::max(last, batch[i].t_finish);
  }
  if (!std::isfinite(first)) throw StatsError("aggregate throughput: no request of the batch has a decode interval");
  if (!(last > first)) throw StatsError("aggregate throughput: the batch spans no time");
  if (!std::isfinite(last - first)) throw StatsError("aggregate throughput: the batch's time span overflows a double");
  return tokens / (last - first);
}

DraftCounters DraftCountersBetween(const DraftCounters& before, const DraftCounters& after) {
  return {Delta(before.accepted_drafts, after.accepted_drafts, "accepted_drafts"),
          Delta(before.verified_drafts, after.verified_drafts, "verified_drafts"),
          Delta(before.request_rounds, after.request_rounds, "request_rounds")};
}

DraftRates DraftRatesOf(const DraftCounters& interval) {
  const std::uint64_t accepted = interval.accepted_drafts, verified = interval.verified_drafts, rounds = interval.request_rounds;
  if (accepted > verified) {
    throw StatsError(fmt::format("draft counters: {} drafts accepted but only {} verified in the interval", accepted, verified));
  }
  if (rounds == 0) {
    throw StatsError("draft counters: no request rounds between the two reads");
  }
  DraftRates rates;
  if (verified > 0) rates.acceptance = static_cast<double>(accepted) / static_cast<double>(verified);
  rates.emitted_per_round = static_cast<double>(accepted + rounds) / static_cast<double>(rounds);
  return rates;
}

DraftRates DraftRatesBetween(const DraftCounters& before, const DraftCounters& after) {
  return DraftRatesOf(DraftCountersBetween(before, after));
}

}  // namespace tandem::stats
