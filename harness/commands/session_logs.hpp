#pragma once

#include <filesystem>
#include <string>

namespace tandem::harness {

// Where the processes of a session write their logs, beside its store: every attempt of a
// session (retries, a redo after --resume) in its own directory, so that no attempt's logs
// overwrite another's:  STORE-logs/session-N/attempt-K/ROLE.log  (N: the session's 0-based
// place in the order; K: 1 for its first attempt).
std::filesystem::path SessionLogDir(const std::filesystem::path& store, int order_index);
std::filesystem::path AttemptLogDir(const std::filesystem::path& store, int order_index, int attempt);

// In an attempt's directory when the attempt failed: why (one line, secrets scrubbed), so
// that an earlier attempt's failure is still known once a retry has replaced it in the store.
inline constexpr const char* kAttemptFailureFile = "failure.txt";
void WriteAttemptFailure(const std::filesystem::path& attempt_dir, const std::string& reason);
// What WriteAttemptFailure wrote there; "" when nothing was.
std::string ReadAttemptFailure(const std::filesystem::path& attempt_dir);

}  // namespace tandem::harness
