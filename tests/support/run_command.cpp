#include "tests/support/run_command.hpp"

#include <future>

#include <boost/asio/io_context.hpp>
#include <boost/process.hpp>

#include "common/child_wait.hpp"

namespace tandem::testing {

CommandResult RunCommand(const std::string& program, const std::vector<std::string>& args, std::chrono::seconds timeout) {
  namespace bp = boost::process;
  boost::asio::io_context io;
  std::future<std::string> out;
  std::future<std::string> err;
  bp::child child(bp::exe = program, bp::args = args, bp::std_in.close(), bp::std_out > out, bp::std_err > err, io);
  CommandResult result;
  // Pumps both pipes until they close (the child exited) or time runs out.
  io.run_for(timeout);
  if (!io.stopped()) {
    result.timed_out = true;
    KillAndReap(child);
    io.run_for(std::chrono::seconds(5));
  }
  std::error_code ec;
  child.wait(ec);
  result.exit_code = child.exit_code();
  if (out.wait_for(std::chrono::seconds(0)) == std::future_status::ready) result.out = out.get();
  if (err.wait_for(std::chrono::seconds(0)) == std::future_status::ready) result.err = err.get();
  return result;
}

}  // namespace tandem::testing
