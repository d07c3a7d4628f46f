#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "runtime/model/tokenizer.hpp"
#include "runtime/sampling/sampler.hpp"

namespace tandem::rt {

struct VerifiedTokens {
  std::vector<TokenId> emitted;  // the accepted drafts, then the target's own token
  int accepted = 0;              // drafts accepted (emitted.size() − 1)
};

// Sample-and-match over one request's verification rows: row j's logits (the anchor
// for j = 0, then draft j) give the target's token at index first_index + j, chosen
// exactly as without drafts (greedy, or the stateless (seed, index) draw). Drafts are
// accepted while they equal the target's choice; the first mismatch emits the
// target's token instead, and when every draft matches the last row adds a bonus
// token. So the tokens are the ones decoding without drafts produces, by construction.
VerifiedTokens VerifyDrafts(const std::function<std::span<const float>(std::size_t row)>& logits, std::span<const TokenId> drafts,
                            const SamplingParams& sampling, std::int64_t first_index);

}  // namespace tandem::rt
