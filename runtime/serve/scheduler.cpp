#include "runtime/serve/scheduler.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/serve/api_error.hpp"
#include "runtime/serve/scheduler_state.hpp"

namespace tandem::rt {

namespace scheduling {

StreamEvent Failure(int status, std::string message, std::string type, int retry_after_s) {
  StreamEvent e;
  e.kind = StreamEvent::Kind::kFailed;
  e.status = status;
  e.text = std::move(message);
  e.error_type = std::move(type);
  e.retry_after_s = retry_after_s;
  return e;
}

}  // namespace scheduling

using scheduling::Clock;
using scheduling::Failure;

namespace {

// How long /v1/stats waits for the scheduler thread before answering with its last
// reading (a step of a big model on a CPU can take this long; one stuck on a rank longer).
constexpr auto kStatsWait = std::chrono::milliseconds(250);

}  // namespace

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
    PrefixCache::Match match;
    try {
      WithinKvBudget([&] {  // an eviction may take the matched entry: look again each time
        match = prefix_cache.Lookup(a.tokens, a.prompt_length - 1);
        if (match.length > 0) {
          engine.kv().Fork(match.sequence, a.sequence, match.length, capacity);
        } else {
          engine.kv().Open(a.sequence, capacity);
        }
      });
    } catch (const std::exception& e) {  // the KV budget, or memory itself: this request fails, the server goes on
      a.stream->Push(Failure(503, fmt::format("no KV cache for this request: {}", e.what()), "server_error", 1));
      std::lock_guard lock(mutex);
      ++counters.failed;
      --running;
      continue;
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

void Scheduler::State::Close(Active& a) {
  if (engine.kv().Contains(a.sequence)) engine.kv().Close(a.sequence);
  if (drafter) drafter->Forget(a.sequence);
}

// Asks the drafter for every decoding request's drafts, bounded by the policy, the

nlohmann::json Scheduler::State::EngineStats() {
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
                       {"compute_ms", static_cast<double>(r.compute_ns) / 1e6},
                       {"weight_bytes", r.weight_bytes},
                       {"load_s", r.load_seconds}});
  }
  nlohmann::json draft = {{"mode", drafter ? std::string(drafter->name()) : "off"}, {"policy", drafter ? policy->name() : "none"}};
  if (drafter) policy->Describe(draft);
  return {{"workers", workers}, {"draft", draft}, {"prefix_cache_entries", prefix_cache.entries()}, {"active", active.size()}};
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

// Requests that arrive together (a client's batch, a burst of users) reach the queue a
// little apart: each has been read, parsed and tokenized on its own connection's
// thread. Admitting the first at once would prefill it alone and the rest in the next
// step, after it has started decoding; waiting while they still arrive puts the burst's
// prompts in one forward (one pass over the weights for all of them). The wait ends
// when none has arrived for `burst_quiet`, `burst_window` after the first, or with the
// slots full, and never while a request is running: a busy scheduler admits at its next
// step boundary as before. A lone request waits `burst_quiet`.
void Scheduler::State::GatherBurst(std::unique_lock<std::mutex>& lock) {
  if (options.burst_window.count() <= 0 || queue.empty()) return;
  const Clock::time_point deadline = queue.front().enqueued + options.burst_window;
  while (!stopping && !queue.empty() && static_cast<int>(queue.size()) < options.concurrency) {
    const Clock::time_point until = std::min(deadline, queue.back().enqueued + options.burst_quiet);
    if (Clock::now() >= until) return;
    wake.wait_until(lock, until);
  }
}

