#include "common/secret_token.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <sys/random.h>

#include <fmt/format.h>

namespace tandem {

std::string NewSecretToken() {
  std::array<unsigned char, 32> bytes{};
  std::size_t have = 0;
  while (have < bytes.size()) {
    // Blocks only until the kernel's pool is first initialised (early boot), never after.
    const ssize_t n = ::getrandom(bytes.data() + have, bytes.size() - have, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(fmt::format("cannot make a secret token: getrandom: {}", std::strerror(errno)));
    }
    have += static_cast<std::size_t>(n);
  }
  std::string hex;
  for (const unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

}  // namespace tandem
