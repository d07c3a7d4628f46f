#include "runtime/draft/draft_policy.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tandem::rt {

namespace {

// The round's time: V(rows) = a + b·rows for the target's verification step, fitted
// by exponentially weighted least squares over measured steps (with a weak prior on
// b, since most steps have similar row counts), plus d per drafter forward. d is
// measured on the drafter's chained single-row forwards, and on first forwards that
// caught up on only a few rows: a first forward after a long pause catches up on
// every token since, which says nothing about the steady cost. The number of remote
// MoE layers is fixed for a process, so it lives in a and b. Also keeps the mean
// absolute relative error of its own predictions.
class RoundTimeModel {
 public:
  void Observe(const DraftRoundTiming& t) {
    const double measured = t.draft_s + t.verify_s;
    if (rounds_ >= kWarmRounds && measured > 0) {
      const double predicted = Verify(t.rows) + (t.work.catchup_rows > 0 ? Drafting(t.work.chained + 1, t.rows) : 0);
      error_sum_ += std::abs(predicted - measured) / measured;
      signed_error_us_ += (predicted - measured) * 1e6;
      ++error_count_;
    }
    ++rounds_;
    for (double* s : {&w_, &wx_, &wy_, &wxx_, &wxy_, &first_weight_, &chained_weight_}) *s *= kDecay;
    const double x = t.rows, y = t.verify_s;
    w_ += 1;
    wx_ += x;
    wy_ += y;
    wxx_ += x * x;
    wxy_ += x * y;
    if (t.work.chained > 0) Average(chained_, chained_weight_, chained_samples_, t.work.chained_s / t.work.chained);
    if (t.work.catchup_rows > 0 && t.work.catchup_rows <= kSteadyCatchup) Average(first_, first_weight_, first_samples_, t.work.first_s);
  }

  // The drafter's time for a round of k drafts: its first forward (which also catches
  // up on what the last round accepted), then k − 1 chained single-row forwards.
  double Drafting(int k, int base_rows) const {
    if (k == 0) return 0;
    const double first = first_samples_ > 0 ? first_ : chained_samples_ > 0 ? chained_ : 0.1 * Verify(base_rows + 1);
    const double chained = chained_samples_ > 0 ? chained_ : first;
    return first + chained * (k - 1);
  }

  // Before any measurement: each extra row costs 5% of a step, a draft forward 10%.
  double Slope() const {
    if (w_ <= 0) return 0.05;
    const double mx = wx_ / w_, my = wy_ / w_;
    const double sxx = wxx_ - w_ * mx * mx, sxy = wxy_ - w_ * mx * my;
    const double prior = 0.05 * std::max(my, 1e-9), lambda = 1.0;  // weak: rows rarely vary much
    return std::max(0.0, (sxy + lambda * prior) / (sxx + lambda));
  }
  double Intercept() const { return w_ <= 0 ? 1.0 : std::max(1e-9, wy_ / w_ - Slope() * wx_ / w_); }
  double Verify(int rows) const { return Intercept() + Slope() * rows; }

  void Describe(nlohmann::json& out) const {
    out["round_time_model"] = {
        {"verify_intercept_ms", Intercept() * 1e3},
        {"verify_per_row_ms", Slope() * 1e3},
        {"draft_first_forward_ms", first_samples_ > 0 ? nlohmann::json(first_ * 1e3) : nlohmann::json(nullptr)},
        {"draft_chained_forward_ms", chained_samples_ > 0 ? nlohmann::json(chained_ * 1e3) : nlohmann::json(nullptr)},
        {"rounds_observed", rounds_}};
    out["round_time_prediction_mare"] =
        error_count_ > 0 ? nlohmann::json(error_sum_ / static_cast<double>(error_count_)) : nlohmann::json(nullptr);
    // Lifetime sums, so a client reading /v1/stats around a workload gets that workload's
    // figures from the differences: MARE = Δabs_rel_error_sum / Δrounds, mean error Δerror_us_sum / Δrounds.
    out["round_time_prediction"] = {{"rounds", error_count_}, {"abs_rel_error_sum", error_sum_}, {"error_us_sum", signed_error_us_}};
  }

  static constexpr double kDecay = 0.98;

 private:
  static constexpr int kWarmRounds = 8;      // rounds before the prediction error counts
  static constexpr int kSteadyCatchup = 16;  // first-forward rows that still measure d

  double w_ = 0, wx_ = 0, wy_ = 0, wxx_ = 0, wxy_ = 0;
  // A running mean at first, then exponentially weighted. The weight of what was
  // measured fades per round, like the fitted step times: a policy that drafts again
  // after a long pause trusts what it measures now, not forwards timed long ago (cold
  // first rounds would otherwise keep drafting off for good).
  static void Average(double& mean, double& weight, std::uint64_t& samples, double value) {
    ++samples;
    weight += 1;
    mean += std::max(1.0 / weight, 1 - kDecay) * (value - mean);
  }

