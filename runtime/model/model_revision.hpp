#pragma once

#include <filesystem>
#include <string>

#include "runtime/model/load_progress.hpp"

namespace tandem::rt {

// The checkpoint's identity: sha256 (hex) over config.json and then each weight
// file in name order, each fed as "<file name>\n<size in bytes>\n<contents>".
// The result is cached in <dir>/.tandem-revision.json and reused while every
// file's size and modification time are unchanged; a read-only directory just
// means it is recomputed each time.
// Throws ModelError when the directory is not a checkpoint.
std::string ModelRevision(const std::filesystem::path& checkpoint_dir);
// The same, reporting (Phase::kRevision) as it hashes, about every megabyte, when the
// cache does not answer.
std::string ModelRevision(const std::filesystem::path& checkpoint_dir, const LoadProgressFn& progress);

}  // namespace tandem::rt
