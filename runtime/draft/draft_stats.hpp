#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tandem::rt {

// Lifetime counters of speculative decoding, for /v1/stats `draft`.
struct DraftStats {
  std::uint64_t rounds = 0;          // target steps that verified at least one request
  std::uint64_t request_rounds = 0;  // a request's tokens decided by one step (0 or more drafts)
  std::uint64_t verified_drafts = 0;
  std::uint64_t accepted_drafts = 0;
  std::vector<std::uint64_t> verified_at, accepted_at;  // by draft position (index 0: the first draft)
  std::map<std::size_t, std::uint64_t> lengths;         // drafts verified → request rounds

  void Count(std::size_t verified, std::size_t accepted);
  void Describe(nlohmann::json& out) const;  // counters, per-position acceptance, length histogram
};

}  // namespace tandem::rt
