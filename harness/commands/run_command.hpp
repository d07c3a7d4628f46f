#pragma once

#include "common/command_exit.hpp"

namespace CLI {
class App;
}

namespace tandem::harness {

// `tandem run`, `tandem sessions` and `tandem show`.
void AddRunCommands(CLI::App& app);

}  // namespace tandem::harness
