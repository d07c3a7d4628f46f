#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

// Bounds on JSON text from outside (a request body, a file header), checked in one pass
// that builds nothing, before the text is parsed into values: nesting costs recursion
// when values are copied or destroyed, and nlohmann's own hooks for this (a parser
// callback) cost time quadratic in the length of arrays of objects.
namespace tandem::rt {

struct JsonBounds {
  int max_depth = 64;                        // nested arrays and objects
  std::size_t max_object_members = 1 << 20;  // keys of one object
  std::size_t max_array_elements = 1 << 20;  // elements of one array
};

struct JsonExcess {
  enum class Kind { kDepth, kObjectMembers, kArrayElements } kind;
  std::size_t limit;  // the bound it went beyond
};

// The first bound `text` goes beyond, if any. Linear in the text. Syntax errors are
// not reported: the parse that follows reports them, with their position.
std::optional<JsonExcess> FindJsonExcess(std::string_view text, const JsonBounds& bounds);

}  // namespace tandem::rt
