#include "runtime/draft/draft_stats.hpp"

#include <nlohmann/json.hpp>

namespace tandem::rt {

void DraftStats::Count(std::size_t verified, std::size_t accepted) {
  ++request_rounds;
  verified_drafts += verified;
  accepted_drafts += accepted;
  if (verified_at.size() < verified) {
    verified_at.resize(verified, 0);
    accepted_at.resize(verified, 0);
  }
  for (std::size_t i = 0; i < verified; ++i) {
    ++verified_at[i];
    if (i < accepted) ++accepted_at[i];
  }
  ++lengths[verified];
}

void DraftStats::Describe(nlohmann::json& out) const {
  out["rounds"] = rounds;
  out["request_rounds"] = request_rounds;
  out["verified_drafts"] = verified_drafts;
  out["accepted_drafts"] = accepted_drafts;
  out["acceptance_rate"] = verified_drafts > 0 ? nlohmann::json(static_cast<double>(accepted_drafts) / static_cast<double>(verified_drafts))
                                               : nlohmann::json(nullptr);
  out["tokens_per_request_round"] =
      request_rounds > 0 ? nlohmann::json(static_cast<double>(accepted_drafts + request_rounds) / static_cast<double>(request_rounds))
                         : nlohmann::json(nullptr);
  nlohmann::json positions = nlohmann::json::array();
  for (std::size_t i = 0; i < verified_at.size(); ++i) {
    positions.push_back({{"position", i + 1},
                         {"verified", verified_at[i]},
                         {"accepted", accepted_at[i]},
                         {"rate", verified_at[i] > 0 ? static_cast<double>(accepted_at[i]) / static_cast<double>(verified_at[i]) : 0.0}});
  }
  out["per_position"] = positions;
  nlohmann::json histogram = nlohmann::json::object();
  for (const auto& [k, n] : lengths) histogram[std::to_string(k)] = n;
  out["draft_length_histogram"] = histogram;
}

}  // namespace tandem::rt
