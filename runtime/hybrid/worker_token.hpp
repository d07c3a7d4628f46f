#pragma once

#include <filesystem>
#include <optional>
#include <string>

// The shared secret that lets a coordinator use an expert worker (docs/wire-protocol.md,
// "Authentication"). Workers and coordinators read the same one; the handshake proves
// it without sending it.
namespace tandem::rt {

inline constexpr char kWorkerTokenEnv[] = "TANDEM_WORKER_TOKEN";

// The token of `--worker-token-file FILE` when `file` is not empty (its first line), else
// $TANDEM_WORKER_TOKEN, else none; surrounding whitespace trimmed. Throws
// std::invalid_argument (exit 2) for an empty token, one shorter than 16 characters (a
// recorded handshake lets anyone test guesses offline), a file that cannot be read, or
// one that group or others may read (as ssh refuses such a key). Never logs the token.
std::optional<std::string> LoadWorkerToken(const std::filesystem::path& file);

}  // namespace tandem::rt
