#pragma once

#include <filesystem>
#include <string>

namespace tandem::rt {

// The whole file as bytes; a ModelError "PATH: cannot open" when it cannot be read.
std::string ReadTextFile(const std::filesystem::path& path);

// Writes `text` as the whole file; a ModelError "PATH: cannot write" on failure.
void WriteTextFile(const std::filesystem::path& path, const std::string& text);

}  // namespace tandem::rt
