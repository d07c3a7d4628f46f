#include "runtime/model/gguf_writer.hpp"

#include <algorithm>
#include <bit>
#include <ostream>
#include <stdexcept>

#include <fmt/format.h>

#include "runtime/model/ggml_blocks.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/text_file.hpp"

namespace tandem::rt {

namespace {

constexpr std::uint32_t kMagic = 0x46554747;  // "GGUF" in file order
constexpr std::uint32_t kVersion = 3;
constexpr std::uint64_t kAlignment = 32;  // ggml's default: no general.alignment key needed
constexpr std::size_t kMaxTensorName = 63;

// GGUF value types.
enum : std::uint32_t { kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8, kArray = 9 };

class HeaderBytes {
 public:
  void Byte(std::uint8_t v) { Little(v, 1); }
  void U32(std::uint32_t v) { Little(v, 4); }
  void U64(std::uint64_t v) { Little(v, 8); }
  void I32(std::int32_t v) { U32(static_cast<std::uint32_t>(v)); }
  void F32(float v) { U32(std::bit_cast<std::uint32_t>(v)); }
  void String(const std::string& s) {
    U64(s.size());
    bytes_ += s;
  }
  void Pad(std::uint64_t alignment) { bytes_.append((alignment - bytes_.size() % alignment) % alignment, '\0'); }
  const std::string& bytes() const { return bytes_; }

 private:
  void Little(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i, v >>= 8) bytes_.push_back(static_cast<char>(v & 0xff));
  }
  std::string bytes_;
};

void PutValue(HeaderBytes& h, const GgufWriter::Value& value) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::uint32_t>) {
          h.U32(kU32), h.U32(v);
        } else if constexpr (std::is_same_v<T, std::int32_t>) {
          h.U32(kI32), h.I32(v);
        } else if constexpr (std::is_same_v<T, float>) {
          h.U32(kF32), h.F32(v);
        } else if constexpr (std::is_same_v<T, bool>) {
          h.U32(kBool), h.Byte(v ? 1 : 0);  // one byte
        } else if constexpr (std::is_same_v<T, std::string>) {
          h.U32(kString), h.String(v);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          h.U32(kArray), h.U32(kString), h.U64(v.size());
          for (const auto& s : v) h.String(s);
        } else {
          h.U32(kArray), h.U32(kI32), h.U64(v.size());
          for (std::int32_t x : v) h.I32(x);
        }
      },
      value);
}

}  // namespace

namespace {

// Each type's name, llama.cpp's general.file_type for files mostly of that type, and block.
struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;
  std::uint32_t file_type;
  std::int64_t block_values;
  std::int64_t block_bytes;
};

constexpr GgmlTypeInfo kGgmlTypes[] = {
    {GgmlType::kF32, "f32", 0, 1, 4},
    {GgmlType::kF16, "f16", 1, 1, 2},
    {GgmlType::kBF16, "bf16", 32, 1, 2},
    {GgmlType::kQ8_0, "q8_0", 7, kGgmlBlockValues, kQ8_0BlockBytes},
    {GgmlType::kQ4_0, "q4_0", 2, kGgmlBlockValues, kQ4_0BlockBytes},
};

const GgmlTypeInfo& InfoOf(GgmlType type) {
  for (const GgmlTypeInfo& t : kGgmlTypes) {
    if (t.type == type) return t;
  }
  throw std::invalid_argument("unknown ggml type");
}

}  // namespace

std::int64_t GgmlBlockValues(GgmlType type) { return InfoOf(type).block_values; }
std::int64_t GgmlBlockBytes(GgmlType type) { return InfoOf(type).block_bytes; }
std::uint32_t GgmlFileType(GgmlType type) { return InfoOf(type).file_type; }
std::string GgmlTypeName(GgmlType type) { return std::string(InfoOf(type).name); }

