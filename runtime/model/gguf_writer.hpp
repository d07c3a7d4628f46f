#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <variant>
#include <vector>

// The GGUF container (version 3) that llama.cpp-family runtimes read: a header of typed
// key/value metadata and tensor descriptions, then the tensor data, each tensor aligned
// to 32 bytes. Dimensions are listed innermost first (ne[0] is a matrix's column count).
namespace tandem::rt {

// The ggml element types this project writes (values of ggml's `enum ggml_type`).
enum class GgmlType : std::uint32_t { kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ8_0 = 8, kBF16 = 30 };

// Values per block and bytes per block (1 value, or a 32-value block with its fp16 scale).
std::int64_t GgmlBlockValues(GgmlType type);
std::int64_t GgmlBlockBytes(GgmlType type);
// llama.cpp's general.file_type for a file whose weights are mostly `type`.
std::uint32_t GgmlFileType(GgmlType type);
// "f32", "f16", "bf16", "q8_0", "q4_0" and back; an unknown name is std::invalid_argument.
std::string GgmlTypeName(GgmlType type);
GgmlType GgmlTypeFromName(const std::string& name);
// Bytes of a tensor of `ne` values of `type`; ne[0] must be a whole number of blocks.
std::uint64_t GgmlTensorBytes(GgmlType type, std::span<const std::uint64_t> ne);

class GgufWriter {
 public:
  using Value = std::variant<std::uint32_t, std::int32_t, float, bool, std::string, std::vector<std::string>, std::vector<std::int32_t>>;

  // Metadata in the order given. A key given twice is a std::invalid_argument.
  void Set(std::string key, Value value);
  // A tensor of dimensions `ne` (innermost first). Throws std::invalid_argument for a
  // name longer than ggml's 63 characters, a duplicate, or a row that is not whole blocks.
  void AddTensor(std::string name, GgmlType type, std::vector<std::uint64_t> ne);

  // Receives one tensor's bytes, in as many pieces as its producer likes.
  using Emit = std::function<void(std::span<const std::byte>)>;
  using TensorProducer = std::function<void(const std::string& name, const Emit& emit)>;
  // Writes the file: header, then each tensor in the order added, as `produce` emits it
  // (one tensor at a time; a producer that emits another byte count than the tensor's
  // size is a ModelError naming it). Written to `path`.partial and renamed.
  void Write(const std::filesystem::path& path, const TensorProducer& produce) const;

  std::uint64_t DataBytes() const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<std::uint64_t> ne;
    std::uint64_t bytes = 0;
  };
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace tandem::rt
