#pragma once

#include <string>

namespace tandem::harness {

// The shared secret of a session's coordinator and expert workers: runtimes that
// authenticate workers read it from this variable (older ones ignore it). The harness sets
// it in the environment of every process of a session, never on a command line, and never
// stores or prints it.
inline constexpr const char* kWorkerTokenVariable = "TANDEM_WORKER_TOKEN";

// A fresh token for it: tandem::NewSecretToken (common/secret_token.hpp).

}  // namespace tandem::harness
