#pragma once

namespace CLI {
class App;
}

namespace tandem::reports {

// `tandem report`, `tandem gate` and `tandem export`.
void AddReportCommands(CLI::App& app);

}  // namespace tandem::reports
