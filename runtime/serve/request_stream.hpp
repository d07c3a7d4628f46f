#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

namespace tandem::rt {

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;
  int reasoning_tokens = 0;  // of completion_tokens: the think block, its closing token included
};

// What the scheduler tells the HTTP handler about one request, in order:
// kAdmitted (or kFailed before it), then kDelta..., then kFinished or kFailed.
struct StreamEvent {
  enum class Kind { kAdmitted, kDelta, kFinished, kFailed } kind = Kind::kDelta;
  std::string text;           // kDelta: text to append; kFailed: the error message
  bool reasoning = false;     // kDelta: the text belongs to the think block (reasoning_content)
  std::string finish_reason;  // kFinished: "stop" | "length"
  Usage usage;                // kFinished
  int status = 0;             // kFailed: HTTP status (429, 503, ...)
  std::string error_type;     // kFailed
  int retry_after_s = 0;      // kFailed with 429
};

// The channel between the scheduler thread (producer) and one HTTP handler
// (consumer), plus the consumer's cancel flag.
class RequestStream {
 public:
  void Push(StreamEvent event);
  // The next event, or nullopt if none arrives within `timeout`.
  std::optional<StreamEvent> Pop(std::chrono::milliseconds timeout);

  void Cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<StreamEvent> events_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace tandem::rt
