#pragma once

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>

namespace tandem::rt {

// The whole file as bytes; a ModelError "PATH: cannot open" when it cannot be read.
std::string ReadTextFile(const std::filesystem::path& path);

// Writes `text` as the whole file; a ModelError "PATH: cannot write" on failure.
void WriteTextFile(const std::filesystem::path& path, const std::string& text);

// Writes a file that readers must never see half-written: `write` fills a stream on
// `path`.partial, which is renamed to `path` once complete and removed if `write`
// throws or the stream fails (ModelError naming the file: cannot write, disk full,
// cannot rename). `write` may stop early once the stream has failed.
void WriteFileWhole(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write);

}  // namespace tandem::rt
