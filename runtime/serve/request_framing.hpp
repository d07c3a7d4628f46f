#pragma once

#include <string>
#include <string_view>

namespace tandem::rt {

// Why a request head (its request line, header lines and the empty line, as sent) cannot
// be trusted to say where its body ends, or "" when it can. Every line ends with CRLF;
// every header line is "Name: value" with a token for a name (no folded lines); a Content-Length is digits
// only, every copy the same; Transfer-Encoding is only "chunked", once, never beside a
// Content-Length; Host appears at most once. Anything else is how one request hides
// another on a kept-alive connection (RFC 9112, sections 5, 6.3 and 11.2), and how
// httplib would read it differently from a proxy in front: such a request is refused
// before httplib parses it, and its connection closed.
std::string RequestHeadError(std::string_view head);

}  // namespace tandem::rt
