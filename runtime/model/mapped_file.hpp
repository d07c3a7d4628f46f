#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace tandem::rt {

// A read-only memory mapping of a whole file, paged in on first touch.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);  // throws ModelError
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  // Drops this process's pages of a range it has copied and will not read again
  // (only pages wholly inside it): they leave its resident set, not the page cache,
  // and a later read maps them again.
  void Release(std::size_t offset, std::size_t bytes) const;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace tandem::rt
