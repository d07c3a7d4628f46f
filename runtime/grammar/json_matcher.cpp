#include "runtime/grammar/json_matcher.hpp"

#include <bit>

#include "runtime/model/utf8.hpp"

namespace tandem::rt {

namespace {

constexpr int kMaxWhitespace = 8;
constexpr int kMaxDigits = 24;         // a number's digits, all parts together (so |x| < 1e124)
constexpr int kMaxIntegerDigits = 18;  // an integer's: |x| < 1e18 < 2^63

const std::vector<std::string>& Words() {
  static const std::vector<std::string> words = {"true", "false", "null"};
  return words;
}

bool IsWs(unsigned char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool IsDigit(unsigned char c) { return c >= '0' && c <= '9'; }
bool IsHex(unsigned char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Object phases.
enum : std::uint8_t { kOpen, kNeedKey, kKey, kColon, kValue, kAfterValue };
// Array phases.
enum : std::uint8_t { kArrayOpen, kNeedItem, kItem, kAfterItem };
// String phases.
enum : std::uint8_t { kChars, kEscape, kUnicode, kUtf8 };
// A string frame's `mask` while a \u escape of a high surrogate awaits its low half.
constexpr std::uint64_t kHighSurrogatePending = std::uint64_t{1} << 32;
// Number phases.
enum : std::uint8_t { kMinus, kZero, kInt, kDot, kFrac, kE, kESign, kExp };

}  // namespace

JsonMatcher::JsonMatcher(std::shared_ptr<const JsonGrammar> grammar) : grammar_(std::move(grammar)) {
  stack_.push_back(ValueFrame(grammar_->root()));
}

JsonMatcher::Frame JsonMatcher::ValueFrame(int node) const {
  Frame f;
  f.kind = Kind::kValue;
  f.node = node;
  return f;
}

bool JsonMatcher::Whitespace(Frame& f, unsigned char c) {
  if (!IsWs(c) || f.ws >= kMaxWhitespace) return false;
  ++f.ws;
  return true;
}

const std::vector<std::string>& JsonMatcher::Candidates(const Frame& f) const {
  switch (f.source) {
    case Source::kEnum:
      return grammar_->node(f.node).literals;
    case Source::kKeys:
      return grammar_->node(f.node).keys;
    case Source::kWords:
      return Words();
  }
  return Words();
}

// Properties from `from` on that may come next: up to and including the first
// required one (the ones before it are optional and may be skipped).
std::uint64_t JsonMatcher::KeyCandidates(const SchemaNode& n, int from) const {
  std::uint64_t mask = 0;
  for (int j = from; j < static_cast<int>(n.properties.size()); ++j) {
    mask |= std::uint64_t{1} << j;
    if (n.properties[static_cast<std::size_t>(j)].required) break;
  }
  return mask;
}

int JsonMatcher::EndedCandidate(const Frame& f) const {
  const auto& c = Candidates(f);
  for (std::uint64_t m = f.mask; m != 0; m &= m - 1) {
    const int i = std::countr_zero(m);
    if (static_cast<int>(c[static_cast<std::size_t>(i)].size()) == f.count) return i;
  }
  return -1;
}

bool JsonMatcher::CanEnd(const Frame& f) const {
  if (f.kind == Kind::kNumber) return f.state == kZero || f.state == kInt || f.state == kFrac || f.state == kExp;
  return f.kind == Kind::kLiteral && EndedCandidate(f) >= 0;
}

bool JsonMatcher::InPlainString() const {
  if (stack_.empty()) return false;
  const Frame& f = stack_.back();
  return f.kind == Kind::kString && f.state == kChars && (f.node < 0 || grammar_->node(f.node).max_length < 0);
}

bool JsonMatcher::Complete() const {
  if (!started_) return false;
  return stack_.empty() || (stack_.size() == 1 && CanEnd(stack_.back()));
}

bool JsonMatcher::Accept(std::string_view bytes) {
  for (const char c : bytes) {
    if (!Accept(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool JsonMatcher::Accept(unsigned char c) {
  for (;;) {
    if (stack_.empty()) return false;  // the value is finished: nothing may follow
    switch (Feed(stack_.back(), c)) {
      case Step::kConsumed:
        started_ = true;
        return true;
      case Step::kRejected:
        return false;
      case Step::kConsumedAndDone:
        started_ = true;
        stack_.pop_back();
        ChildDone();
        return true;
      case Step::kEndedRetry:
        // The frame could end, and c does not continue it: end it, offer c to the parent.
        if (stack_.back().kind == Kind::kLiteral) matched_ = EndedCandidate(stack_.back());
        stack_.pop_back();
        ChildDone();
        break;
    }
  }
}

void JsonMatcher::ChildDone() {
  if (stack_.empty()) return;
  Frame& f = stack_.back();
  f.ws = 0;
  if (f.kind == Kind::kObject) {
    if (f.state == kKey) {
      f.state = kColon;
      if (f.node >= 0 && grammar_->node(f.node).closed) f.count = matched_;  // the property whose key matched
    } else if (f.state == kValue) {
      f.state = kAfterValue;
    }
  } else if (f.kind == Kind::kArray && f.state == kItem) {
    f.state = kAfterItem;
    ++f.count;
  }
}

JsonMatcher::Step JsonMatcher::Feed(Frame& f, unsigned char c) {
  switch (f.kind) {
    case Kind::kValue:
      return FeedValue(f, c);
    case Kind::kLiteral:
      return FeedLiteral(f, c);
    case Kind::kString:
      return FeedString(f, c);
    case Kind::kNumber:
      return FeedNumber(f, c);
    case Kind::kObject:
      return FeedObject(f, c);
    case Kind::kArray:
      return FeedArray(f, c);
  }
  return Step::kRejected;
}

// The first byte of a value decides what it is; the value frame becomes that.
JsonMatcher::Step JsonMatcher::FeedValue(Frame& f, unsigned char c) {
  if (Whitespace(f, c)) return Step::kConsumed;
  const std::uint32_t types = f.node >= 0 ? grammar_->node(f.node).types : SchemaNode::kAnyType;
  const int node = f.node;
  Frame next;
  next.node = node;
  if (node >= 0 && !grammar_->node(node).literals.empty()) {
    next.kind = Kind::kLiteral;
    next.source = Source::kEnum;
    next.mask = ~std::uint64_t{0} >> (64 - grammar_->node(node).literals.size());
    f = next;
    return FeedLiteral(f, c);
  }
  if (c == '{' && (types & SchemaNode::kObject)) {
    next.kind = Kind::kObject;
    next.state = kOpen;
  } else if (c == '[' && (types & SchemaNode::kArray)) {
    next.kind = Kind::kArray;
    next.state = kArrayOpen;
  } else if (c == '"' && (types & SchemaNode::kString)) {
    next.kind = Kind::kString;
    next.state = kChars;
  } else if ((c == '-' || IsDigit(c)) && (types & (SchemaNode::kNumber | SchemaNode::kInteger))) {
    next.kind = Kind::kNumber;
    next.integer = !(types & SchemaNode::kNumber);
    next.state = c == '-' ? kMinus : c == '0' ? kZero : kInt;
    next.extra = IsDigit(c) ? 1 : 0;
  } else if ((c == 't' || c == 'f') && (types & SchemaNode::kBoolean)) {
    next.kind = Kind::kLiteral;
    next.source = Source::kWords;
    next.mask = c == 't' ? 1 : 2;
    next.count = 1;
  } else if (c == 'n' && (types & SchemaNode::kNull)) {
    next.kind = Kind::kLiteral;
    next.source = Source::kWords;
    next.mask = 4;
    next.count = 1;
  } else {
    return Step::kRejected;
  }
  f = next;
  return Step::kConsumed;
}

JsonMatcher::Step JsonMatcher::FeedLiteral(Frame& f, unsigned char c) {
  const auto& cands = Candidates(f);
  std::uint64_t keep = 0;
  bool done = false;
  for (std::uint64_t m = f.mask; m != 0; m &= m - 1) {
    const int i = std::countr_zero(m);
    const std::string& s = cands[static_cast<std::size_t>(i)];
    if (static_cast<int>(s.size()) > f.count && static_cast<unsigned char>(s[static_cast<std::size_t>(f.count)]) == c) {
      keep |= std::uint64_t{1} << i;
      if (static_cast<int>(s.size()) == f.count + 1) done = true;
    }
  }
  if (keep == 0) return CanEnd(f) ? Step::kEndedRetry : Step::kRejected;
  f.mask = keep;
  ++f.count;
  // A key (it ends with its quote) or a candidate that nothing else extends ends here.
  if (done) {
    bool longer = false;
    for (std::uint64_t m = keep; m != 0; m &= m - 1) {
      if (static_cast<int>(cands[static_cast<std::size_t>(std::countr_zero(m))].size()) > f.count) longer = true;
    }
    if (!longer) {
      matched_ = std::countr_zero(keep);
      return Step::kConsumedAndDone;
    }
  }
  return Step::kConsumed;
}

JsonMatcher::Step JsonMatcher::FeedString(Frame& f, unsigned char c) {
  const SchemaNode* n = f.node >= 0 ? &grammar_->node(f.node) : nullptr;
  const int max = n ? n->max_length : -1;
  switch (f.state) {
    case kChars:
      // After a \u escape of a high surrogate only the escape of its low half may follow.
      if ((f.mask & kHighSurrogatePending) != 0) {
        if (c != '\\') return Step::kRejected;
        f.state = kEscape;
        return Step::kConsumed;
      }
      if (c == '"') return (!n || f.count >= n->min_length) ? Step::kConsumedAndDone : Step::kRejected;
      if (max >= 0 && f.count >= max) return Step::kRejected;
      if (c == '\\') {
        f.state = kEscape;
        return Step::kConsumed;
      }
      if (c < 0x20 || c == 0x7F) return Step::kRejected;
      if (c < 0x80) {
        ++f.count;
        return Step::kConsumed;
      }
      // A UTF-8 lead byte, the continuation bytes it announces, and the range of the
      // first of them, packed as lo << 8 | hi.
      if (Utf8SequenceLength(c) < 2) return Step::kRejected;
      f.extra = static_cast<int>(Utf8SequenceLength(c)) - 1;
      f.mask = std::uint64_t{Utf8ContinuationRange(c, 1).first} << 8 | Utf8ContinuationRange(c, 1).second;
      f.state = kUtf8;
      ++f.count;
      return Step::kConsumed;
    case kUtf8:
      if (c < (f.mask >> 8) || c > (f.mask & 0xFF)) return Step::kRejected;
      f.mask = 0x80BF;  // later continuation bytes: any
      if (--f.extra == 0) f.state = kChars;
      return Step::kConsumed;
    case kEscape:
      if (c == 'u') {
        f.state = kUnicode;
        f.extra = 4;
        f.mask &= kHighSurrogatePending;  // the code unit's bits start empty
        return Step::kConsumed;
      }
      if ((f.mask & kHighSurrogatePending) != 0) return Step::kRejected;
      if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
        f.state = kChars;
        ++f.count;
        return Step::kConsumed;
      }
      return Step::kRejected;
    case kUnicode: {
      if (!IsHex(c)) return Step::kRejected;
      const std::uint64_t digit = IsDigit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
      f.mask = (f.mask & kHighSurrogatePending) | ((f.mask & 0xFFFF) << 4 & 0xFFFF) | digit;
      if (--f.extra > 0) return Step::kConsumed;
      // A code unit: UTF-16 surrogates only in pairs (a high one, then the low one), as
      // JSON parsers require; a pair is one code point.
      const std::uint64_t unit = f.mask & 0xFFFF;
      const bool high = unit >= 0xD800 && unit <= 0xDBFF, low = unit >= 0xDC00 && unit <= 0xDFFF;
      const bool pending = (f.mask & kHighSurrogatePending) != 0;
      if (pending != low || (pending && high)) return Step::kRejected;
      f.state = kChars;
      f.mask = high ? kHighSurrogatePending : 0;
      if (!low) ++f.count;
      return Step::kConsumed;
    }
  }
  return Step::kRejected;
}

JsonMatcher::Step JsonMatcher::FeedNumber(Frame& f, unsigned char c) {
  const bool digit = IsDigit(c);
  // Integers fit in 64 bits, so every client reads them as integers.
  if (digit && ++f.extra > (f.integer ? kMaxIntegerDigits : kMaxDigits)) return Step::kRejected;
  switch (f.state) {
    case kMinus:
      if (!digit) return Step::kRejected;
      f.state = c == '0' ? kZero : kInt;
      return Step::kConsumed;
    case kZero:
    case kInt:
      if (digit && f.state == kInt) return Step::kConsumed;
      if (c == '.' && !f.integer) {
        f.state = kDot;
        return Step::kConsumed;
      }
      if ((c == 'e' || c == 'E') && !f.integer) {
        f.state = kE;
        return Step::kConsumed;
      }
      if (digit) return Step::kRejected;  // no digits after a leading zero
      return Step::kEndedRetry;
    case kDot:
      if (!digit) return Step::kRejected;
      f.state = kFrac;
      return Step::kConsumed;
    case kFrac:
      if (digit) return Step::kConsumed;
      if (c == 'e' || c == 'E') {
        f.state = kE;
        return Step::kConsumed;
      }
      return Step::kEndedRetry;
    case kE:
      if (c == '+' || c == '-') {
        f.state = kESign;
        return Step::kConsumed;
      }
      [[fallthrough]];
    case kESign:
      if (!digit) return Step::kRejected;
      f.state = kExp;
      f.count = 1;
      return Step::kConsumed;
    case kExp:
      // At most two exponent digits: 1e999 is JSON, but no parser reads it as a number.
      if (digit) return ++f.count <= 2 ? Step::kConsumed : Step::kRejected;
      return Step::kEndedRetry;
  }
  return Step::kRejected;
}

JsonMatcher::Step JsonMatcher::FeedObject(Frame& f, unsigned char c) {
  const SchemaNode* n = f.node >= 0 ? &grammar_->node(f.node) : nullptr;
  const bool ordered = n && n->closed;
  const auto size = ordered ? static_cast<int>(n->properties.size()) : 0;
  // Whether a required property remains from index `from` on.
  const auto required_from = [&](int from) {
    for (int j = from; j < size; ++j) {
      if (n->properties[static_cast<std::size_t>(j)].required) return true;
    }
    return false;
  };
  const auto start_key = [&](int from) {
    Frame key;
    if (ordered) {
      key.kind = Kind::kLiteral;
      key.source = Source::kKeys;
      key.node = f.node;
      key.mask = KeyCandidates(*n, from);
      key.count = 1;  // the opening quote, fed here
      if (key.mask == 0) return Step::kRejected;
    } else {
      key.kind = Kind::kString;
      key.node = -1;
    }
    f.state = kKey;
    f.ws = 0;
    stack_.push_back(key);
    return Step::kConsumed;
  };
  switch (f.state) {
    case kOpen:
      if (Whitespace(f, c)) return Step::kConsumed;
      if (c == '}') return (ordered ? !required_from(0) : true) ? Step::kConsumedAndDone : Step::kRejected;
      if (c == '"') {
        if (ordered) return size > 0 ? start_key(0) : Step::kRejected;
        return start_key(0);
      }
      return Step::kRejected;
    case kNeedKey:
      if (Whitespace(f, c)) return Step::kConsumed;
      if (c == '"') return start_key(ordered ? f.count + 1 : 0);
      return Step::kRejected;
    case kColon:
      if (Whitespace(f, c)) return Step::kConsumed;
      if (c != ':') return Step::kRejected;
      {
        const int value_node = ordered ? n->properties[static_cast<std::size_t>(f.count)].node : (n ? n->additional : -1);
        f.state = kValue;
        f.ws = 0;
        stack_.push_back(ValueFrame(value_node));
      }
      return Step::kConsumed;
    case kAfterValue:
      if (Whitespace(f, c)) return Step::kConsumed;
      if (c == '}') return (ordered ? !required_from(f.count + 1) : true) ? Step::kConsumedAndDone : Step::kRejected;
      if (c == ',' && (!ordered || f.count + 1 < size)) {
        f.state = kNeedKey;
        f.ws = 0;
        return Step::kConsumed;
      }
      return Step::kRejected;
    default:
      return Step::kRejected;
  }
}

JsonMatcher::Step JsonMatcher::FeedArray(Frame& f, unsigned char c) {
  const SchemaNode* n = f.node >= 0 ? &grammar_->node(f.node) : nullptr;
  const int min = n ? n->min_items : 0, max = n ? n->max_items : -1;
  const int items = n ? n->items : -1;
  switch (f.state) {
    case kArrayOpen:
    case kNeedItem:
      if (Whitespace(f, c)) return Step::kConsumed;
      if (c == ']' && f.state == kArrayOpen) return min == 0 ? Step::kConsumedAndDone : Step::kRejected;
      if (max == 0) return Step::kRejected;
      f.state = kItem;
      stack_.push_back(ValueFrame(items));
      // The item's first byte; `f` may have moved with the push, so go through the stack.
      switch (FeedValue(stack_.back(), c)) {
        case Step::kConsumed:
          return Step::kConsumed;
        case Step::kConsumedAndDone:  // a one-byte item (an enum value like 3)
          stack_.pop_back();
          ChildDone();
          return Step::kConsumed;
        default:
          stack_.pop_back();
          stack_.back().state = stack_.back().count == 0 ? kArrayOpen : kNeedItem;
          return Step::kRejected;
      }
    case kAfterItem:
      if (Whitespace(f, c)) return Step::kConsumed;
      if (c == ']') return f.count >= min ? Step::kConsumedAndDone : Step::kRejected;
      if (c == ',' && (max < 0 || f.count < max)) {
        f.state = kNeedItem;
        f.ws = 0;
        return Step::kConsumed;
      }
      return Step::kRejected;
    default:
      return Step::kRejected;
  }
}

}  // namespace tandem::rt
