#pragma once

#include <filesystem>

namespace tandem::testing {

// A synthetic "tiny" checkpoint (seed 1) with a byte-level tokenizer, written once
// per test process into a temporary directory that is removed at exit. Byte-level
// keeps the engine tests independent of the downloaded DeepSeek-V3 tokenizer.
const std::filesystem::path& TinyCheckpoint();

// The same for the "small" preset (seed 1): ~400 MB, written once per test process.
const std::filesystem::path& SmallCheckpoint();

// The trained "mini" checkpoint committed under models/mini/checkpoint (read in place,
// never written). Throws when it is missing: a test that needs it fails, it does not skip.
const std::filesystem::path& MiniCheckpoint();

// A fresh temporary directory, removed at process exit.
std::filesystem::path TempDir(const char* tag);

}  // namespace tandem::testing
