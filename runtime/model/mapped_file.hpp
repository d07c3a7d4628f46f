#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace tandem::rt {

// A read-only memory mapping of a whole file. Weights stay in the page cache and
// are paged in on first touch; nothing is copied.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);  // throws ModelError
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace tandem::rt
