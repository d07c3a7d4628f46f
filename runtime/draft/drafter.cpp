#include "runtime/draft/drafter.hpp"

namespace tandem::rt {

bool AppendDraft(const DraftRequest& q, std::size_t request, std::span<const float> logits, const DraftMore& more, Draft& draft) {
  const auto index = static_cast<std::int64_t>(q.context.size() + draft.tokens.size());
  if (q.mask != nullptr) logits = (*q.mask)(request, draft, logits);
  const TokenId token = Sample(logits, *q.sampling, index);
  draft.tokens.push_back(token);
  draft.confidence.push_back(Probability(logits, token));
  return static_cast<int>(draft.tokens.size()) < q.max_drafts && more(request, draft);
}

}  // namespace tandem::rt
