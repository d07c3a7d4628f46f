// One step of the scheduler: the decoding requests' drafts, one target forward over
// every decoding request's anchor and drafts plus the prompt chunks of prefilling ones,
// then sample-and-match and the commits.
#include <algorithm>
#include <new>

#include <fmt/format.h>

#include "runtime/draft/verification.hpp"
#include "runtime/serve/prefill_budget.hpp"
#include "runtime/serve/scheduler_state.hpp"

namespace tandem::rt {

// Tells a drafter that reads the target's hidden states about `count` committed rows
// of `a` (default: up to its fed positions) that start at `position`, row `row` of `out`.
void Scheduler::State::Observe(Active& a, int position, std::size_t row, const ForwardOutput& out, std::size_t count) {
  if (!drafter || !drafter->wants_target_hidden()) return;
  if (count == 0) count = static_cast<std::size_t>(a.fed - position);
  const auto hidden = static_cast<std::size_t>(engine.hidden_size());
  std::vector<TokenId> tokens(count);
  for (std::size_t i = 0; i < count; ++i) tokens[i] = a.tokens[static_cast<std::size_t>(position) + i];
  drafter->ObserveTarget(a.sequence, position, tokens, out.hidden.data() + row * hidden, engine.kv().Get(a.sequence).capacity());
}

std::span<const float> Scheduler::State::Constrain(const JsonMatcher& m, std::span<const float> logits) {
  // One buffer serves every row: each constrained row is sampled before the next is asked for.
  masked.assign(logits.begin(), logits.end());
  trie.Mask(m, options.eos, masked);
  return masked;
}

// request's remaining tokens (every verified draft may be emitted, plus one) and its
// KV capacity, then lets the policy choose how many of each to verify.
void Scheduler::State::Draft(const std::vector<Active*>& decoding, StepShape step, std::vector<rt::Draft>& drafts,
                             DraftRoundTiming& timing) {
  drafts.assign(decoding.size(), {});
  if (!drafter || decoding.empty()) return;
  std::vector<std::vector<TokenId>> contexts(decoding.size());
  std::vector<DraftRequest> requests(decoding.size());
  // A structured output drafts under its grammar (the target's rows are masked too, so
  // a refused token could never be accepted), and stops drafting past a token the
  // grammar or the think block's end would cut off anyway: each draft costs a forward.
  struct Guide {
    std::optional<JsonMatcher> path;  // the grammar state after the drafts checked so far
    std::size_t checked = 0;
    bool refused = false;
  };
  std::vector<Guide> guides(decoding.size());  // a grammar's state is copied only for a request that drafts
  auto allowed = [&](std::size_t i, const rt::Draft& so_far) {
    Guide& g = guides[i];
    for (; g.checked < so_far.tokens.size() && !g.refused; ++g.checked) {
      const TokenId t = so_far.tokens[g.checked];
      if (decoding[i]->reasoning()) {
        g.refused = t == decoding[i]->submission.think_end;
      } else if (g.path) {
        g.refused = !trie.Eligible(t) || !g.path->Accept(tokenizer.TokenBytes(t));
      }
    }
    return !g.refused;
  };
  const rt::DraftMask mask = [&](std::size_t i, const rt::Draft& so_far, std::span<const float> logits) {
    return allowed(i, so_far) ? Constrain(*guides[i].path, logits) : logits;
  };
  // Ask before the first draft too: a draft that will not pay should not be computed.
  const bool first_pays = policy->More(rt::Draft{}, step);
  for (std::size_t i = 0; i < decoding.size(); ++i) {
    Active& a = *decoding[i];
    const int capacity = engine.kv().Get(a.sequence).capacity();
    const int room = std::min(a.submission.max_new_tokens - a.generated - 1, capacity - 1 - a.fed);
    const int most = room > 0 && first_pays ? std::min(policy->MaxDrafts(), room) : 0;
    if (most > 0) {  // the context is copied only for a request that drafts
      contexts[i].assign(a.tokens.begin(), a.tokens.begin() + a.fed);
      contexts[i].push_back(a.pending);
      if (const JsonMatcher* g = a.Grammar()) guides[i].path.emplace(*g);
    }
    requests[i] = {a.sequence, contexts[i], most, capacity, &a.submission.sampling, guides[i].path ? &mask : nullptr};
  }
  const auto start = Clock::now();
  drafter->Propose(
      requests, [&](std::size_t i, const rt::Draft& d) { return allowed(i, d) && policy->More(d, step); }, drafts);
  timing.draft_s = std::chrono::duration<double>(Clock::now() - start).count();
  timing.work = drafter->last_work();
  for (std::size_t i = 0; i < drafts.size(); ++i) {
    rt::Draft& d = drafts[i];
    timing.drafted = std::max(timing.drafted, static_cast<int>(d.tokens.size()));
    std::size_t keep = std::min(policy->Choose(d, step), d.tokens.size());
    // Drafts stop before the end of a think block (the grammar starts there), and a
    // structured output's at the first token its grammar refuses (a drafter need not
    // have asked the mask: prompt lookup copies tokens): a refused one only wastes a row.
    if (!allowed(i, d)) keep = std::min(keep, guides[i].checked - 1);
    d.tokens.resize(keep);
    d.confidence.resize(keep);
  }
}

std::string Scheduler::State::Emit(Active& a, TokenId token, bool last) {
  ++a.generated;
  // A structured output ends where its grammar allowed the end token.
  if (token == options.eos && (!a.submission.ignore_eos || a.matcher)) return "stop";
  const bool thinking = a.reasoning();
  for (ReplyText::Piece& p : a.text->Push(token)) a.stream->Push({StreamEvent::Kind::kDelta, std::move(p.text), p.reasoning});
  // Stop strings and the grammar apply to the content, not to the think block.
  if (!thinking) {
    if (a.text->stopped()) return "stop";
    if (a.matcher) {
      a.matcher->Accept(tokenizer.TokenBytes(token));  // sampled under its mask: accepted
      if (a.matcher->Complete() && !a.matcher->CanContinue()) return "stop";
    }
  }
  if (a.generated >= a.submission.max_new_tokens) return "length";
  // The last token emitted is fed next step: it needs a KV position.
  if (last && a.fed >= engine.kv().Get(a.sequence).capacity()) return "length";
  return "";
}

// The rows of one step, decoding requests first (each one's anchor, then its drafts:
// all with logits), then the prompt chunks of prefilling ones.
struct Scheduler::State::Batch {
  std::vector<Active*> decoding;
  std::vector<rt::Draft> drafts;       // per decoding request
  std::vector<Active*> prefill_owner;  // per prompt-chunk row
  std::vector<Row> rows;
  std::size_t decode_rows = 0;  // rows[0, decode_rows) are the decoding requests'
  DraftRoundTiming timing;
};

void Scheduler::State::DropCancelled() {
  for (auto it = active.begin(); it != active.end();) {
    if (it->stream->cancelled()) {
      Close(*it);
      it = active.erase(it);
      std::lock_guard lock(mutex);
      ++counters.cancelled;
    } else {
      ++it;
    }
  }
}

using scheduling::Failure;

void Scheduler::State::ReserveCaches() {
  const int drafts = drafter && policy ? policy->MaxDrafts() : 0;
  for (auto it = active.begin(); it != active.end();) {
    KvCache& kv = engine.kv().Get(it->sequence);
    // A prompt is computed in chunks of at most the rest of it; a decoding step writes the anchor and its drafts.
    const int end = it->fed < it->prompt_length ? it->prompt_length : it->fed + 1 + drafts;
    std::string failure;
    try {
      WithinKvBudget([&] { kv.Reserve(std::min(kv.capacity(), end)); });
    } catch (const KvBudgetExhausted& e) {
      failure = e.what();
    } catch (const std::bad_alloc&) {
      failure = fmt::format("out of memory growing the KV cache to {} positions", end);
    }
    if (failure.empty()) {
      ++it;
      continue;
    }
    it->stream->Push(Failure(503, fmt::format("the request was stopped: {}", failure), "server_error", 1));
    Close(*it);
    it = active.erase(it);
    std::lock_guard lock(mutex);
    ++counters.failed;
  }
}

bool Scheduler::State::BuildBatch(Batch& b) {
  std::vector<Active*> prefilling;
  for (Active& a : active) (a.fed < a.prompt_length ? prefilling : b.decoding).push_back(&a);
  // Prompt chunks round-robin within the step's budget (PrefillBudget).
  std::vector<Row> prefill_rows;
  int budget = PrefillBudget(options.prefill_chunk, prefilling.size(), b.decoding.size());
  for (std::size_t i = 0; i < prefilling.size() && budget > 0; ++i) {
    Active& a = *prefilling[(prefill_turn + i) % prefilling.size()];
    const int n = std::min(budget, a.prompt_length - a.fed);
    for (int k = 0; k < n; ++k) {
      const int position = a.fed + k;
      prefill_rows.push_back({a.sequence, position, a.tokens[static_cast<std::size_t>(position)], position + 1 == a.prompt_length});
      b.prefill_owner.push_back(&a);
    }
    budget -= n;
  }
  if (!prefilling.empty()) prefill_turn = (prefill_turn + 1) % prefilling.size();

  try {
    Draft(b.decoding, StepShape{static_cast<int>(b.decoding.size() + prefill_rows.size()), static_cast<int>(b.decoding.size())}, b.drafts,
          b.timing);
  } catch (const std::exception& e) {
    FailEverything(fmt::format("the drafter failed: {}", e.what()));
    return false;
  }

  for (std::size_t i = 0; i < b.decoding.size(); ++i) {
    const Active& a = *b.decoding[i];
    b.rows.push_back({a.sequence, a.fed, a.pending, true});
    for (std::size_t j = 0; j < b.drafts[i].tokens.size(); ++j) {
      b.rows.push_back({a.sequence, a.fed + 1 + static_cast<int>(j), b.drafts[i].tokens[j], true});
    }
  }
  b.decode_rows = b.rows.size();
  b.rows.insert(b.rows.end(), prefill_rows.begin(), prefill_rows.end());
  decode_share = b.rows.empty() ? 0 : static_cast<double>(b.decode_rows) / static_cast<double>(b.rows.size());
  return true;
}

std::size_t Scheduler::State::CommitDecodeRows(const Batch& b, const ForwardOutput& out, Finished& finished) {
  const int vocab = engine.vocab_size();
  // Accept the drafts the target agrees with, roll back the rest.
  std::size_t logits_row = 0;
  for (std::size_t i = 0; i < b.decoding.size(); ++i) {
    Active& a = *b.decoding[i];
    const rt::Draft& d = b.drafts[i];
    const std::size_t first = logits_row;  // decode rows all have logits: row index = logits index
    logits_row += 1 + d.tokens.size();
    // Structured output: row j is masked by the grammar state after drafts 0 … j−1.
    // Rows are asked for in order and only until a draft is refused, so one state,
    // advanced a draft at a time, serves them all (a copy only when there are drafts).
    const JsonMatcher* grammar = a.Grammar();
    std::optional<JsonMatcher> advanced;
    const VerifiedTokens v = VerifyDrafts(
        [&](std::size_t j) {
          const std::span<const float> logits = out.LogitsOf(first + j, vocab);
          if (grammar == nullptr) return logits;
          if (j > 0) {
            if (!advanced) advanced.emplace(*grammar);
            advanced->Accept(tokenizer.TokenBytes(d.tokens[j - 1]));
          }
          return Constrain(advanced ? *advanced : *grammar, logits);
        },
        d.tokens, a.submission.sampling, a.fed + 1);
    {
      std::lock_guard lock(mutex);
      counters.draft.Count(d.tokens.size(), static_cast<std::size_t>(v.accepted));
    }
    if (drafter && !d.tokens.empty()) policy->ObserveAcceptance(d, d.tokens.size(), static_cast<std::size_t>(v.accepted));
    // Commit: the anchor and the accepted drafts are now part of the sequence; the
    // KV written for rejected drafts is dropped.
    a.tokens.resize(static_cast<std::size_t>(a.fed));
    a.tokens.push_back(a.pending);
    a.tokens.insert(a.tokens.end(), d.tokens.begin(), d.tokens.begin() + v.accepted);
    a.fed += 1 + v.accepted;
    engine.kv().Get(a.sequence).Truncate(a.fed);
    Observe(a, a.fed - 1 - v.accepted, first, out);
    std::string reason;
    for (std::size_t t = 0; t < v.emitted.size() && reason.empty(); ++t) reason = Emit(a, v.emitted[t], t + 1 == v.emitted.size());
    if (reason.empty()) {
      a.pending = v.emitted.back();
    } else {
      finished.emplace_back(&a, reason);
    }
  }
  return logits_row;
}

void Scheduler::State::CommitPrefillRows(const Batch& b, const ForwardOutput& out, std::size_t logits_row, Finished& finished) {
  const int vocab = engine.vocab_size();
  // Positions advance; the request whose prompt ended samples its first token.
  const std::size_t n_rows = b.rows.size() - b.decode_rows;
  for (std::size_t i = 0; i < n_rows; ++i) {
    Active& a = *b.prefill_owner[i];
    if (i == 0 || b.prefill_owner[i - 1] != &a) {
      std::size_t n = 1;
      while (i + n < n_rows && b.prefill_owner[i + n] == &a) ++n;
      Observe(a, a.fed, b.decode_rows + i, out, n);
    }
    ++a.fed;
    if (!b.rows[b.decode_rows + i].logits) continue;
    const std::span<const float> logits = out.LogitsOf(logits_row++, vocab);
    const TokenId token = Sample(a.Grammar() ? Constrain(*a.Grammar(), logits) : logits, a.submission.sampling, a.fed);
    {
      std::lock_guard lock(mutex);
      counters.draft.Count(0, 0);
    }
    const std::string reason = Emit(a, token, true);
    if (reason.empty()) {
      a.pending = token;
    } else {
      finished.emplace_back(&a, reason);
    }
  }
}

// One step: drafts for the decoding requests, then one target forward over every
// decoding request's anchor and drafts plus the prompt chunks of prefilling ones
// (one worker round trip per MoE layer for all of it), then sample-and-match.
bool Scheduler::State::Step() {
  // Cancelled streams free their slot at the step boundary.
  DropCancelled();
  ReserveCaches();
  if (active.empty()) return false;
  Batch b;
  if (!BuildBatch(b)) return false;

  ForwardOutput out;
  const auto verify_start = Clock::now();
  try {
    engine.Forward(b.rows, out);
  } catch (const std::exception& e) {
    FailEverything(fmt::format("the engine failed: {}", e.what()));
    return false;
  }
  b.timing.verify_s = std::chrono::duration<double>(Clock::now() - verify_start).count();
  b.timing.rows = static_cast<int>(b.rows.size());
  {
    std::lock_guard lock(mutex);
    ++counters.steps;
    counters.rows += b.rows.size();
    counters.decode_rows += b.decode_rows;
    counters.prefill_rows += b.rows.size() - b.decode_rows;
    if (!b.decoding.empty()) ++counters.draft.rounds;
  }
  if (drafter && !b.decoding.empty()) policy->ObserveRound(b.timing);

  Finished finished;
  const std::size_t logits_row = CommitDecodeRows(b, out, finished);
  CommitPrefillRows(b, out, logits_row, finished);
  for (auto& [a, reason] : finished) Finish(*a, reason);
  active.remove_if(
      [&](const Active& a) { return std::any_of(finished.begin(), finished.end(), [&](const auto& f) { return f.first == &a; }); });
  return true;
}

}  // namespace tandem::rt