  double first_ = 0, chained_ = 0;
  double first_weight_ = 0, chained_weight_ = 0;
  std::uint64_t first_samples_ = 0, chained_samples_ = 0;
  std::uint64_t rounds_ = 0;
  double error_sum_ = 0;
  double signed_error_us_ = 0;  // predicted − measured, summed
  std::uint64_t error_count_ = 0;
};

class FixedPolicy : public DraftPolicy {
 public:
  explicit FixedPolicy(int k) : k_(k) {}
  std::string name() const override { return fmt::format("fixed:{}", k_); }
  int MaxDrafts() const override { return k_; }
  bool More(const Draft& so_far, const StepShape&) const override { return static_cast<int>(so_far.tokens.size()) < k_; }
  std::size_t Choose(const Draft& draft, const StepShape&) const override { return draft.tokens.size(); }
  void ObserveAcceptance(const Draft&, std::size_t, std::size_t) override {}
  void ObserveRound(const DraftRoundTiming& timing) override { time_.Observe(timing); }
  void Describe(nlohmann::json& out) const override {
    out["k"] = k_;
    time_.Describe(out);  // not used to decide, but worth knowing
  }

 private:
  int k_;
  RoundTimeModel time_;
};

// Maximises the step's expected emitted tokens per second, one request's drafts at a time:
//   E(k) = 1 + Σ_{i≤k} Π_{m≤i} p(c_m)          (what this request's round emits)
//   rate = (requests − 1 + E(k)) / T(rows + k)  (T: RoundTimeModel, drafting included)
// p(c): the acceptance probability of a draft the drafter gave confidence c, learned
// online per confidence bin; a bin starts at the drafter's overall acceptance (worth
// 4 drafts of evidence), so the decision to draft (made before any confidence is
// known) and the choice of what to verify agree until the bins have data.
class AdaptivePolicy : public DraftPolicy {
 public:
  explicit AdaptivePolicy(int max) : max_(max) {}
  std::string name() const override { return "adaptive"; }
  int MaxDrafts() const override { return max_; }

  bool More(const Draft& so_far, const StepShape& step) const override {
    const std::size_t j = so_far.tokens.size();
    if (static_cast<int>(j) >= max_) return false;
    // Now and then two drafts regardless, verified, so what drafting costs and gains
    // is measured again rather than remembered from long ago. For two rounds: the first
    // round's first forward catches up on the whole pause, which says nothing about the
    // steady draft cost; the second's measures it.
    if (j == 0 && explore_left_ == 0 && rounds_without_drafts_ >= explore_every_) explore_left_ = kExploreRounds;
    if (explore_left_ > 0) return j < 2;
    // Starting to draft must promise a clear gain: near break-even, the fitted times'
    // noise would flip the decision back and forth, and each flip costs a catch-up.
    if (j == 0) return BestRate(step, kMaxLookahead, Overall()) > (1 + kMargin) * Rate(step, 0, 0, 1);
    double e = 1, p = 1;
    for (std::size_t i = 0; i < j; ++i) e += (p *= Accept(so_far.confidence[i]));
    const double next = Accept(so_far.confidence[j - 1]);  // the next draft is taken to be like the last
    const auto k = static_cast<int>(j);
    return Rate(step, k + 1, k + 1, e + p * next) > Rate(step, k, k, e);
  }

  std::size_t Choose(const Draft& draft, const StepShape& step) const override {
    if (explore_left_ > 0) return draft.tokens.size();
    const auto drafted = static_cast<int>(draft.tokens.size());
    double e = 1, p = 1;
    double best = (1 + kMargin) * Rate(step, 0, drafted, 1);  // verifying must clearly pay too
    std::size_t best_k = 0;
    for (int k = 1; k <= drafted; ++k) {
      e += (p *= Accept(draft.confidence[static_cast<std::size_t>(k - 1)]));
      const double rate = Rate(step, k, drafted, e);  // drafting is spent either way
      if (rate > best) {
        best = rate;
        best_k = static_cast<std::size_t>(k);
      }
    }
    return best_k;
  }

  void ObserveAcceptance(const Draft& draft, std::size_t verified, std::size_t accepted) override {
    if (verified > 0) {
      first_.verified += 1;
      first_.accepted += accepted > 0 ? 1 : 0;
    }
    // Only the first rejection is evidence: later drafts were never really tested.
    for (std::size_t i = 0; i < verified && i <= accepted; ++i) {
      Bin& b = bins_[BinOf(draft.confidence[i])];
      b.verified += 1;
      b.accepted += i < accepted ? 1 : 0;
    }
  }

