#pragma once

namespace CLI {
class App;
}

namespace tandem::harness {

// `tandem run`, `tandem sessions` and `tandem show`.
void AddRunCommands(CLI::App& app);

// Thrown by a command whose work finished but whose result is a non-zero exit code
// (e.g. a campaign with failed sessions); main() returns `code`.
struct CommandExit {
  int code = 0;
};

}  // namespace tandem::harness
