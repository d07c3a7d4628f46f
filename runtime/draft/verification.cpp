#include "runtime/draft/verification.hpp"

namespace tandem::rt {

VerifiedTokens VerifyDrafts(const std::function<std::span<const float>(std::size_t row)>& logits, std::span<const TokenId> drafts,
                            const SamplingParams& sampling, std::int64_t first_index) {
  VerifiedTokens v;
  for (std::size_t j = 0; j <= drafts.size(); ++j) {
    const TokenId token = Sample(logits(j), sampling, first_index + static_cast<std::int64_t>(j));
    v.emitted.push_back(token);
    if (j == drafts.size() || drafts[j] != token) break;
    ++v.accepted;
  }
  return v;
}

}  // namespace tandem::rt
