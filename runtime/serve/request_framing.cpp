#include "runtime/serve/request_framing.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace tandem::rt {

namespace {

bool Digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// RFC 9110's token characters.
bool Token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
  });
}

bool Named(std::string_view name, std::string_view want) {
  return name.size() == want.size() &&
         std::equal(name.begin(), name.end(), want.begin(), [](char a, char b) { return std::tolower(a) == std::tolower(b); });
}

std::string_view Trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

// Quoted back to the client: short, and printable.
std::string Shown(std::string_view value) {
  std::string out;
  for (const char c : value.substr(0, 40)) out += std::isprint(static_cast<unsigned char>(c)) != 0 ? c : '?';
  return value.size() > 40 ? out + "..." : out;
}

}  // namespace

std::string RequestHeadError(std::string_view head) {
  std::string length;
  int encodings = 0, hosts = 0;
  std::size_t start = 0;
  for (int number = 1; start < head.size(); ++number) {
    std::size_t end = head.find('\n', start);
    if (end == std::string_view::npos) break;  // the head is whole: a line end closes every line
    std::string_view line = head.substr(start, end - start);
    start = end + 1;
    // httplib skips a header line that ends in LF alone, where a proxy may not.
    if (line.empty() || line.back() != '\r') return fmt::format("line {} of the request ends with LF alone (HTTP needs CRLF)", number);
    line.remove_suffix(1);
    if (line.empty()) break;    // the end of the head
    if (number == 1) continue;  // the request line: httplib's to read
    if (line.front() == ' ' || line.front() == '\t') return fmt::format("header line {} is folded (starts with white space)", number);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos || !Token(line.substr(0, colon))) {
      return fmt::format("header line {} is not 'Name: value': '{}'", number, Shown(line));
    }
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = Trim(line.substr(colon + 1));
    if (Named(name, "Content-Length")) {
      // Digits only: httplib's strtoull read "abc" as 0, "20abc" and "+20" as 20.
      if (!Digits(value) || value.size() > 18) {
        return fmt::format("Content-Length '{}' is not a number of bytes (digits only, at most 18)", Shown(value));
      }
      const std::string bytes(value.substr(std::min(value.find_first_not_of('0'), value.size() - 1)));
      if (!length.empty() && bytes != length) return fmt::format("two Content-Length headers disagree ({} and {})", length, bytes);
      length = bytes;
    } else if (Named(name, "Transfer-Encoding")) {
      if (++encodings > 1) return "more than one Transfer-Encoding header";
      if (!Named(value, "chunked")) return fmt::format("Transfer-Encoding '{}' is not supported (only chunked)", Shown(value));
    } else if (Named(name, "Host")) {
      if (++hosts > 1) return "more than one Host header";
    }
  }
  if (encodings > 0 && !length.empty()) return "a request may not have both Content-Length and Transfer-Encoding";
  return "";
}

}  // namespace tandem::rt
