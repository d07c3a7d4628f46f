#pragma once

namespace CLI {
class App;
}

namespace tandem::harness {

// Adds `tandem stats compare` and `tandem stats weighted` to the command line.
// Their actions throw InputError / stats::StatsError on bad input.
void AddStatsCommand(CLI::App& app);

}  // namespace tandem::harness
