#pragma once

#include <string>

namespace tandem {

// A fresh secret (a worker token): 32 bytes from the kernel's CSPRNG (getrandom), as 64
// lower-case hex digits. Throws std::runtime_error if the kernel cannot give them.
std::string NewSecretToken();

}  // namespace tandem
