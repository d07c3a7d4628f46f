#include "runtime/draft/ngram_drafter.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace tandem::rt {

NgramDrafter::NgramDrafter(int min_n, int max_n) : min_n_(min_n), max_n_(max_n) {
  if (min_n < 1 || max_n < min_n) throw std::invalid_argument(fmt::format("ngram drafter: need 1 ≤ min ({}) ≤ max ({})", min_n, max_n));
}

void NgramDrafter::Propose(std::span<const DraftRequest> requests, const DraftMore& more, std::vector<Draft>& drafts) {
  drafts.assign(requests.size(), {});
  for (std::size_t r = 0; r < requests.size(); ++r) {
    const DraftRequest& req = requests[r];
    const std::span<const TokenId> ctx = req.context;
    const auto length = static_cast<std::ptrdiff_t>(ctx.size());
    if (req.max_drafts <= 0) continue;
    for (auto n = std::min<std::ptrdiff_t>(max_n_, length - 1); n >= min_n_; --n) {
      const auto pattern = ctx.subspan(static_cast<std::size_t>(length - n));
      // The latest start s < length − n whose n tokens equal the suffix (so at least
      // one token follows the match).
      std::ptrdiff_t found = -1;
      for (std::ptrdiff_t s = length - n - 1; s >= 0; --s) {
        if (std::equal(pattern.begin(), pattern.end(), ctx.begin() + s)) {
          found = s;
          break;
        }
      }
      if (found < 0) continue;
      // Longer matches predict better; the policy calibrates what this is worth.
      const float confidence = static_cast<float>(n) / static_cast<float>(max_n_ + 1);
      Draft& d = drafts[r];
      for (std::ptrdiff_t i = found + n; i < length && static_cast<int>(d.tokens.size()) < req.max_drafts; ++i) {
        d.tokens.push_back(ctx[static_cast<std::size_t>(i)]);
        d.confidence.push_back(confidence);
        if (!more(r, d)) break;
      }
      break;
    }
  }
}

}  // namespace tandem::rt
