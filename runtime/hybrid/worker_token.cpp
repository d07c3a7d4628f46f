#include "runtime/hybrid/worker_token.hpp"

#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "runtime/hybrid/handshake_auth.hpp"

namespace tandem::rt {

namespace {

// A recorded handshake lets anyone test guesses of the token offline, as fast as they can
// compute HMACs: a short token, or a word, falls quickly. Length is all that is checked.
constexpr std::size_t kMinTokenLength = 16;

// `token`, unless it is too short; `source` names where it came from.
std::string Checked(std::string token, const std::string& source) {
  if (token.size() < kMinTokenLength) {
    throw std::invalid_argument(fmt::format(
        "{} holds a token of {} characters; a worker token must have at least {}, and should be random (e.g. `openssl rand -hex 32`): a "
        "recorded handshake lets anyone test guesses offline",
        source, token.size(), kMinTokenLength));
  }
  return token;
}

std::string Trim(const std::string& text) {
  const char* space = " \t\r\n\v\f";
  const auto begin = text.find_first_not_of(space);
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(space) - begin + 1);
}

std::string ReadTokenFile(const std::filesystem::path& file) {
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  if (ec || !std::filesystem::is_regular_file(status)) {
    throw std::invalid_argument(fmt::format("--worker-token-file {}: not a readable file", file.string()));
  }
  using std::filesystem::perms;
  if ((status.permissions() & (perms::group_read | perms::others_read)) != perms::none) {
    throw std::invalid_argument(
        fmt::format("--worker-token-file {}: group or others may read it; make it private (chmod 600 {})", file.string(), file.string()));
  }
  std::ifstream in(file);
  if (!in) throw std::invalid_argument(fmt::format("--worker-token-file {}: cannot open it", file.string()));
  std::string line;
  std::getline(in, line);  // an empty file leaves it empty
  if (in.bad()) throw std::invalid_argument(fmt::format("--worker-token-file {}: cannot read it", file.string()));
  std::string token = Trim(line);
  if (token.empty()) throw std::invalid_argument(fmt::format("--worker-token-file {}: its first line holds no token", file.string()));
  return Checked(std::move(token), fmt::format("--worker-token-file {}", file.string()));
}

}  // namespace

std::optional<std::string> LoadWorkerToken(const std::filesystem::path& file) {
  if (!file.empty()) return ReadTokenFile(file);
  const char* value = std::getenv(kWorkerTokenEnv);
  if (value == nullptr) return std::nullopt;
  std::string token = Trim(value);
  if (token.empty()) {
    throw std::invalid_argument(fmt::format("{} is set but empty: set it to the workers' token, or unset it to use none", kWorkerTokenEnv));
  }
  return Checked(std::move(token), kWorkerTokenEnv);
}

}  // namespace tandem::rt
