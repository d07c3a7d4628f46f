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

class FixedPolicy : public DraftPolicy {
 public:
  explicit FixedPolicy(int k) : k_(k) {}
  std::string name() const override { return fmt::format("fixed:{}", k_); }
  int MaxDrafts() const override { return k_; }
  bool More(const Draft& so_far, int) const override { return static_cast<int>(so_far.tokens.size()) < k_; }
  std::size_t Choose(const Draft& draft, int) const override { return draft.tokens.size(); }
  void ObserveAcceptance(const Draft&, std::size_t, std::size_t) override {}
  void ObserveRound(const DraftRoundTiming&) override {}
  void Describe(nlohmann::json& out) const override { out["k"] = k_; }

 private:
  int k_;
};

// Maximises expected emitted tokens per second, per request and step:
//   E(k) = 1 + Σ_{i≤k} Π_{m≤i} p(c_m)    (expected tokens a round emits)
//   T(k) = V(base_rows + k) + d · k       (time of the round)
// p(c): the acceptance probability of a draft the drafter gave confidence c, learned
// online per confidence bin (a bin starts at its own confidence, worth 4 drafts of
// evidence, so an uncalibrated drafter is taken at its word until data arrives).
// V(rows) = a + b·rows: the target's verification step, fitted by exponentially
// weighted least squares over measured steps (with a weak prior on b, since most
// steps have similar row counts); d: the drafter's time per sequential forward.
// The number of remote MoE layers is fixed for a process, so it lives in a and b.
class AdaptivePolicy : public DraftPolicy {
 public:
  explicit AdaptivePolicy(int max) : max_(max) {}
  std::string name() const override { return "adaptive"; }
  int MaxDrafts() const override { return max_; }

  bool More(const Draft& so_far, int base_rows) const override {
    const std::size_t j = so_far.tokens.size();
    if (static_cast<int>(j) >= max_) return false;
    double e = 1, p = 1;
    for (std::size_t i = 0; i < j; ++i) e += (p *= Accept(so_far.confidence[i]));
    // The next draft is taken to be like the last; the first like first drafts so far.
    const double next = j == 0 ? (first_.accepted + 1) / (first_.verified + 2) : Accept(so_far.confidence[j - 1]);
    const double t = RoundTime(base_rows, static_cast<int>(j), static_cast<int>(j));
    const double t_next = RoundTime(base_rows, static_cast<int>(j) + 1, static_cast<int>(j) + 1);
    return (e + p * next) / t_next > e / t;
  }

  std::size_t Choose(const Draft& draft, int base_rows) const override {
    const auto drafted = static_cast<int>(draft.tokens.size());
    double e = 1, p = 1;
    double best = 1 / RoundTime(base_rows, 0, drafted);
    std::size_t best_k = 0;
    for (int k = 1; k <= drafted; ++k) {
      e += (p *= Accept(draft.confidence[static_cast<std::size_t>(k - 1)]));
      const double rate = e / RoundTime(base_rows, k, drafted);  // drafting is spent either way
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
    const double measured = t.draft_s + t.verify_s;
    if (rounds_ >= kWarmRounds && measured > 0) {
      const double predicted = VerifyTime(t.rows) + draft_per_iteration_ * t.draft_iterations;
      error_sum_ += std::abs(predicted - measured) / measured;
      ++error_count_;
    }
    ++rounds_;
    // Exponentially weighted sums for V(rows). Acceptance evidence fades too, so a
    // policy that stopped drafting drifts back to its prior and tries again.
    for (double* s : {&w_, &wx_, &wy_, &wxx_, &wxy_, &first_.verified, &first_.accepted}) *s *= kDecay;
    for (Bin& b : bins_) {
      b.verified *= kDecay;
      b.accepted *= kDecay;
    }
    const double x = t.rows, y = t.verify_s;
    w_ += 1;
    wx_ += x;
    wy_ += y;
    wxx_ += x * x;
    wxy_ += x * y;
    if (t.draft_iterations > 0) {
      const double per = t.draft_s / t.draft_iterations;
      draft_per_iteration_ = draft_seen_ ? kDecay * draft_per_iteration_ + (1 - kDecay) * per : per;
      draft_seen_ = true;
    }
  }

  void Describe(nlohmann::json& out) const override {
    out["max_drafts"] = max_;
    out["round_time_model"] = {{"verify_intercept_ms", Intercept() * 1e3},
                               {"verify_per_row_ms", Slope() * 1e3},
                               {"draft_per_forward_ms", draft_per_iteration_ * 1e3},
                               {"rounds_observed", rounds_}};
    out["round_time_prediction_mare"] = error_count_ > 0 ? nlohmann::json(error_sum_ / static_cast<double>(error_count_)) : nlohmann::json(nullptr);
    nlohmann::json bins = nlohmann::json::array();
    for (std::size_t i = 0; i < bins_.size(); ++i) {
      if (bins_[i].verified == 0) continue;
      bins.push_back({{"confidence_from", static_cast<double>(i) / kBins},
                      {"confidence_to", static_cast<double>(i + 1) / kBins},
                      {"verified", bins_[i].verified},
                      {"accepted", bins_[i].accepted}});
    }
    out["calibration"] = bins;
  }

 private:
  static constexpr int kBins = 10;
  static constexpr double kPrior = 4;   // drafts of evidence a bin's own confidence is worth
  static constexpr double kDecay = 0.98;
  static constexpr int kWarmRounds = 8;  // rounds before the prediction error counts

  struct Bin {
    double verified = 0, accepted = 0;
  };

  static std::size_t BinOf(float c) { return static_cast<std::size_t>(std::clamp(static_cast<int>(c * kBins), 0, kBins - 1)); }

  double Accept(float confidence) const {
    const Bin& b = bins_[BinOf(confidence)];
    return (b.accepted + kPrior * confidence) / (b.verified + kPrior);
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
  double VerifyTime(int rows) const { return Intercept() + Slope() * rows; }
  double RoundTime(int base_rows, int verified, int drafted) const {
    const double d = draft_seen_ ? draft_per_iteration_ : 0.1 * VerifyTime(base_rows + 1);
    return VerifyTime(base_rows + 1 + verified) + d * drafted;
  }

  int max_;
  std::array<Bin, kBins> bins_{};
  Bin first_;  // acceptance of first drafts, whatever their confidence
  double w_ = 0, wx_ = 0, wy_ = 0, wxx_ = 0, wxy_ = 0;
  double draft_per_iteration_ = 0;
  bool draft_seen_ = false;
  std::uint64_t rounds_ = 0;
  double error_sum_ = 0;
  std::uint64_t error_count_ = 0;
};

}  // namespace

std::unique_ptr<DraftPolicy> MakeDraftPolicy(std::string_view spec, int adaptive_max) {
  if (spec == "adaptive") {
    if (adaptive_max < 1 || adaptive_max > 32) throw std::invalid_argument(fmt::format("draft policy: max drafts {} is outside 1..32", adaptive_max));
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
