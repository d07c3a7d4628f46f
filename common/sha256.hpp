#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace tandem {

// Lower-case hex SHA-256 of bytes, and of a file's contents (image ids). FileSha256
// throws InputError naming a file it cannot read.
std::string Sha256Hex(std::string_view bytes);
std::string FileSha256(const std::filesystem::path& file);

}  // namespace tandem