GgmlType GgmlTypeFromName(const std::string& name) {
  for (const GgmlTypeInfo& t : kGgmlTypes) {
    if (t.name == name) return t.type;
  }
  throw std::invalid_argument(fmt::format("unknown GGUF type '{}' (f32, f16, bf16, q8_0, q4_0)", name));
}

std::uint64_t GgmlTensorBytes(GgmlType type, std::span<const std::uint64_t> ne) {
  if (ne.empty()) return 0;
  const auto block = static_cast<std::uint64_t>(GgmlBlockValues(type));
  if (ne[0] % block != 0) throw std::invalid_argument(fmt::format("a row of {} values is not whole blocks of {}", ne[0], block));
  std::uint64_t n = ne[0] / block * static_cast<std::uint64_t>(GgmlBlockBytes(type));
  for (std::size_t d = 1; d < ne.size(); ++d) n *= ne[d];
  return n;
}

void GgufWriter::Set(std::string key, Value value) {
  if (std::any_of(metadata_.begin(), metadata_.end(), [&](const auto& kv) { return kv.first == key; })) {
    throw std::invalid_argument(fmt::format("GGUF metadata key '{}' set twice", key));
  }
  metadata_.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::AddTensor(std::string name, GgmlType type, std::vector<std::uint64_t> ne) {
  if (name.empty() || name.size() > kMaxTensorName) {
    throw std::invalid_argument(fmt::format("GGUF tensor name '{}' is empty or longer than {} characters", name, kMaxTensorName));
  }
  if (ne.empty() || ne.size() > 4) throw std::invalid_argument(fmt::format("GGUF tensor '{}': {} dimensions (1 to 4)", name, ne.size()));
  if (std::any_of(tensors_.begin(), tensors_.end(), [&](const Tensor& t) { return t.name == name; })) {
    throw std::invalid_argument(fmt::format("GGUF tensor '{}' added twice", name));
  }
  std::uint64_t bytes = 0;
  try {
    bytes = GgmlTensorBytes(type, ne);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("GGUF tensor '{}': {}", name, e.what()));
  }
  tensors_.push_back({std::move(name), type, std::move(ne), bytes});
}

std::uint64_t GgufWriter::DataBytes() const {
  std::uint64_t total = 0;
  for (const Tensor& t : tensors_) total += (t.bytes + kAlignment - 1) / kAlignment * kAlignment;
  return total;
}

void GgufWriter::Write(const std::filesystem::path& path, const TensorProducer& produce) const {
  HeaderBytes h;
  h.U32(kMagic);
  h.U32(kVersion);
  h.U64(tensors_.size());
  h.U64(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    h.String(key);
    PutValue(h, value);
  }
  std::uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    h.String(t.name);
    h.U32(static_cast<std::uint32_t>(t.ne.size()));
    for (std::uint64_t n : t.ne) h.U64(n);
    h.U32(static_cast<std::uint32_t>(t.type));
    h.U64(offset);
    offset += (t.bytes + kAlignment - 1) / kAlignment * kAlignment;
  }
  h.Pad(kAlignment);

  WriteFileWhole(path, [&](std::ostream& out) {
    out.write(h.bytes().data(), static_cast<std::streamsize>(h.bytes().size()));
    static const char kZeros[kAlignment] = {};
    for (const Tensor& t : tensors_) {
      std::uint64_t written = 0;
      produce(t.name, [&](std::span<const std::byte> bytes) {
        written += bytes.size();
        if (written > t.bytes) {
          throw ModelError(fmt::format("{}: tensor '{}' got more than its {} bytes", path.string(), t.name, t.bytes));
        }
        out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      });
      if (written != t.bytes) {
        throw ModelError(fmt::format("{}: tensor '{}' got {} bytes, its size is {}", path.string(), t.name, written, t.bytes));
      }
      out.write(kZeros, static_cast<std::streamsize>((kAlignment - t.bytes % kAlignment) % kAlignment));
      if (!out) break;
    }
  });
}

}  // namespace tandem::rt
