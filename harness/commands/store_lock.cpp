#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include "common/input_error.hpp"
#include "harness/commands/campaign_run.hpp"

namespace tandem::harness {

StoreLock::StoreLock(const std::filesystem::path& db) : fd_(::open(db.c_str(), O_RDONLY | O_CLOEXEC)) {
  if (fd_ < 0) throw InputError(fmt::format("{}: cannot open: {}", db.string(), std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd_);
    throw InputError(fmt::format("{}: another `tandem run` is using this store", db.string()));
  }
}

StoreLock::~StoreLock() { ::close(fd_); }

}  // namespace tandem::harness
