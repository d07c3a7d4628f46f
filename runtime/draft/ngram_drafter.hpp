#pragma once

#include "runtime/draft/drafter.hpp"

namespace tandem::rt {

// Prompt lookup: finds the latest earlier occurrence of the request's last n tokens
// (n from max_n down to min_n) in its own context and proposes what followed it.
// Free to compute; pays off on outputs that copy from the prompt (code edits,
// extraction, JSON echoing fields).
class NgramDrafter : public Drafter {
 public:
  // Throws std::invalid_argument unless 1 ≤ min_n ≤ max_n.
  NgramDrafter(int min_n, int max_n);

  std::string_view name() const override { return "ngram"; }
  void Propose(std::span<const DraftRequest> requests, const DraftMore& more, std::vector<Draft>& drafts) override;

 private:
  int min_n_, max_n_;
};

}  // namespace tandem::rt
