#pragma once

#include <string>
#include <vector>

namespace tandem::harness {

// `text` as one word of a POSIX shell command: single-quoted, with each ' as '\''.
std::string ShellQuote(const std::string& text);

// argv as a shell command line (each word quoted).
std::string ShellJoin(const std::vector<std::string>& argv);

}  // namespace tandem::harness
