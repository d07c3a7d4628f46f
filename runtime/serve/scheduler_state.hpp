#pragma once

// Scheduler::State, shared by scheduler.cpp (admission, the thread, the public calls) and
// scheduler_step.cpp (one step: drafts, the forward, verification, commits). Private to
// runtime/serve.

#include <condition_variable>
#include <deque>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/draft/draft_policy.hpp"
#include "runtime/draft/draft_stats.hpp"
#include "runtime/draft/drafter.hpp"
#include "runtime/engine/engine.hpp"
#include "runtime/grammar/json_matcher.hpp"
#include "runtime/grammar/token_mask.hpp"
#include "runtime/serve/prefix_cache.hpp"
#include "runtime/serve/reply_text.hpp"
#include "runtime/serve/scheduler.hpp"

namespace tandem::rt {

namespace scheduling {

using Clock = std::chrono::steady_clock;

// The lifetime counters of /v1/stats.
struct Counters {
  std::uint64_t completed = 0, cancelled = 0, failed = 0, invalid = 0;
  std::uint64_t rejected_queue_full = 0, rejected_queue_timeout = 0, rejected_unavailable = 0;
  std::uint64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
  std::uint64_t steps = 0, rows = 0, prefill_rows = 0, decode_rows = 0;
  std::uint64_t admitted = 0, admitted_after_wait = 0, queue_wait_us = 0;
  DraftStats draft;
};

// A stream's failure event (status, message, error type, Retry-After seconds).
StreamEvent Failure(int status, std::string message, std::string type, int retry_after_s = 0);

}  // namespace scheduling

struct Scheduler::State {
  using Clock = scheduling::Clock;

  DecodeEngine& engine;
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
  // /v1/stats asks the scheduler thread for what only it may read (EngineStats); the
  // last answer is kept for when it is inside a long step.
  std::vector<std::promise<nlohmann::json>> stats_requests;
  nlohmann::json last_engine_stats;
  Clock::time_point last_engine_stats_at;
  std::string unhealthy;
  std::size_t running = 0;  // admitted requests not known to have ended (Drain waits for 0)
  bool draining = false;
  bool stopping = false;
  bool stopped = false;  // Run has returned: every stream was ended
  std::condition_variable ended;
  scheduling::Counters counters;

  // The scheduler thread's own.
  std::list<Active> active;
  SequenceId next_sequence = 1;
  std::size_t prefill_turn = 0;
  std::thread thread;

  State(DecodeEngine& e, const Tokenizer& t, SchedulerOptions o, std::unique_ptr<Drafter> d, std::unique_ptr<DraftPolicy> p)
      : engine(e),
        tokenizer(t),
        options(o),
        drafter(std::move(d)),
        policy(std::move(p)),
        // Built here, not for the first structured-output request: over a 129k-token
        // vocabulary it would stall that step for every request in it.
        trie(t, e.vocab_size()),
        prefix_cache(e.kv(), o.prefix_cache_entries, SequenceId{1} << 62) {}

  void Run();
  // One step: BuildBatch, one forward, CommitDecodeRows then CommitPrefillRows.
  // False when there was nothing to do (or everything failed).
  bool Step();
  struct Batch;
  using Finished = std::vector<std::pair<Active*, std::string>>;  // requests that ended, and why
  void DropCancelled();
  // Grows each request's KV cache for the positions this step may write; a request whose
  // cache cannot grow within the budget (or memory) fails alone, with a 503 naming it.
  void ReserveCaches();
  // Runs `grow`; while it throws KvBudgetExhausted, the prefix cache gives up its least
  // recently used entry and `grow` runs again (it throws once nothing is left to give).
  template <class Grow>
  void WithinKvBudget(Grow&& grow) {
    for (;;) {
      try {
        grow();
        return;
      } catch (const KvBudgetExhausted&) {
        if (!prefix_cache.EvictOldest()) throw;
      }
    }
  }
  // The step's rows and drafts; false when the drafter failed (everything failed).
  bool BuildBatch(Batch& b);
  // Returns the logits row after the decoding requests' (the first prompt chunk's).
  std::size_t CommitDecodeRows(const Batch& b, const ForwardOutput& out, Finished& finished);
  void CommitPrefillRows(const Batch& b, const ForwardOutput& out, std::size_t logits_row, Finished& finished);
  void SlowDown(Clock::duration step);
  double decode_share = 0;  // of the last step's rows; --debug-slowdown pads decode only
  void Admit();
  // Idle with requests queued: waits (under `lock`) while a burst is still arriving.
  void GatherBurst(std::unique_lock<std::mutex>& lock);
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
  // What only the scheduler thread may read, for /v1/stats: the workers' traffic, the
  // draft policy, the prefix cache and the running requests.
  nlohmann::json EngineStats();
};

}  // namespace tandem::rt
