#include "runtime/draft/replica_drafter.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace tandem::rt {

ReplicaDrafter::ReplicaDrafter(const Checkpoint& ckpt, ThreadPool* pool, const Engine::ExpertExecutorFactory& experts, std::string name,
                               std::optional<QuantFormat> quantize, int group)
    : name_(std::move(name)), engine_(ckpt, EngineOptions{.pool = pool, .quantize = quantize, .quantize_group = group}, experts) {}

ReplicaDrafter::~ReplicaDrafter() = default;

void ReplicaDrafter::Forget(SequenceId sequence) {
  if (engine_.kv().Contains(sequence)) engine_.kv().Close(sequence);
  fed_.erase(sequence);
}

void ReplicaDrafter::Propose(std::span<const DraftRequest> requests, const DraftMore& more, std::vector<Draft>& drafts) {
  drafts.assign(requests.size(), {});
  const int vocab = engine_.config().vocab_size;
  // Bring each drafting request's cache up to its committed context (what was
  // drafted beyond it last time and rejected is dropped here), the anchor last.
  rows_.clear();
  std::vector<std::size_t> drafting;
  for (std::size_t r = 0; r < requests.size(); ++r) {
    const DraftRequest& q = requests[r];
    if (q.max_drafts <= 0 || q.context.empty()) continue;
    if (!engine_.kv().Contains(q.sequence)) engine_.kv().Open(q.sequence, q.capacity);
    std::vector<TokenId>& fed = fed_[q.sequence];
    const std::size_t anchor = q.context.size() - 1;
    const auto common = static_cast<std::size_t>(
        std::mismatch(fed.begin(), fed.begin() + static_cast<std::ptrdiff_t>(std::min(fed.size(), anchor)), q.context.begin()).first -
        fed.begin());
    fed.resize(common);
    engine_.kv().Get(q.sequence).Truncate(static_cast<int>(common));
    for (std::size_t i = common; i <= anchor; ++i) {
      rows_.push_back({q.sequence, static_cast<std::int32_t>(i), q.context[i], i == anchor});
      fed.push_back(q.context[i]);
    }
    drafting.push_back(r);
  }
  // Then one row per drafting request per step, each fed the token drafted last.
  work_ = {};
  work_.catchup_rows = static_cast<int>(rows_.size());
  while (!drafting.empty()) {
    const auto start = std::chrono::steady_clock::now();
    engine_.Forward(rows_, out_);
    work_.Record(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    rows_.clear();
    std::vector<std::size_t> still;
    for (std::size_t j = 0; j < drafting.size(); ++j) {
      const DraftRequest& q = requests[drafting[j]];
      Draft& d = drafts[drafting[j]];
      if (!AppendDraft(q, drafting[j], out_.LogitsOf(j, vocab), more, d)) continue;
      // Feed the token just drafted (it sits at index context + drafts − 1).
      const auto index = static_cast<std::int32_t>(q.context.size() + d.tokens.size() - 1);
      rows_.push_back({q.sequence, index, d.tokens.back(), true});
      fed_[q.sequence].push_back(d.tokens.back());
      still.push_back(drafting[j]);
    }
    drafting = std::move(still);
  }
}

}  // namespace tandem::rt