void Scheduler::State::Run() {
  for (;;) {
    std::vector<std::promise<nlohmann::json>> requests;
    {
      std::unique_lock lock(mutex);
      // Idle: sleep until a request, a stats read or shutdown. With queued requests
      // but no free slot, wake regularly to expire waits.
      wake.wait_for(lock, std::chrono::milliseconds(10), [&] {
        return stopping || !stats_requests.empty() || !active.empty() ||
               (!queue.empty() && static_cast<int>(active.size()) < options.concurrency);
      });
      if (active.empty()) GatherBurst(lock);
      if (stopping) break;
      requests = std::move(stats_requests);
      stats_requests.clear();
    }
    if (!requests.empty()) {
      const nlohmann::json stats = EngineStats();
      {
        std::lock_guard lock(mutex);
        last_engine_stats = stats;
        last_engine_stats_at = Clock::now();
      }
      for (auto& p : requests) p.set_value(stats);
    }
    try {
      Admit();
      const auto step_start = Clock::now();
      if (Step() && options.debug_slowdown > 0) SlowDown(Clock::now() - step_start);
    } catch (const std::exception& e) {  // the last resort: nothing a request causes may end the process
      FailEverything(fmt::format("the scheduler failed: {}", e.what()));
    }
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
  for (auto& p : stats_requests) p.set_value(nlohmann::json::object());
  stats_requests.clear();
  stopped = true;
  ended.notify_all();
}

Scheduler::Scheduler(DecodeEngine& engine, const Tokenizer& tokenizer, SchedulerOptions options, std::unique_ptr<Drafter> drafter,
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
  State& s = *state_;
  std::future<nlohmann::json> answer;
  {
    std::lock_guard lock(s.mutex);
    if (s.stopping) return "{}";
    s.stats_requests.emplace_back();
    answer = s.stats_requests.back().get_future();
  }
  s.wake.notify_all();
  // The scheduler thread answers between steps. Inside a long one (a rank that does not
  // answer holds it up to --round-trip-timeout-ms) the counters are still read here, and
  // the rest is its last answer, marked so: /v1/stats never waits on a rank.
  const bool live = answer.wait_for(kStatsWait) == std::future_status::ready;
  nlohmann::json engine = live ? answer.get() : nlohmann::json();
  std::lock_guard lock(s.mutex);
  if (!live) engine = s.last_engine_stats.is_object() ? s.last_engine_stats : nlohmann::json::object();
  const scheduling::Counters& c = s.counters;
  nlohmann::json draft = engine.value("draft", nlohmann::json{{"mode", "unknown"}});
  c.draft.Describe(draft);
  nlohmann::json stats = {
      {"requests",
       {{"completed", c.completed},
        {"cancelled", c.cancelled},
        {"failed", c.failed},
        {"invalid", c.invalid},
        {"rejected", c.rejected_queue_full + c.rejected_queue_timeout + c.rejected_unavailable},
        {"active", engine.value("active", s.running)}}},
      {"tokens", {{"prompt", c.prompt_tokens}, {"cached", c.cached_tokens}, {"completion", c.completion_tokens}}},
      {"decode", {{"steps", c.steps}, {"rows", c.rows}, {"decode_rows", c.decode_rows}, {"prefill_rows", c.prefill_rows}}},
      {"queue",
       {{"length", s.queue.size()},
        {"admitted", c.admitted},
        {"waited", c.admitted_after_wait},
        {"wait_ms_total", static_cast<double>(c.queue_wait_us) / 1e3},
        {"rejected_full", c.rejected_queue_full},
        {"rejected_timeout", c.rejected_queue_timeout},
        {"rejected_unavailable", c.rejected_unavailable}}},
      {"prefix_cache", {{"entries", engine.value("prefix_cache_entries", 0)}}},
      {"workers", engine.value("workers", nlohmann::json::array())},
      {"draft", draft},
      {"healthy", s.unhealthy.empty() && !s.draining},
      {"live", live}};
  if (!live) {
    // null: the scheduler thread has never answered.
    stats["stale_s"] = s.last_engine_stats.is_object()
                           ? nlohmann::json(std::chrono::duration<double>(Clock::now() - s.last_engine_stats_at).count())
                           : nlohmann::json();
  }
  return stats.dump();
}

void Scheduler::CountInvalidRequest() {
  std::lock_guard lock(state_->mutex);
  ++state_->counters.invalid;
}

std::string Scheduler::Failed() const {
  std::lock_guard lock(state_->mutex);
  return state_->unhealthy;
}

std::string Scheduler::Unhealthy() const {
  {
    std::lock_guard lock(state_->mutex);
    if (!state_->unhealthy.empty()) return state_->unhealthy;
    if (state_->draining) return "draining";
  }
  const std::string late = state_->engine.LateRanks();
  return late.empty() ? "" : "degraded: " + late;
}

void Scheduler::Drain(std::chrono::milliseconds timeout, const std::function<bool()>& cut_short) {
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
    if (Clock::now() >= deadline || (cut_short && cut_short())) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Out of time: stop the loop, and wait until it has failed what still runs ("the
  // server is shutting down"), so each of those streams ends with that error.
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  std::unique_lock lock(state_->mutex);
  state_->ended.wait(lock, [&] { return state_->stopped; });
}

}  // namespace tandem::rt
