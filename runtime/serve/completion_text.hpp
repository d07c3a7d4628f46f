#pragma once

#include <string>
#include <vector>

#include "runtime/model/incremental_detokenizer.hpp"

namespace tandem::rt {

// A request's output text as tokens arrive: whole UTF-8 characters only, special
// tokens skipped, and stop strings honoured. Text that might be the start of a stop
// string is held back until it cannot be; once a stop string appears, the text
// ends just before it.
class CompletionText {
 public:
  CompletionText(const Tokenizer& tokenizer, std::vector<std::string> stop);

  // The text that can be emitted after `id` (possibly empty).
  std::string Push(TokenId id);
  // What is still held back, when the request ends for another reason.
  std::string Flush();
  bool stopped() const { return stopped_; }

 private:
  std::string Release();

  IncrementalDetokenizer detokenizer_;
  std::vector<std::string> stop_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace tandem::rt
