#include "runtime/serve/scheduler.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <future>
#include <list>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/draft/draft_policy.hpp"
#include "runtime/draft/draft_stats.hpp"
#include "runtime/draft/drafter.hpp"
#include "runtime/draft/verification.hpp"
#include "runtime/engine/engine.hpp"
#include "runtime/grammar/json_matcher.hpp"
#include "runtime/grammar/token_mask.hpp"
#include "runtime/serve/api_error.hpp"
#include "runtime/serve/prefix_cache.hpp"
#include "runtime/serve/reply_text.hpp"

namespace tandem::rt {

namespace {

using Clock = std::chrono::steady_clock;

StreamEvent Failure(int status, std::string message, std::string type, int retry_after_s = 0) {
  StreamEvent e;
  e.kind = StreamEvent::Kind::kFailed;
  e.status = status;
  e.text = std::move(message);
  e.error_type = std::move(type);
  e.retry_after_s = retry_after_s;
  return e;
}

struct Counters {
  std::uint64_t completed = 0, cancelled = 0, failed = 0, invalid = 0;
  std::uint64_t rejected_queue_full = 0, rejected_queue_timeout = 0, rejected_unavailable = 0;
  std::uint64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
  std::uint64_t steps = 0, rows = 0, prefill_rows = 0, decode_rows = 0;
  std::uint64_t admitted = 0, admitted_after_wait = 0, queue_wait_us = 0;
  DraftStats draft;
};

}  // namespace

struct Scheduler::State {
  Engine& engine;
  const Tokenizer& tokenizer;
  SchedulerOptions options;
  std::unique_ptr<Drafter> drafter;  // null: target only
  std::unique_ptr<DraftPolicy> policy;
  TokenTrie trie;             // the vocabulary by bytes, for structured outputs
  std::vector<float> masked;  // a constrained row's logits (reused)
  PrefixCache prefix_cache;

  struct Queued {
    std::shared_ptr<RequestStream> stream;
    Submission submission;
    Clock::time_point enqueued;
  };
  struct Active {
    std::shared_ptr<RequestStream> stream;
    Submission submission;
    SequenceId sequence = 0;
    std::vector<TokenId> tokens;  // every token whose KV is (or is being) computed, prompt first
    int prompt_length = 0;
    int fed = 0;  // positions in the KV cache
    int cached = 0;
    int generated = 0;
    TokenId pending = 0;  // sampled, not yet fed
    std::unique_ptr<ReplyText> text;
    std::optional<JsonMatcher> matcher;                   // structured output: the emitted bytes so far
    bool reasoning() const { return text->reasoning(); }  // inside the think block
    // The grammar, once the think block (if any) is over.
    const JsonMatcher* Grammar() const { return matcher && !reasoning() ? &*matcher : nullptr; }
  };

  // Shared with other threads, under `mutex`.
  mutable std::mutex mutex;
  std::condition_variable wake;
  std::deque<Queued> queue;
  std::vector<std::promise<std::string>> stats_requests;
  std::string unhealthy;
  std::size_t running = 0;  // admitted requests not known to have ended (Drain waits for 0)
  bool draining = false;
  bool stopping = false;
  Counters counters;

  // The scheduler thread's own.
  std::list<Active> active;
  SequenceId next_sequence = 1;
  std::size_t prefill_turn = 0;
  std::thread thread;

  State(Engine& e, const Tokenizer& t, SchedulerOptions o, std::unique_ptr<Drafter> d, std::unique_ptr<DraftPolicy> p)
      : engine(e),
        tokenizer(t),
        options(o),
        drafter(std::move(d)),
        policy(std::move(p)),
        // Built here, not for the first structured-output request: over a 129k-token
        // vocabulary it would stall that step for every request in it.
        trie(t, e.config().vocab_size),
        prefix_cache(e.kv(), o.prefix_cache_entries, SequenceId{1} << 62) {}

