#include "runtime/serve/completion_text.hpp"

#include <algorithm>

namespace tandem::rt {

CompletionText::CompletionText(const Tokenizer& tokenizer, std::vector<std::string> stop)
    : detokenizer_(tokenizer, /*skip_special=*/true), stop_(std::move(stop)) {}

std::string CompletionText::Push(TokenId id) {
  if (stopped_) return {};
  held_ += detokenizer_.Push(id);
  return Release();
}

std::string CompletionText::Flush() {
  if (stopped_) return {};
  held_ += detokenizer_.Flush();
  std::string out = Release();
  if (!stopped_) {
    out += held_;  // a partial stop string that never completed is ordinary text
    held_.clear();
  }
  return out;
}

std::string CompletionText::Release() {
  std::size_t first = std::string::npos;
  for (const std::string& s : stop_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Keep the longest suffix that is a proper prefix of some stop string.
  std::size_t keep = 0;
  for (const std::string& s : stop_) {
    for (std::size_t len = std::min(s.size() - 1, held_.size()); len > keep; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

}  // namespace tandem::rt
