#include "reports/markdown.hpp"

#include <algorithm>

#include <fmt/ranges.h>

namespace tandem::reports {

std::string MarkdownDoc::Link(std::int64_t sample) {
  linked.insert(sample);
  return fmt::format("[#{}](#sample-{})", sample, sample);
}

std::string MarkdownDoc::Links(const std::vector<std::int64_t>& samples, std::size_t most) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < samples.size() && i < most; ++i) parts.push_back(Link(samples[i]));
  std::string out = fmt::format("{}", fmt::join(parts, " "));
  if (samples.size() > most) out += fmt::format(" … (+{})", samples.size() - most);
  return out;
}

std::string Cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

std::string Short(const std::string& hex, std::size_t n) { return hex.empty() ? kNone : fmt::format("`{}`", hex.substr(0, n)); }

std::string Rate(double v) { return fmt::format("{:.1f}", v); }

std::string Excerpt(const std::string& text, std::size_t bytes) {
  std::size_t end = std::min(bytes, text.size());
  while (end > 0 && end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  std::string out;
  for (const char c : text.substr(0, end)) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\r' || c == '`' || c == '|') {
      out += ' ';
    } else if (u < 0x20 || u == 0x7F) {
      // Control characters a model emitted, shown as their Unicode control pictures
      // (U+2400 + c; DEL as U+2421) so the markdown stays text.
      const unsigned picture = u == 0x7F ? 0x2421 : 0x2400 + u;
      out += static_cast<char>(0xE0 | (picture >> 12));
      out += static_cast<char>(0x80 | ((picture >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (picture & 0x3F));
    } else {
      out += c;
    }
  }
  return out;
}

std::string Header(const std::vector<std::string>& columns, std::size_t numbers_from) {
  std::string out = "|";
  for (const std::string& c : columns) out += " " + c + " |";
  out += "\n|";
  for (std::size_t i = 0; i < columns.size(); ++i) out += i < numbers_from ? "---|" : "---:|";
  return out;
}

std::string Row(const std::vector<std::string>& cells) {
  std::string out = "|";
  for (const std::string& c : cells) out += " " + c + " |";
  return out;
}

}  // namespace tandem::reports
