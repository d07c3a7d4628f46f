#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/grammar/json_schema.hpp"
#include "runtime/model/tokenizer.hpp"
#include "runtime/sampling/sampler.hpp"
#include "runtime/serve/request_stream.hpp"

namespace tandem::rt {

class DraftPolicy;
class Drafter;
class DecodeEngine;

struct SchedulerOptions {
  int concurrency = 16;                         // sequences decoding at once
  int max_context = 4096;                       // prompt + output tokens per sequence
  int queue_depth = 64;                         // requests waiting for a slot; beyond: 429 at once
  std::chrono::milliseconds queue_wait{30000};  // longest wait for a slot; then 429
  std::size_t prefix_cache_entries = 64;
  int prefill_chunk = 256;  // prompt tokens per step, over all prefilling requests (scaled: PrefillBudget)
  // An idle scheduler's first step waits for a burst: while requests keep arriving (a
  // gap under `burst_quiet` since the last), up to `burst_window` after the first, or
  // until the slots are full. The burst's prompts then go in one forward instead of
  // the first alone and the rest after it. Zero window: admit at once.
  std::chrono::microseconds burst_window{10000};
  std::chrono::microseconds burst_quiet{2000};
  TokenId eos = 1;
  // Test aid (`--debug-slowdown F`): after each step the scheduler busy-waits F/(1−F)
  // as long as the step computed (decode rows only), so decode throughput becomes (1 − F)
  // times what it was. Lets the CI gate be tested against a known
  // regression.
  double debug_slowdown = 0.0;
};

// One request as the scheduler takes it: already tokenized and checked.
struct Submission {
  std::vector<TokenId> prompt;
  int max_new_tokens = 1;
  SamplingParams sampling;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  // Structured output: every token is sampled from the logits of the tokens that can
  // continue a valid output (runtime/grammar), and the request ends when the value is
  // complete. Null: free text.
  std::shared_ptr<const JsonGrammar> grammar;
  // Thinking: the output starts inside the think block; tokens up to and including
  // `think_end` are reasoning (streamed apart, counted in usage), the grammar applies
  // after it. -1: no think block.
  TokenId think_end = -1;
};

// Continuous batching over one Engine, on its own thread. Each step forms one batch:
// a row for every decoding sequence plus prompt chunks of the prefilling ones (at
// most PrefillBudget tokens per step: `prefill_chunk` times the prompts waiting per
// decoding request, up to 8 chunks; served round-robin, so a long prompt cannot
// starve running streams), i.e. one worker round trip per MoE layer for all of them.
// Requests are admitted at step boundaries, up to `concurrency`; a new one starts
// from the longest prefix the PrefixCache holds, and its tokens go back into the
// cache when it ends. Greedy outputs do not depend on what else is in the batch
// (the engine is batch-invariant) and seeded sampling depends only on (seed, position, token).
//
// With a drafter, each decoding request contributes its anchor plus the drafts the
// policy chose as rows of that same batch; sample-and-match keeps the drafts the
// target agrees with and rolls the KV back past them, so outputs are exactly those
// of decoding without drafts (runtime/draft/verification.hpp).
class Scheduler {
 public:
  // `drafter` null: target only. `policy` null: adaptive.
  Scheduler(DecodeEngine& engine, const Tokenizer& tokenizer, SchedulerOptions options, std::unique_ptr<Drafter> drafter = nullptr,
            std::unique_ptr<DraftPolicy> policy = nullptr);
  ~Scheduler();  // cancels everything and joins the thread
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request; its stream reports kAdmitted, then tokens. Throws ApiError:
  // 429 when the queue is full, 503 when draining or after an engine failure.
  std::shared_ptr<RequestStream> Submit(Submission submission);

  // The lifetime counters as JSON (GET /v1/stats). What only the scheduler thread reads
  // (workers, draft policy, prefix cache) it gives between steps; /v1/stats waits at most
  // a quarter second for that, and inside a longer step (a late rank) answers with its
  // last reading, marked "live": false.
  std::string StatsJson();
  void CountInvalidRequest();

  // Why the server cannot serve (engine or worker failure, draining), or "degraded: …"
  // while the step in flight waits on a late rank; empty when healthy. Never waits.
  std::string Unhealthy() const;
  // Why the server can no longer serve (an engine, drafter or worker failure); empty
  // while it can (also when only degraded or draining).
  std::string Failed() const;

  // Stops admitting (queued requests get 503) and waits up to `timeout` for the
  // running ones to finish, or until `cut_short` (asked every 20 ms) says to stop
  // waiting; the rest end with the error "the server is shutting down" (503) before it
  // returns.
  void Drain(std::chrono::milliseconds timeout, const std::function<bool()>& cut_short = {});

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tandem::rt