  void Run();
  // One step: BuildBatch, one forward, CommitDecodeRows then CommitPrefillRows.
  // False when there was nothing to do (or everything failed).
  bool Step();
  struct Batch;
  using Finished = std::vector<std::pair<Active*, std::string>>;  // requests that ended, and why
  void DropCancelled();
  // The step's rows and drafts; false when the drafter failed (everything failed).
  bool BuildBatch(Batch& b);
  // Returns the logits row after the decoding requests' (the first prompt chunk's).
  std::size_t CommitDecodeRows(const Batch& b, const ForwardOutput& out, Finished& finished);
  void CommitPrefillRows(const Batch& b, const ForwardOutput& out, std::size_t logits_row, Finished& finished);
  void SlowDown(Clock::duration step);
  double decode_share = 0;  // of the last step's rows; --debug-slowdown pads decode only
  void Admit();
  void Draft(const std::vector<Active*>& decoding, StepShape step, std::vector<rt::Draft>& drafts, DraftRoundTiming& timing);
  // Feeds `token` (emitted at the current end of `a`) to the request's text and
  // limits; returns the finish reason, or "" when the request goes on.
  std::string Emit(Active& a, TokenId token, bool last);
  void Close(Active& a);
  // `logits` with every token `m` refuses at −∞, in `masked` (valid until the next call).
  std::span<const float> Constrain(const JsonMatcher& m, std::span<const float> logits);
  void Observe(Active& a, int position, std::size_t row, const ForwardOutput& out, std::size_t count = 0);
  void Finish(Active& a, const std::string& reason);
  void FailEverything(const std::string& reason);
  std::string Stats();
};

void Scheduler::State::Admit() {
  std::vector<Queued> admitted;
  {
    std::lock_guard lock(mutex);
    const auto now = Clock::now();
    // Expired waits and cancelled requests leave the queue first.
    for (auto it = queue.begin(); it != queue.end();) {
      if (it->stream->cancelled()) {
        ++counters.cancelled;
        it = queue.erase(it);
      } else if (now - it->enqueued > options.queue_wait) {
        ++counters.rejected_queue_timeout;
        it->stream->Push(
            Failure(429, fmt::format("no slot became free within {} ms; retry later", options.queue_wait.count()), "rate_limit_error", 1));
        it = queue.erase(it);
      } else {
        ++it;
      }
    }
    while (!queue.empty() && static_cast<int>(active.size() + admitted.size()) < options.concurrency) {
      const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(now - queue.front().enqueued).count();
      ++counters.admitted;
      if (waited > 1000) ++counters.admitted_after_wait;
      counters.queue_wait_us += static_cast<std::uint64_t>(waited);
      admitted.push_back(std::move(queue.front()));
      queue.pop_front();
    }
    // Counted as they leave the queue, under the same lock: Drain never sees a request
    // that is neither queued nor running.
    running = active.size() + admitted.size();
  }
  for (Queued& q : admitted) {
    Active a;
    a.stream = std::move(q.stream);
    a.submission = std::move(q.submission);
    a.sequence = next_sequence++;
    a.tokens = a.submission.prompt;
    a.prompt_length = static_cast<int>(a.tokens.size());
    const int capacity = std::min(options.max_context, a.prompt_length + a.submission.max_new_tokens);
    // Reuse the longest cached prefix, keeping at least one prompt token to compute.
    const PrefixCache::Match match = prefix_cache.Lookup(a.tokens, a.prompt_length - 1);
    if (match.length > 0) {
      engine.kv().Fork(match.sequence, a.sequence, match.length, capacity);
    } else {
      engine.kv().Open(a.sequence, capacity);
    }
    a.fed = a.cached = match.length;
    a.text = std::make_unique<ReplyText>(tokenizer, a.submission.stop, a.submission.think_end);
    if (a.submission.grammar) a.matcher.emplace(a.submission.grammar);
    {
      std::lock_guard lock(mutex);
      counters.prompt_tokens += static_cast<std::uint64_t>(a.prompt_length);
      counters.cached_tokens += static_cast<std::uint64_t>(a.cached);
    }
    a.stream->Push({StreamEvent::Kind::kAdmitted});
    active.push_back(std::move(a));
  }
}

void Scheduler::State::Finish(Active& a, const std::string& reason) {
  StreamEvent done;
  for (ReplyText::Piece& p : a.text->Flush()) a.stream->Push({StreamEvent::Kind::kDelta, std::move(p.text), p.reasoning});
  done.kind = StreamEvent::Kind::kFinished;
  done.finish_reason = reason;
  done.usage = {a.prompt_length, a.generated, a.cached, a.text->reasoning_tokens()};
  a.stream->Push(std::move(done));
  // The tokens whose KV exists go back into the cache for later requests.
  prefix_cache.Insert(std::span<const TokenId>(a.tokens.data(), static_cast<std::size_t>(a.fed)), a.sequence);
  Close(a);
  std::lock_guard lock(mutex);
  ++counters.completed;
  counters.completion_tokens += static_cast<std::uint64_t>(a.generated);
}

void Scheduler::State::FailEverything(const std::string& reason) {
  // Unhealthy first: a client that sees its stream fail and then asks /health must
  // already get 503.
  {
    std::lock_guard lock(mutex);
    unhealthy = reason;
  }
  for (Active& a : active) {
    a.stream->Push(Failure(503, reason, "server_error"));
    Close(a);
  }
  std::lock_guard lock(mutex);
  counters.failed += active.size();
  active.clear();
  for (Queued& q : queue) q.stream->Push(Failure(503, reason, "server_error"));
  counters.rejected_unavailable += queue.size();
  queue.clear();
}

// Tells a drafter that reads the target's hidden states about `count` committed rows
// of `a` (default: up to its fed positions) that start at `position`, row `row` of `out`.
void Scheduler::State::Observe(Active& a, int position, std::size_t row, const ForwardOutput& out, std::size_t count) {
  if (!drafter || !drafter->wants_target_hidden()) return;
  if (count == 0) count = static_cast<std::size_t>(a.fed - position);
  const auto hidden = static_cast<std::size_t>(engine.config().hidden_size);
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

void Scheduler::State::Close(Active& a) {
  if (engine.kv().Contains(a.sequence)) engine.kv().Close(a.sequence);
  if (drafter) drafter->Forget(a.sequence);
}

// Asks the drafter for every decoding request's drafts, bounded by the policy, the
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

bool Scheduler::State::BuildBatch(Batch& b) {
  std::vector<Active*> prefilling;
  for (Active& a : active) (a.fed < a.prompt_length ? prefilling : b.decoding).push_back(&a);
  // Prompt chunks round-robin within the budget.
  std::vector<Row> prefill_rows;
  int budget = options.prefill_chunk;
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
  const int vocab = engine.config().vocab_size;
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
  const int vocab = engine.config().vocab_size;
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

std::string Scheduler::State::Stats() {
  nlohmann::json workers = nlohmann::json::array();
  for (const RankStats& r : engine.RankStatistics()) {
    workers.push_back({{"rank", r.rank},
                       {"address", r.address},
                       {"requests", r.frames_sent},
                       {"responses", r.frames_received},
                       {"bytes_sent", r.bytes_sent},
                       {"bytes_received", r.bytes_received},
                       {"round_trip_p50_us", r.RoundTripQuantileMicros(0.5)},
                       {"round_trip_p99_us", r.RoundTripQuantileMicros(0.99)},
                       {"compute_ms", static_cast<double>(r.compute_ns) / 1e6}});
  }
  nlohmann::json draft = {{"mode", drafter ? std::string(drafter->name()) : "off"}, {"policy", drafter ? policy->name() : "none"}};
  if (drafter) policy->Describe(draft);
  std::lock_guard lock(mutex);
  const Counters& c = counters;
  c.draft.Describe(draft);
  nlohmann::json stats = {
      {"requests",
       {{"completed", c.completed},
        {"cancelled", c.cancelled},
        {"failed", c.failed},
        {"invalid", c.invalid},
        {"rejected", c.rejected_queue_full + c.rejected_queue_timeout + c.rejected_unavailable},
        {"active", active.size()}}},
      {"tokens", {{"prompt", c.prompt_tokens}, {"cached", c.cached_tokens}, {"completion", c.completion_tokens}}},
      {"decode", {{"steps", c.steps}, {"rows", c.rows}, {"decode_rows", c.decode_rows}, {"prefill_rows", c.prefill_rows}}},
      {"queue",
       {{"length", queue.size()},
        {"admitted", c.admitted},
        {"waited", c.admitted_after_wait},
        {"wait_ms_total", static_cast<double>(c.queue_wait_us) / 1e3},
        {"rejected_full", c.rejected_queue_full},
        {"rejected_timeout", c.rejected_queue_timeout},
        {"rejected_unavailable", c.rejected_unavailable}}},
      {"prefix_cache", {{"entries", prefix_cache.entries()}}},
      {"workers", workers},
      {"draft", draft},
      {"healthy", unhealthy.empty() && !draining}};
  return stats.dump();
}

// --debug-slowdown F: after each step the scheduler thread busy-waits F/(1−F) as long
// as the step computed, times the share of its rows that were decode rows (prefill
// is not what the aid slows). Busy-waiting behaves like extra compute on that thread; a
// sleep would let the core go cold, making the next step slower and the slowdown
// larger than asked.
void Scheduler::State::SlowDown(Clock::duration step) {
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        step * (decode_share * options.debug_slowdown / (1 - options.debug_slowdown)));
  while (Clock::now() < until) {
  }
}

void Scheduler::State::Run() {
  for (;;) {
    std::vector<std::promise<std::string>> requests;
    {
      std::unique_lock lock(mutex);
      // Idle: sleep until a request, a stats read or shutdown. With queued requests
      // but no free slot, wake regularly to expire waits.
      wake.wait_for(lock, std::chrono::milliseconds(10), [&] {
        return stopping || !stats_requests.empty() || !active.empty() ||
               (!queue.empty() && static_cast<int>(active.size()) < options.concurrency);
      });
      if (stopping) break;
      requests = std::move(stats_requests);
      stats_requests.clear();
    }
    if (!requests.empty()) {
      const std::string json = Stats();
      for (auto& p : requests) p.set_value(json);
    }
    Admit();
    const auto step_start = Clock::now();
    if (Step() && options.debug_slowdown > 0) SlowDown(Clock::now() - step_start);
    std::lock_guard lock(mutex);
    running = active.size();
  }
  for (Active& a : active) {
    a.stream->Push(Failure(503, "the server is shutting down", "server_error"));
    Close(a);
  }
  active.clear();
  std::lock_guard lock(mutex);
  for (Queued& q : queue) q.stream->Push(Failure(503, "the server is shutting down", "server_error"));
  queue.clear();
  for (auto& p : stats_requests) p.set_value("{}");
  stats_requests.clear();
}

Scheduler::Scheduler(Engine& engine, const Tokenizer& tokenizer, SchedulerOptions options, std::unique_ptr<Drafter> drafter,
                     std::unique_ptr<DraftPolicy> policy)
    : state_(std::make_unique<State>(engine, tokenizer, options, std::move(drafter),
                                     policy ? std::move(policy) : MakeDraftPolicy("adaptive"))) {
  if (state_->drafter && state_->drafter->wants_target_hidden() && !engine.keeps_hidden()) {
    throw std::invalid_argument(
        fmt::format("the {} drafter reads the target's hidden states: the engine must keep them (keep_hidden)", state_->drafter->name()));
  }
  state_->thread = std::thread([this] { state_->Run(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  state_->thread.join();
}

std::shared_ptr<RequestStream> Scheduler::Submit(Submission submission) {
  auto stream = std::make_shared<RequestStream>();
  {
    std::lock_guard lock(state_->mutex);
    if (!state_->unhealthy.empty()) {
      ++state_->counters.rejected_unavailable;
      throw ApiError(503, fmt::format("the server is unhealthy: {}", state_->unhealthy), "server_error", "unavailable");
    }
    if (state_->draining || state_->stopping) {
      ++state_->counters.rejected_unavailable;
      throw ApiError(503, "the server is shutting down", "server_error", "unavailable");
    }
    if (static_cast<int>(state_->queue.size()) >= state_->options.queue_depth) {
      ++state_->counters.rejected_queue_full;
      throw ApiError(429, fmt::format("the queue is full ({} requests waiting); retry later", state_->queue.size()), "rate_limit_error",
                     "queue_full");
    }
    state_->queue.push_back({stream, std::move(submission), Clock::now()});
  }
  state_->wake.notify_all();
  return stream;
}

std::string Scheduler::StatsJson() {
  std::future<std::string> result;
  {
    std::lock_guard lock(state_->mutex);
    if (state_->stopping) return "{}";
    state_->stats_requests.emplace_back();
    result = state_->stats_requests.back().get_future();
  }
  state_->wake.notify_all();
  return result.get();
}

void Scheduler::CountInvalidRequest() {
  std::lock_guard lock(state_->mutex);
  ++state_->counters.invalid;
}

std::string Scheduler::Unhealthy() const {
  std::lock_guard lock(state_->mutex);
  if (!state_->unhealthy.empty()) return state_->unhealthy;
  if (state_->draining) return "draining";
  return "";
}

void Scheduler::Drain(std::chrono::milliseconds timeout) {
  {
    std::lock_guard lock(state_->mutex);
    state_->draining = true;
    for (State::Queued& q : state_->queue) q.stream->Push(Failure(503, "the server is shutting down", "server_error"));
    state_->counters.rejected_unavailable += state_->queue.size();
    state_->queue.clear();
  }
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    {
      std::lock_guard lock(state_->mutex);
      if (state_->running == 0) return;
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Out of time: stop the loop; what still runs is failed with 503 as it ends.
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
}

}  // namespace tandem::rt
