#include "runtime/draft/mtp_drafter.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "runtime/kernels/ops.hpp"
#include "runtime/model/checkpoint.hpp"

namespace tandem::rt {

MtpDrafter::MtpDrafter(const Checkpoint& ckpt, ThreadPool* pool, const Engine::ExpertExecutorFactory& experts)
    : engine_(ckpt, EngineOptions{.pool = pool, .keep_hidden = true, .mtp = true}, experts),
      final_norm_(ckpt.Vector("model.norm.weight", ckpt.config().hidden_size)),
      eps_(static_cast<float>(ckpt.config().rms_norm_eps)),
      hidden_(ckpt.config().hidden_size) {}

MtpDrafter::~MtpDrafter() = default;

void MtpDrafter::Forget(SequenceId sequence) {
  if (engine_.kv().Contains(sequence)) engine_.kv().Close(sequence);
  sequences_.erase(sequence);
}

void MtpDrafter::ObserveTarget(SequenceId sequence, int position, std::span<const TokenId> tokens, const float* hidden, int capacity) {
  Sequence& s = sequences_[sequence];
  if (s.first < 0 || position != s.observed) {
    // New, or a gap (a cached prefix the target never computed here): start over.
    if (engine_.kv().Contains(sequence)) engine_.kv().Close(sequence);
    engine_.kv().Open(sequence, capacity);
    s = Sequence{};
    s.first = position + 1;  // the first MTP row needs the hidden of the row before it
    s.observed = position;
  }
  std::vector<float> normed(static_cast<std::size_t>(hidden_));
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const int q = position + static_cast<int>(i);
    if (q >= s.first) {
      s.pending_tokens.push_back(tokens[i]);
      s.pending_hidden.insert(s.pending_hidden.end(), s.last.begin(), s.last.end());
    }
    RmsNorm(hidden + static_cast<std::int64_t>(i) * hidden_, final_norm_.data(), 1, hidden_, eps_, normed.data());
    s.last = normed;
  }
  s.observed = position + static_cast<int>(tokens.size());
}

void MtpDrafter::Propose(std::span<const DraftRequest> requests, const DraftMore& more, std::vector<Draft>& drafts) {
  drafts.assign(requests.size(), {});
  const int vocab = engine_.config().vocab_size;
  const auto h = static_cast<std::size_t>(hidden_);
  rows_.clear();
  hidden_in_.clear();
  std::vector<std::size_t> drafting;
  // Committed rows first (dropping last step's speculative ones), then the anchor.
  for (std::size_t r = 0; r < requests.size(); ++r) {
    const DraftRequest& q = requests[r];
    const auto it = sequences_.find(q.sequence);
    if (q.max_drafts <= 0 || it == sequences_.end() || it->second.last.empty()) continue;
    Sequence& s = it->second;
    const int anchor = static_cast<int>(q.context.size()) - 1;
    if (s.observed != anchor) continue;  // out of step with the target: wait for the next observation
    engine_.kv().Get(q.sequence).Truncate(s.committed);
    for (std::size_t i = 0; i < s.pending_tokens.size(); ++i) {
      rows_.push_back({q.sequence, s.committed + static_cast<int>(i), s.pending_tokens[i], false});
      hidden_in_.insert(hidden_in_.end(), s.pending_hidden.begin() + static_cast<std::ptrdiff_t>(i * h),
                        s.pending_hidden.begin() + static_cast<std::ptrdiff_t>((i + 1) * h));
    }
    s.committed += static_cast<int>(s.pending_tokens.size());
    s.pending_tokens.clear();
    s.pending_hidden.clear();
    rows_.push_back({q.sequence, anchor - s.first, q.context.back(), true});
    hidden_in_.insert(hidden_in_.end(), s.last.begin(), s.last.end());
    drafting.push_back(r);
  }
  work_ = {};
  work_.catchup_rows = static_cast<int>(rows_.size());
  while (!drafting.empty()) {
    const auto start = std::chrono::steady_clock::now();
    engine_.Forward(rows_, out_, hidden_in_.data());
    work_.Record(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    std::vector<Row> next;
    std::vector<float> next_hidden;
    std::vector<std::size_t> still;
    for (std::size_t j = 0; j < drafting.size(); ++j) {
      const DraftRequest& q = requests[drafting[j]];
      Draft& d = drafts[drafting[j]];
      if (!AppendDraft(q, drafting[j], out_.LogitsOf(j, vocab), more, d)) continue;
      // Chain: the MTP's own output at this row stands in for the target's hidden.
      const std::size_t row = out_.logit_rows[j];
      next.push_back({q.sequence, rows_[row].position + 1, d.tokens.back(), true});
      next_hidden.insert(next_hidden.end(), out_.hidden.begin() + static_cast<std::ptrdiff_t>(row * h),
                         out_.hidden.begin() + static_cast<std::ptrdiff_t>((row + 1) * h));
      still.push_back(drafting[j]);
    }
    rows_ = std::move(next);
    hidden_in_ = std::move(next_hidden);
    drafting = std::move(still);
  }
}

}  // namespace tandem::rt
