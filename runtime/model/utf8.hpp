#pragma once

#include <cstddef>
#include <utility>

// The UTF-8 rules the detokenizer and the JSON grammar share: which bytes start a
// sequence, how long it is, and which continuation bytes may follow (no overlong
// forms, no surrogates, nothing past U+10FFFF).
namespace tandem::rt {

// Expected length of a UTF-8 sequence from its lead byte; 0 for a byte that cannot
// start one (a continuation byte, 0xC0, 0xC1, 0xF5–0xFF).
constexpr std::size_t Utf8SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// The allowed range [first, second] of the continuation byte at `index` (1-based)
// after `lead`: only the first one is narrower than 0x80–0xBF, for the leads where
// the shortest or longest forms would otherwise slip through.
constexpr std::pair<unsigned char, unsigned char> Utf8ContinuationRange(unsigned char lead, std::size_t index) {
  if (index == 1) {
    if (lead == 0xE0) return {0xA0, 0xBF};
    if (lead == 0xED) return {0x80, 0x9F};
    if (lead == 0xF0) return {0x90, 0xBF};
    if (lead == 0xF4) return {0x80, 0x8F};
  }
  return {0x80, 0xBF};
}

constexpr bool Utf8ValidContinuation(unsigned char lead, std::size_t index, unsigned char c) {
  const auto [lo, hi] = Utf8ContinuationRange(lead, index);
  return c >= lo && c <= hi;
}

}  // namespace tandem::rt
