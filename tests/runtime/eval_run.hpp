#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/run_command.hpp"

namespace tandem::testing {

// `tandem-rt eval` on a fixed 16-token prompt with `decode` greedy steps (one
// thread), plus `extra` flags (a layout, an expert input precision, ...).
struct EvalRun {
  CommandResult run;
  std::vector<float> logits;  // [positions × vocab]
  std::vector<int> tokens;
  int vocab = 0;
};
EvalRun RunEval(const std::filesystem::path& model, const std::vector<std::string>& extra, int decode = 64);

// max over rows of max|a − b| / max|b|: how far two runs' logits are apart.
double MaxRelativeError(const std::vector<float>& a, const std::vector<float>& b, int vocab);
inline double MaxRelativeError(const EvalRun& a, const EvalRun& b) { return MaxRelativeError(a.logits, b.logits, b.vocab); }

// The whole of a file, and a file written whole (test fixtures).
std::string ReadFile(const std::filesystem::path& path);
void WriteFile(const std::filesystem::path& path, const std::string& bytes);

}  // namespace tandem::testing
