#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/tokenizer.hpp"

namespace tandem::harness {

// Prompt markers that keep a session's requests from sharing a prompt prefix (which
// the server's prefix cache would otherwise turn into free tokens). A marker is one
// vocabulary word followed by ": "; its word is a single token that also starts the
// encoded prompt. The words are split into disjoint ranges, one per workload of a
// session, and a workload's marker at position p is range[P_seed(p)], P a seeded
// permutation, so markers are unique among the session's requests and each is a
// pure function of (workload, seed, position): any request can be replayed alone.
class NonceBook {
 public:
  // `workloads`: how many workloads share a session.
  NonceBook(const rt::Tokenizer& tokenizer, int workloads);

  std::size_t per_workload() const { return range_; }
  // Throws InputError when `position` is beyond the workload's range.
  std::string Marker(int workload, std::uint64_t seed, std::uint64_t position) const;
  rt::TokenId MarkerToken(int workload, std::uint64_t seed, std::uint64_t position) const;

 private:
  std::size_t Index(int workload, std::uint64_t seed, std::uint64_t position) const;

  std::vector<std::pair<rt::TokenId, std::string>> words_;
  std::size_t range_ = 0;
  int workloads_ = 0;
};

}  // namespace tandem::harness
