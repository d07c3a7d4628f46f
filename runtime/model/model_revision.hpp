#pragma once

#include <filesystem>
#include <string>

namespace tandem::rt {

// The checkpoint's identity: sha256 (hex) over config.json and then each weight
// file in name order, each fed as "<file name>\n<size in bytes>\n<contents>".
// The result is cached in <dir>/.tandem-revision.json and reused while every
// file's size and modification time are unchanged; a read-only directory just
// means it is recomputed each time.
// Throws ModelError when the directory is not a checkpoint.
std::string ModelRevision(const std::filesystem::path& checkpoint_dir);

}  // namespace tandem::rt
