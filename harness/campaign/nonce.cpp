#include "harness/campaign/nonce.hpp"

#include <fmt/format.h>

#include "common/input_error.hpp"
#include "harness/campaign/session_plan.hpp"

namespace tandem::harness {

namespace {

// A bijection on [0, n): a 4-round Feistel network on the smallest even power of two
// ≥ n, keyed by `seed`, with cycle-walking to stay inside [0, n).
std::uint64_t Permute(std::uint64_t x, std::uint64_t n, std::uint64_t seed) {
  int bits = 2;
  while ((std::uint64_t{1} << bits) < n) bits += 2;
  const int half = bits / 2;
  const std::uint64_t mask = (std::uint64_t{1} << half) - 1;
  do {
    std::uint64_t left = x >> half, right = x & mask;
    for (std::uint64_t round = 0; round < 4; ++round) {
      const std::uint64_t f = Mix64(seed ^ (round << 56) ^ right) & mask;
      const std::uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    x = (left << half) | right;
  } while (x >= n);
  return x;
}

bool IsWord(std::string_view s) {
  if (s.size() < 4 || s.size() > 12) return false;
  for (char ch : s) {
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))) return false;
  }
  return true;
}

}  // namespace

NonceBook::NonceBook(const rt::Tokenizer& tokenizer, int workloads) : workloads_(std::max(workloads, 1)) {
  for (rt::TokenId id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.IsAdded(id)) continue;
    const std::string text(tokenizer.TokenBytes(id));
    // "Word" or " word": both start a prompt as exactly that token.
    if (!IsWord(text) && !(text.size() > 1 && text[0] == ' ' && IsWord(std::string_view(text).substr(1)))) continue;
    // The word must be its own first token, also when the prompt follows it.
    const std::vector<rt::TokenId> alone = tokenizer.Encode(text + ": x");
    if (alone.empty() || alone.front() != id) continue;
    words_.emplace_back(id, text);
  }
  range_ = words_.size() / static_cast<std::size_t>(workloads_);
  if (range_ == 0) {
    throw InputError(
        fmt::format("the tokenizer has only {} whole-word tokens: too few nonce markers for {} workloads", words_.size(), workloads_));
  }
}

std::size_t NonceBook::Index(int workload, std::uint64_t seed, std::uint64_t position) const {
  if (workload < 0 || workload >= workloads_) throw InputError(fmt::format("nonce: workload {} out of range", workload));
  if (position >= range_) {
    throw InputError(fmt::format("nonce: a workload may send {} requests per session with this tokenizer; request {} is one too many",
                                 range_, position + 1));
  }
  return static_cast<std::size_t>(workload) * range_ + Permute(position, range_, seed);
}

std::string NonceBook::Marker(int workload, std::uint64_t seed, std::uint64_t position) const {
  return words_[Index(workload, seed, position)].second + ": ";
}

rt::TokenId NonceBook::MarkerToken(int workload, std::uint64_t seed, std::uint64_t position) const {
  return words_[Index(workload, seed, position)].first;
}

}  // namespace tandem::harness
