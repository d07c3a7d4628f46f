#include "runtime/model/incremental_detokenizer.hpp"

#include "runtime/model/utf8.hpp"

namespace tandem::rt {

namespace {

constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

std::string IncrementalDetokenizer::Push(TokenId id) {
  if (skip_special_ && tokenizer_.IsSpecial(id)) return TakeComplete(false);
  pending_ += tokenizer_.TokenBytes(id);
  return TakeComplete(false);
}

std::string IncrementalDetokenizer::Flush() { return TakeComplete(true); }

std::string IncrementalDetokenizer::TakeComplete(bool final) {
  std::string out;
  std::size_t i = 0;
  while (i < pending_.size()) {
    const auto lead = static_cast<unsigned char>(pending_[i]);
    const std::size_t n = Utf8SequenceLength(lead);
    if (n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    std::size_t k = 1;
    while (k < n && i + k < pending_.size() && Utf8ValidContinuation(lead, k, static_cast<unsigned char>(pending_[i + k]))) ++k;
    if (k == n) {
      out.append(pending_, i, n);
      i += n;
    } else if (i + k == pending_.size() && !final) {
      break;  // a prefix of a valid character: wait for the next token
    } else {
      out += kReplacement;  // a broken sequence: replace its valid prefix, resume at the bad byte
      i += k;
    }
  }
  pending_.erase(0, i);
  return out;
}

}  // namespace tandem::rt