  void ObserveRound(const DraftRoundTiming& t) override {
    time_.Observe(t);
    // An exploratory round costs a catch-up on everything since the last draft, so
    // while exploring keeps showing that drafting does not pay, explore half as often.
    if (t.drafted > 0 && explore_left_ == 0) explore_every_ = kExploreEvery;
    if (explore_left_ > 0 && --explore_left_ == 0) explore_every_ = std::min(2 * explore_every_, kExploreAtMost);
    rounds_without_drafts_ = t.drafted > 0 ? 0 : rounds_without_drafts_ + 1;
    // Acceptance evidence fades too, so a policy that stopped drafting drifts back to
    // its prior and tries again.
    first_.Decay();
    for (Bin& b : bins_) b.Decay();
  }

  void Describe(nlohmann::json& out) const override {
    out["max_drafts"] = max_;
    time_.Describe(out);
    nlohmann::json bins = nlohmann::json::array();
    for (std::size_t i = 0; i < bins_.size(); ++i) {
      if (bins_[i].verified < 0.5) continue;
      bins.push_back({{"confidence_from", static_cast<double>(i) / kBins},
                      {"confidence_to", static_cast<double>(i + 1) / kBins},
                      {"verified", bins_[i].verified},
                      {"accepted", bins_[i].accepted}});
    }
    out["calibration"] = bins;
  }

 private:
  static constexpr int kBins = 10;
  static constexpr double kPrior = 4;        // drafts of evidence the overall rate counts for in each bin
  static constexpr int kExploreEvery = 256;  // rounds, doubling up to
  static constexpr int kExploreAtMost = 16384;
  static constexpr int kExploreRounds = 2;
  static constexpr double kMargin = 0.10;  // expected gain needed to draft at all
  static constexpr int kMaxLookahead = 8;

  struct Bin {
    double verified = 0, accepted = 0;
    void Decay() {
      verified *= RoundTimeModel::kDecay;
      accepted *= RoundTimeModel::kDecay;
    }
  };

  static std::size_t BinOf(float c) { return static_cast<std::size_t>(std::clamp(static_cast<int>(c * kBins), 0, kBins - 1)); }

  // The drafter's acceptance overall, as the first drafts show it (0.5 before any).
  double Overall() const { return (first_.accepted + 1) / (first_.verified + 2); }

  // A bin without evidence of its own is taken at the drafter's overall rate, not at
  // its confidence: confidences need not be calibrated (a replica of a model with flat
  // distributions is right 90% of the time at confidence 0.05).
  double Accept(float confidence) const {
    const Bin& b = bins_[BinOf(confidence)];
    return (b.accepted + kPrior * Overall()) / (b.verified + kPrior);
  }

  // Tokens per second of the whole step when this request verifies `verified` of
  // `drafted` drafts and expects `tokens` from them: the other requests emit about one
  // each, and its rows and drafting time delay them all.
  double Rate(const StepShape& step, int verified, int drafted, double tokens) const {
    const double t = time_.Verify(step.rows + verified) + time_.Drafting(drafted, step.rows);
    return (step.requests - 1 + tokens) / t;
  }

  // The best Rate over 1..most drafts, each accepted with p.
  double BestRate(const StepShape& step, int most, double p) const {
    double best = 0, e = 1, run = 1;
    for (int k = 1; k <= std::min(most, max_); ++k) {
      e += (run *= p);
      best = std::max(best, Rate(step, k, k, e));
    }
    return best;
  }

  int max_;
  std::array<Bin, kBins> bins_{};
  Bin first_;  // acceptance of first drafts, whatever their confidence
  RoundTimeModel time_;
  int rounds_without_drafts_ = 0;
  int explore_every_ = kExploreEvery;
  // Exploratory rounds left, this one included: each drafts and verifies two, whatever
  // the model says. Set when the round's first draft is asked for.
  mutable int explore_left_ = 0;
};

}  // namespace

std::unique_ptr<DraftPolicy> MakeDraftPolicy(std::string_view spec, int adaptive_max) {
  if (spec == "adaptive") {
    if (adaptive_max < 1 || adaptive_max > 32)
      throw std::invalid_argument(fmt::format("draft policy: max drafts {} is outside 1..32", adaptive_max));
    return std::make_unique<AdaptivePolicy>(adaptive_max);
  }
  if (spec.starts_with("fixed:")) {
    int k = 0;
    const std::string_view digits = spec.substr(6);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), k);
    if (ec == std::errc() && end == digits.data() + digits.size() && k >= 1 && k <= 32) return std::make_unique<FixedPolicy>(k);
  }
  throw std::invalid_argument(fmt::format("draft policy '{}': expected fixed:K (K in 1..32) or adaptive", spec));
}

}  // namespace tandem::rt
