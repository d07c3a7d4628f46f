#pragma once

#include <string_view>

namespace tandem::rt {

// The git commit this runtime was built from ("<sha>" or "<sha>-dirty"; "unknown"
// outside a git checkout). Written at build time by cmake/TandemRevision.cmake.
std::string_view RuntimeRevision();

}  // namespace tandem::rt
