// `tandem`: the campaign harness command line.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>

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

// What a command printed must have reached its destination: a full disk, /dev/full or a
// closed file turns a success into exit 2, naming standard output.
int CheckStandardOutput(int code) {
  std::cout.flush();
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int error = errno;
  if (flushed && std::ferror(stdout) == 0 && std::cout.good()) return code;
  fmt::print(stderr, "tandem: error: writing to standard output failed{}{}\n", error != 0 ? ": " : "",
             error != 0 ? std::strerror(error) : "");
  return code == 0 ? kBadInput : code;
}

int Run(CLI::App& app, int argc, char** argv) {
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

}  // namespace

int main(int argc, char** argv) {
  OpenStandardDescriptors();
  CLI::App app("tandem: A/B campaigns between runtime versions, with statistics you can trust", "tandem");
  app.require_subcommand(1);
  tandem::harness::AddStatsCommand(app);
  tandem::harness::AddRunCommands(app);
  tandem::reports::AddReportCommands(app);
  return CheckStandardOutput(Run(app, argc, argv));
}
