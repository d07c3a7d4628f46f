#include "runtime/model/incremental_detokenizer.hpp"

namespace tandem::rt {

namespace {

constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Expected length of a UTF-8 sequence from its lead byte; 0 for a byte that
// cannot start one.
std::size_t SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Whether continuation byte `c` may follow `lead` at position `index` (1-based);
// excludes overlong forms, surrogates and code points above U+10FFFF.
bool ValidContinuation(unsigned char lead, std::size_t index, unsigned char c) {
  if ((c & 0xC0) != 0x80) return false;
  if (index != 1) return true;
  if (lead == 0xE0) return c >= 0xA0;
  if (lead == 0xED) return c <= 0x9F;
  if (lead == 0xF0) return c >= 0x90;
  if (lead == 0xF4) return c <= 0x8F;
  return true;
}

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
    const std::size_t n = SequenceLength(lead);
    if (n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    std::size_t k = 1;
    while (k < n && i + k < pending_.size() && ValidContinuation(lead, k, static_cast<unsigned char>(pending_[i + k]))) ++k;
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
