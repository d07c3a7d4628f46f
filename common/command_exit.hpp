#pragma once

namespace tandem {

// Thrown by a `tandem` command whose work finished but whose result is a non-zero
// exit code (a campaign with failed sessions, a failing gate); main() returns `code`.
struct CommandExit {
  int code = 0;
};

}  // namespace tandem
