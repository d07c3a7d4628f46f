#pragma once

namespace CLI {
class App;
}

// The roles of `tandem-rt`, one file each. Their actions throw ModelError or
// std::invalid_argument on bad input; main() turns those into exit code 2.
namespace tandem::rt::cli {

void AddInitModelCommand(CLI::App& app);
void AddInspectCommand(CLI::App& app);
void AddTokenizeCommand(CLI::App& app);
void AddEvalCommand(CLI::App& app);
void AddGenerateCommand(CLI::App& app);
void AddExpertCommand(CLI::App& app);
void AddServeCommand(CLI::App& app);
void AddQuantizeCommand(CLI::App& app);
void AddExportCommand(CLI::App& app);

}  // namespace tandem::rt::cli
