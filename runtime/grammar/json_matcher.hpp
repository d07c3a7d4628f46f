#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "runtime/grammar/json_schema.hpp"

namespace tandem::rt {

// Accepts, byte by byte, exactly the prefixes of JSON texts that validate against a
// compiled schema: a pushdown automaton over the schema's nodes. Objects with named
// properties are produced in schema order (optional ones may be skipped), which keeps
// the automaton small and every output valid; whitespace between tokens is allowed
// in runs of at most 8 bytes. Copyable: a token mask tries bytes on copies.
class JsonMatcher {
 public:
  explicit JsonMatcher(std::shared_ptr<const JsonGrammar> grammar);

  // Feeds one byte; false when no valid output continues with it (the matcher is then
  // unusable: try bytes on a copy when unsure).
  bool Accept(unsigned char c);
  // Feeds every byte of `bytes`; false at the first one refused.
  bool Accept(std::string_view bytes);
  // The output so far is a complete valid value (the end may come now).
  bool Complete() const;
  // Some byte may still follow (false once a closed value is finished).
  bool CanContinue() const { return !stack_.empty(); }
  // Inside a string with no length limit, between characters: any run of plain
  // characters (printable, no quote or backslash, whole UTF-8 sequences) is accepted
  // and leaves the matcher where it was. Token masks use this to skip most of the work.
  bool InPlainString() const;

 private:
  enum class Kind : std::uint8_t { kValue, kLiteral, kString, kNumber, kObject, kArray };
  enum class Source : std::uint8_t { kEnum, kKeys, kWords };
  struct Frame {
    Kind kind = Kind::kValue;
    std::uint8_t state = 0;
    std::uint8_t ws = 0;  // the current whitespace run
    Source source = Source::kEnum;
    int node = -1;           // schema node (-1: any value / any string)
    int count = 0;           // string: code points; array: items; object: current property; literal: position
    int extra = 0;           // string: UTF-8 bytes or \u digits still due; number: digits so far
    std::uint64_t mask = 0;  // literal: candidates still possible
    bool integer = false;    // number: no fraction or exponent
  };
  enum class Step { kConsumed, kRejected, kConsumedAndDone, kEndedRetry };

  Step Feed(Frame& f, unsigned char c);
  Step FeedValue(Frame& f, unsigned char c);
  Step FeedLiteral(Frame& f, unsigned char c);
  Step FeedString(Frame& f, unsigned char c);
  Step FeedNumber(Frame& f, unsigned char c);
  Step FeedObject(Frame& f, unsigned char c);
  Step FeedArray(Frame& f, unsigned char c);
  void ChildDone();
  bool CanEnd(const Frame& f) const;
  // A literal frame's candidate that all its bytes so far complete; -1 if none.
  int EndedCandidate(const Frame& f) const;
  const std::vector<std::string>& Candidates(const Frame& f) const;
  std::uint64_t KeyCandidates(const SchemaNode& n, int from) const;
  Frame ValueFrame(int node) const;
  bool Whitespace(Frame& f, unsigned char c);

  std::shared_ptr<const JsonGrammar> grammar_;
  std::vector<Frame> stack_;
  int matched_ = -1;  // the candidate a literal frame ended with
  bool started_ = false;
};

}  // namespace tandem::rt
