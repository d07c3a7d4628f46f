#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

// Markdown for the reports: a document that remembers the samples it links to, table
// heads and rows, and text made safe for a table cell or an inline excerpt.
namespace tandem::reports {

// What a table shows for a value the campaign did not produce.
inline constexpr const char* kNone = "—";

// The document being written, and the samples it links to (listed in the appendix).
struct MarkdownDoc {
  std::string text;
  std::set<std::int64_t> linked;

  template <typename... Args>
  void Line(fmt::format_string<Args...> format, Args&&... args) {
    text += fmt::format(format, std::forward<Args>(args)...);
    text += '\n';
  }
  void Blank() { text += '\n'; }
  // "[#12](#sample-12)", and sample 12 goes into the appendix.
  std::string Link(std::int64_t sample);
  // The first `most` links, then "… (+n)".
  std::string Links(const std::vector<std::int64_t>& samples, std::size_t most = 12);
};

// Table cells must not break the table: '|' escaped, line breaks as spaces.
std::string Cell(const std::string& text);
// The first `n` characters of a hex digest in backticks, or kNone.
std::string Short(const std::string& hex, std::size_t n = 16);
// A rate in tok/s, one decimal.
std::string Rate(double v);
// At most `bytes` bytes of `text`, cut at a UTF-8 character boundary, on one line,
// with control characters as their Unicode control pictures.
std::string Excerpt(const std::string& text, std::size_t bytes);
// A table head; columns from `numbers_from` on hold figures and align right.
std::string Header(const std::vector<std::string>& columns, std::size_t numbers_from = 1);
std::string Row(const std::vector<std::string>& cells);

}  // namespace tandem::reports
