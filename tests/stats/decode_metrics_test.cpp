#include "stats/decode_metrics.hpp"

#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "stats/descriptive.hpp"
#include "stats/stats_error.hpp"

namespace tandem::stats {
namespace {

TEST(DecodeRate, ExcludesThePrefillToken) {
  EXPECT_DOUBLE_EQ(DecodeRate({.completion_tokens = 101, .t_first_output = 0.5, .t_finish = 2.5}), 50.0);
}

TEST(DecodeRate, RejectsRequestsWithoutDecode) {
  EXPECT_THROW(DecodeRate({.completion_tokens = 1, .t_first_output = 0.5, .t_finish = 0.5}), StatsError);
  EXPECT_THROW(DecodeRate({.completion_tokens = 10, .t_first_output = 0.5, .t_finish = 0.5}), StatsError);
  EXPECT_THROW(DecodeRate({.completion_tokens = 10, .t_first_output = 0.5, .t_finish = 0.4}), StatsError);
  EXPECT_THROW(DecodeRate({.completion_tokens = 10, .t_first_output = 0.5, .t_finish = std::numeric_limits<double>::infinity()}),
               StatsError);
}

// Hand-checked battery (docs/examples/battery-samples.json): weights 2, 2, 1, 3 over
// cases whose decode takes 11.5, 8.75, 4 and 18.5 s, so Σ w·dt = 100 s in every repeat,
// and Σ w·(ct − 1) = 10452, 10469 and 10781 tokens.
std::vector<WeightedRequest> Repeat(double t0, std::int64_t code, std::int64_t topic, std::int64_t json, std::int64_t reasoning) {
  return {{"code", 2, {code, t0 + 0.412, t0 + 11.912}},
          {"topic", 2, {topic, t0 + 0.388, t0 + 9.138}},
          {"json_schema", 1, {json, t0 + 0.297, t0 + 4.297}},
          {"reasoning", 3, {reasoning, t0 + 0.455, t0 + 18.955}}};
}

TEST(WeightedDecode, HandCheckedBatteryAndMedianOverRepeats) {
  const double r0 = WeightedDecode(Repeat(0, 1201, 901, 352, 1968));
  const double r1 = WeightedDecode(Repeat(10, 1211, 906, 354, 1963));
  const double r2 = WeightedDecode(Repeat(20, 1251, 931, 356, 2023));
  EXPECT_NEAR(r0, 104.52, 1e-9);
  EXPECT_NEAR(r1, 104.69, 1e-9);
  EXPECT_NEAR(r2, 107.81, 1e-9);
  const std::vector<double> repeats = {r2, r0, r1};
  EXPECT_NEAR(Median(repeats), 104.69, 1e-9);
}

TEST(WeightedDecode, IsNotTheMeanOfPerRequestRates) {
  // A long slow case weighs more than a short fast one: Σ tokens / Σ time.
  const std::vector<WeightedRequest> r = {{"a", 1, {101, 10, 11}}, {"b", 1, {101, 10, 14}}};
  EXPECT_DOUBLE_EQ(WeightedDecode(r), 200.0 / 5.0);
}

// A request whose only token was end-of-sequence streamed no text: it has no
// t_first_output (0), and its t_finish is seconds since boot. It counts as a request but
// has no decode interval, so it must not add ~10⁵ s to the weighted decode time.
TEST(WeightedDecode, ARequestWithoutTextOrWithOneTokenEntersNoRate) {
  const std::vector<WeightedRequest> base = {{"a", 1, {101, 86400, 86401}}, {"b", 1, {101, 86400, 86404}}};
  std::vector<WeightedRequest> with = base;
  with.push_back({"c", 1, {1, 0, 86402}});        // end-of-sequence only: no text
  with.push_back({"d", 1, {0, 0, 86402}});        // no token at all
  with.push_back({"e", 1, {1, 86403, 86403.5}});  // one token: no decode interval either
  EXPECT_DOUBLE_EQ(WeightedDecode(with), WeightedDecode(base));
  EXPECT_FALSE(HasDecodeInterval({1, 0, 86402}));
  EXPECT_FALSE(HasDecodeInterval({1, 86403, 86403.5}));
  EXPECT_FALSE(HasDecodeInterval({5, 0, 86402}));  // tokens that never became text
  EXPECT_TRUE(HasDecodeInterval({2, 86403, 86403.5}));
  const std::vector<WeightedRequest> only = {{"c", 1, {1, 0, 86402}}};
  EXPECT_THROW(WeightedDecode(only), StatsError);
}

TEST(WeightedDecode, RejectsBadInput) {
  EXPECT_THROW(WeightedDecode(std::vector<WeightedRequest>{}), StatsError);
  const std::vector<WeightedRequest> mismatched = {{"a", 1, {10, 5, 6}}, {"a", 2, {10, 5, 6}}};
  try {
    WeightedDecode(mismatched);
    FAIL();
  } catch (const StatsError& e) {
    EXPECT_STREQ(e.what(), "request 1 (case \"a\"): weight 2 differs from 1 given earlier for the same case");
  }
  const std::vector<WeightedRequest> zero_weight = {{"a", 0, {10, 5, 6}}};
  EXPECT_THROW(WeightedDecode(zero_weight), StatsError);
  const std::vector<WeightedRequest> no_tokens = {{"a", 1, {-1, 5, 6}}};
  EXPECT_THROW(WeightedDecode(no_tokens), StatsError);
  const std::vector<WeightedRequest> no_time = {{"a", 1, {1, 3, 3}}};
  EXPECT_THROW(WeightedDecode(no_time), StatsError);
}

TEST(AggregateThroughput, SpansFirstOutputToLastFinish) {
  const std::vector<RequestTiming> batch = {{101, 1.0, 3.0}, {201, 1.5, 5.0}, {51, 2.0, 4.0}};
  EXPECT_DOUBLE_EQ(AggregateThroughput(batch), 350.0 / 4.0);
}

TEST(AggregateThroughput, ARequestWithoutTextDoesNotStretchTheSpan) {
  const std::vector<RequestTiming> batch = {{101, 1.0, 3.0}, {201, 1.5, 5.0}, {1, 0.0, 4.0}};
  EXPECT_DOUBLE_EQ(AggregateThroughput(batch), 300.0 / 4.0);
  const std::vector<RequestTiming> none = {{1, 0.0, 4.0}};
  EXPECT_THROW(AggregateThroughput(none), StatsError);
}

TEST(AggregateThroughput, RejectsBadInput) {
  EXPECT_THROW(AggregateThroughput(std::vector<RequestTiming>{}), StatsError);
  const std::vector<RequestTiming> backwards = {{101, 2.0, 1.0}};
  EXPECT_THROW(AggregateThroughput(backwards), StatsError);
  const std::vector<RequestTiming> instant = {{1, 2.0, 2.0}};
  EXPECT_THROW(AggregateThroughput(instant), StatsError);
}

TEST(DraftRates, FromCounterDeltas) {
  const DraftCounters before = {.accepted_drafts = 1000, .verified_drafts = 2000, .request_rounds = 500};
  const DraftCounters after = {.accepted_drafts = 1300, .verified_drafts = 2400, .request_rounds = 600};
  const DraftRates rates = DraftRatesBetween(before, after);
  ASSERT_TRUE(rates.acceptance.has_value());
  EXPECT_DOUBLE_EQ(*rates.acceptance, 0.75);
  EXPECT_DOUBLE_EQ(rates.emitted_per_round, 4.0);  // (300 + 100) / 100
}

TEST(DraftRates, NoDraftsMeansNoAcceptanceAndOneTokenPerRound) {
  const DraftRates rates = DraftRatesBetween({0, 0, 10}, {0, 0, 74});
  EXPECT_FALSE(rates.acceptance.has_value());
  EXPECT_DOUBLE_EQ(rates.emitted_per_round, 1.0);
}

TEST(DraftRates, RejectsCountersThatWentBackwardsOrDidNotMove) {
  EXPECT_THROW(DraftRatesBetween({10, 20, 5}, {5, 30, 9}), StatsError);
  EXPECT_THROW(DraftRatesBetween({10, 20, 5}, {12, 25, 5}), StatsError);
  EXPECT_THROW(DraftRatesBetween({0, 0, 0}, {10, 5, 3}), StatsError);  // more accepted than verified
}

}  // namespace
}  // namespace tandem::stats
