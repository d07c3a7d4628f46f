#include "runtime/serve/reply_text.hpp"

namespace tandem::rt {

ReplyText::ReplyText(const Tokenizer& tokenizer, std::vector<std::string> stop, TokenId think_end)
    : content_(tokenizer, std::move(stop)),
      thought_(think_end >= 0 ? std::make_unique<CompletionText>(tokenizer, std::vector<std::string>{}) : nullptr),
      think_end_(think_end),
      thinking_(think_end >= 0) {}

std::vector<ReplyText::Piece> ReplyText::Push(TokenId id) {
  std::vector<Piece> out;
  if (thinking_) {
    ++reasoning_tokens_;
    std::string text = id == think_end_ ? thought_->Flush() : thought_->Push(id);
    if (!text.empty()) out.push_back({std::move(text), true});
    if (id == think_end_) thinking_ = false;
    return out;
  }
  std::string text = content_.Push(id);
  if (!text.empty()) out.push_back({std::move(text), false});
  return out;
}

std::vector<ReplyText::Piece> ReplyText::Flush() {
  std::vector<Piece> out;
  if (thinking_) {
    std::string text = thought_->Flush();
    if (!text.empty()) out.push_back({std::move(text), true});
  }
  std::string text = content_.Flush();
  if (!text.empty()) out.push_back({std::move(text), false});
  return out;
}

}  // namespace tandem::rt
