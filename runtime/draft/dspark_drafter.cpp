#include "runtime/draft/dspark_drafter.hpp"

#include <chrono>
#include <cmath>

#include "runtime/engine/v41_dspark.hpp"
#include "runtime/engine/v41_engine.hpp"
#include "runtime/sampling/sampler.hpp"

namespace tandem::rt {

DSparkDrafter::DSparkDrafter(const V41Engine& target, ThreadPool* pool) : dspark_(std::make_unique<V41DSpark>(target, pool)) {}
DSparkDrafter::~DSparkDrafter() = default;

void DSparkDrafter::ObserveTarget(SequenceId sequence, int position, std::span<const TokenId> tokens, const float* hidden, int capacity) {
  KvCachePool& kv = dspark_->kv();
  // A gap (rows the scheduler did not report) starts the sequence's ring over from here.
  if (kv.Contains(sequence) && kv.Get(sequence).length() != position) dspark_->Close(sequence);
  if (!kv.Contains(sequence)) kv.Open(sequence, capacity);
  std::vector<Row> rows;
  for (std::size_t i = 0; i < tokens.size(); ++i) rows.push_back({sequence, position + static_cast<std::int32_t>(i), tokens[i], false});
  dspark_->Observe(rows, hidden);
}

void DSparkDrafter::Propose(std::span<const DraftRequest> requests, const DraftMore& more, std::vector<Draft>& drafts) {
  work_ = {};
  drafts.assign(requests.size(), {});
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& q = requests[i];
    if (q.max_drafts <= 0 || q.context.size() < 2 || !dspark_->kv().Contains(q.sequence)) continue;
    // The anchor is the token the target feeds next; DSpark drafts after it from the rows
    // before it, which must all have been observed.
    const auto anchor = static_cast<std::int64_t>(q.context.size()) - 1;
    if (dspark_->kv().Get(q.sequence).length() != anchor) continue;
    const auto t0 = std::chrono::steady_clock::now();
    Draft& draft = drafts[i];
    bool go_on = true;
    dspark_->Draft(q.sequence, anchor - 1, q.context.back(),
                   [&](int, std::span<const float> logits, float confidence) -> std::optional<TokenId> {
                     if (!go_on) return std::nullopt;
                     // As AppendDraft, but the confidence the policy weighs is DSpark's own.
                     const auto index = static_cast<std::int64_t>(q.context.size() + draft.tokens.size());
                     if (q.mask != nullptr) logits = (*q.mask)(i, draft, logits);
                     draft.tokens.push_back(Sample(logits, *q.sampling, index));
                     draft.confidence.push_back(1.0f / (1.0f + std::exp(-confidence)));
                     go_on = static_cast<int>(draft.tokens.size()) < q.max_drafts && more(i, draft);
                     return draft.tokens.back();
                   });
    work_.Record(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
}

void DSparkDrafter::Forget(SequenceId sequence) { dspark_->Close(sequence); }

}  // namespace tandem::rt
