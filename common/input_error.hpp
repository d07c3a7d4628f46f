#pragma once

#include <stdexcept>

namespace tandem {

// Bad input from outside (a file, a flag value): the message names what is wrong
// and where, so the user can fix it. The `tandem` command exits with code 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tandem
