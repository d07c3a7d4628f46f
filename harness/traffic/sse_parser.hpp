#pragma once

#include <string>
#include <string_view>
#include <vector>

// Reading an OpenAI-style chat completion stream (server-sent events) into what the
// harness measures. The bytes come from whatever server an arm runs, so nothing in
// them may crash the harness: malformed events become `error`.
namespace tandem::harness {

// What one streamed completion looked like from the client's side.
struct StreamedCompletion {
  int status = 0;              // HTTP status; 0 when no response arrived
  std::string error;           // transport, HTTP or in-stream error; empty when none
  double t_start = 0;          // just before the POST
  double t_first_output = 0;   // first delta with non-empty content or reasoning_content
  double t_first_content = 0;  // first non-empty content
  double t_finish = 0;         // the event carrying finish_reason
  std::string content;
  std::string reasoning;
  int chunks = 0;  // deltas that carried text
  // Seconds between consecutive deltas that carried text (inter-token latency as a client
  // sees it: deltas that arrived in one read are 0 apart); at most kMaxGaps are kept.
  std::vector<double> output_gaps;
  static constexpr std::size_t kMaxGaps = 1 << 16;
  bool done = false;  // saw data: [DONE]
  bool has_usage = false;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;
  // Whether the usage said how many prompt tokens were cached (OpenAI's
  // prompt_tokens_details.cached_tokens or DeepSeek's prompt_cache_hit_tokens): a server
  // that does not cannot have its cache accounting checked.
  bool has_cached_usage = false;
  int cache_miss_tokens = -1;  // DeepSeek's prompt_cache_miss_tokens; -1 when not reported
  std::string finish_reason;

  // A stream without [DONE] or usage is incomplete: a failed sample, never a timing.
  bool complete() const { return status == 200 && error.empty() && done && has_usage && t_finish > 0; }
};

// Incremental: Feed() takes the bytes as they arrive, in pieces of any size, with the
// monotonic time they arrived. Events end at a blank line ("\n\n" or "\r\n\r\n");
// "data:" lines of an event are joined with "\n"; comment lines (":") and other
// fields are ignored. Text outside any data line (an HTTP error body) is kept in
// non_event_text() for the error message.
class SseCompletionParser {
 public:
  explicit SseCompletionParser(StreamedCompletion& out) : out_(out) {}
  void Feed(std::string_view bytes, double now);
  // Whatever is buffered after the last complete event, plus non-SSE text seen.
  std::string non_event_text() const { return non_event_ + buffer_; }

 private:
  double last_output_ = 0;  // when the last delta with text arrived
  void Event(std::string_view event, double now);
  void Data(const std::string& payload, double now);

  StreamedCompletion& out_;
  std::string buffer_;
  std::string non_event_;
};

}  // namespace tandem::harness
