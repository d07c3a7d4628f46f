#pragma once

#include <stdexcept>

namespace tandem::rt {

// A checkpoint, tokenizer or config that cannot be used. The message names the
// file and, where there is one, the tensor or key at fault.
class ModelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tandem::rt
