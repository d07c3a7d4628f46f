#pragma once

#include <cstddef>

// What one HTTP request may cost the server, before any of it reaches the model: the
// bounds docs/security.md lists. Each is far above what a legitimate OpenAI request
// needs and low enough that the worst request stays cheap (linear time, bounded stack).
namespace tandem::rt::limits {

inline constexpr std::size_t kBodyBytes = 16u << 20;     // request body (413 beyond)
inline constexpr int kJsonDepth = 64;                    // nesting of arrays and objects in a body (400 beyond)
inline constexpr std::size_t kObjectMembers = 256;       // keys in one JSON object (400 beyond); ordered objects insert in linear time
inline constexpr std::size_t kArrayElements = 1u << 20;  // elements in one JSON array (400 beyond)
// A response_format schema has its own bounds: JsonGrammar::kMaxDepth and kMaxNodes.

}  // namespace tandem::rt::limits
