// `tandem`: the campaign harness command line.
#include <exception>

#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/input_error.hpp"
#include "harness/commands/run_command.hpp"
#include "harness/commands/stats_command.hpp"
#include "reports/report_commands.hpp"
#include "stats/stats_error.hpp"

namespace {

constexpr int kBadInput = 2;

// Started with stdin (or stdout/stderr) closed, the next file we open would take fd 0,
// and the child processes we launch would inherit a log or socket as stdin: give the
// standard descriptors /dev/null first.
void OpenStandardDescriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) == -1 && ::open("/dev/null", O_RDWR) != fd) return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  OpenStandardDescriptors();
  CLI::App app("tandem: A/B campaigns between runtime versions, with statistics you can trust", "tandem");
  app.require_subcommand(1);
  tandem::harness::AddStatsCommand(app);
  tandem::harness::AddRunCommands(app);
  tandem::reports::AddReportCommands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the parser's message and usage hint
    return kBadInput;
  } catch (const tandem::CommandExit& e) {
    return e.code;
  } catch (const tandem::InputError& e) {
    fmt::print(stderr, "tandem: error: {}\n", e.what());
    return kBadInput;
  } catch (const tandem::stats::StatsError& e) {
    fmt::print(stderr, "tandem: error: {}\n", e.what());
    return kBadInput;
  } catch (const std::exception& e) {
    fmt::print(stderr, "tandem: internal error: {}\n", e.what());
    return 1;
  }
  return 0;
}
