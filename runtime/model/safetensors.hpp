#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/numeric/dtype.hpp"

// The safetensors container: an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets}}, then the tensor bytes.
namespace tandem::rt {

struct TensorInfo {
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte offsets relative to the start of the data section
  std::uint64_t end = 0;

  std::int64_t elements() const;
};

struct SafetensorsHeader {
  std::uint64_t data_offset = 0;  // where the data section starts in the file
  std::map<std::string, TensorInfo, std::less<>> tensors;
  std::map<std::string, std::string> metadata;
};

// What a header may hold. HF's reader refuses headers over 100 MB too; a DeepSeek-V3
// in one file would hold ~92k tensors; real tensors have at most 5 dimensions.
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
inline constexpr std::size_t kMaxSafetensorsTensors = std::size_t{1} << 20;
inline constexpr std::size_t kMaxTensorRank = 16;

// Validates everything a reader relies on: header length within the file and the
// limits above, JSON shape (nesting at most a few levels), known dtypes, shapes
// whose byte size matches the offsets, and the layout: the tensors tile the data
// section, each byte in exactly one tensor, as HF's writer packs them — no overlap,
// nothing outside it, no bytes of no tensor except the padding that aligns a tensor
// to its element size. Throws ModelError naming `file` and the tensors at fault.
SafetensorsHeader ParseSafetensorsHeader(std::span<const std::byte> file_bytes, std::string_view file);

// Builds a safetensors file: declare every tensor, then write their bytes in the
// same order. Tensors are packed in name order (HF's writer sorts by alignment,
// then name; both leave no gaps).
class SafetensorsWriter {
 public:
  void Add(std::string name, DType dtype, std::vector<std::int64_t> shape);
  void SetMetadata(std::string key, std::string value);

  // The header bytes (length prefix + JSON padded to 8 bytes) for the declared tensors.
  std::string HeaderBytes() const;
  // Tensor names in file order, with their byte sizes.
  std::vector<std::pair<std::string, std::uint64_t>> Layout() const;
  // Bytes of the data section (the sum of the tensor sizes).
  std::uint64_t DataBytes() const;

  // Writes the file: the header, then each tensor's bytes in file order, as
  // `bytes_of(name)` returns them (a view that must stay valid until the next call;
  // one tensor at a time, so a writer never holds the whole file). Written to
  // `path`.partial and renamed, so a reader never sees half a file. Throws
  // ModelError naming the file (and the tensor whose bytes have the wrong size).
  using TensorBytes = std::function<std::span<const std::byte>(const std::string& name)>;
  void Write(const std::filesystem::path& path, const TensorBytes& bytes_of) const;

 private:
  std::map<std::string, TensorInfo, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace tandem::rt
