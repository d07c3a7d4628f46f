#pragma once

#include <stdexcept>
#include <string>

namespace CLI {
class App;
}

// The roles of `tandem-rt`, one file each. Their actions throw ModelError or
// std::invalid_argument on bad input; main() turns those into exit code 2.
namespace tandem::rt::cli {

// A command that has stopped for a reason it names, with its own exit code (main prints
// "tandem-rt: error: REASON" and exits with it).
class CommandFailed : public std::runtime_error {
 public:
  CommandFailed(int exit_code, const std::string& reason) : std::runtime_error(reason), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

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
