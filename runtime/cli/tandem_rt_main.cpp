// `tandem-rt`: the decode runtime's command line.
#include <exception>
#include <stdexcept>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "runtime/cli/commands.hpp"
#include "runtime/hybrid/remote_expert_executor.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/serve/runtime_revision.hpp"

int main(int argc, char** argv) {
  CLI::App app("tandem-rt: DeepSeek-V3-family MoE decode runtime", "tandem-rt");
  app.require_subcommand(1);
  app.set_version_flag("--version", "tandem-rt " + std::string(tandem::rt::RuntimeRevision()));
  tandem::rt::cli::AddInitModelCommand(app);
  tandem::rt::cli::AddInspectCommand(app);
  tandem::rt::cli::AddTokenizeCommand(app);
  tandem::rt::cli::AddEvalCommand(app);
  tandem::rt::cli::AddGenerateCommand(app);
  tandem::rt::cli::AddExpertCommand(app);
  tandem::rt::cli::AddServeCommand(app);
  tandem::rt::cli::AddQuantizeCommand(app);
  tandem::rt::cli::AddExportCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const tandem::rt::cli::CommandFailed& e) {
    fmt::print(stderr, "tandem-rt: error: {}\n", e.what());
    return e.exit_code();
  } catch (const tandem::rt::ModelError& e) {
    fmt::print(stderr, "tandem-rt: error: {}\n", e.what());
    return 2;
  } catch (const tandem::rt::RemoteExpertError& e) {
    fmt::print(stderr, "tandem-rt: error: {}\n", e.what());
    return 3;
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "tandem-rt: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "tandem-rt: internal error: {}\n", e.what());
    return 1;
  }
  return 0;
}
