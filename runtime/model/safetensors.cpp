#include "runtime/model/safetensors.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/model/json_bounds.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/text_file.hpp"

namespace tandem::rt {

namespace {

using nlohmann::json;

// Containers a header needs: the header, a tensor entry, its shape. Deeper nesting
// is garbage, and would make nlohmann's (recursive) dump overflow the stack.
constexpr int kMaxJsonDepth = 8;

std::uint64_t ReadU64(std::span<const std::byte> bytes) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(bytes[static_cast<std::size_t>(i)]);
  return v;
}

// A JSON value for an error message, cut short.
std::string Excerpt(const json& value) {
  std::string text = value.dump();
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

TensorInfo ParseTensor(const std::string& name, const json& entry, std::uint64_t data_size, std::string_view file) {
  auto fail = [&](std::string_view what) { return ModelError(fmt::format("{}: tensor '{}': {}", file, name, what)); };
  if (!entry.is_object()) throw fail("header entry is not an object");
  TensorInfo info;

  const auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) throw fail("missing 'dtype'");
  const auto parsed = DTypeFromName(dtype->get_ref<const std::string&>());
  if (!parsed) throw fail(fmt::format("unknown dtype '{}'", dtype->get_ref<const std::string&>()));
  info.dtype = *parsed;

  const auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) throw fail("missing 'shape'");
  if (shape->size() > kMaxTensorRank)
    throw fail(fmt::format("shape has {} dimensions; at most {} are supported", shape->size(), kMaxTensorRank));
  std::uint64_t elements = 1;
  for (const json& dim : *shape) {
    if (!dim.is_number_unsigned()) throw fail(fmt::format("shape {} has a non-integer or negative dimension", Excerpt(*shape)));
    const std::uint64_t d = dim.get<std::uint64_t>();
    if (d > 0 && elements > std::numeric_limits<std::int64_t>::max() / d) throw fail(fmt::format("shape {} overflows", Excerpt(*shape)));
    elements *= d;
    info.shape.push_back(static_cast<std::int64_t>(d));
  }

  const auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned()) {
    throw fail("'data_offsets' must be two non-negative integers");
  }
  info.begin = (*offsets)[0].get<std::uint64_t>();
  info.end = (*offsets)[1].get<std::uint64_t>();
  if (info.begin > info.end) throw fail("data_offsets begin after they end");
  if (info.end > data_size) {
    throw fail(fmt::format("data ends at byte {} but the file has only {} data bytes (truncated file?)", info.end, data_size));
  }
  const std::uint64_t size = DTypeSize(info.dtype);
  if (elements > std::numeric_limits<std::uint64_t>::max() / size) {
    throw fail(fmt::format("shape {} of {} needs more bytes than a file can hold", Excerpt(*shape), DTypeName(info.dtype)));
  }
  if (elements * size != info.end - info.begin) {
    throw fail(fmt::format("shape {} of {} needs {} bytes but data_offsets span {}", Excerpt(*shape), DTypeName(info.dtype),
                           elements * size, info.end - info.begin));
  }
  return info;
}

// The header's JSON, refusing deep nesting and too many entries before it is built
// (where either would cost stack or time).
json ParseHeaderJson(const char* text, std::uint64_t size, std::string_view file) {
  const std::string_view view(text, size);
  const JsonBounds bounds{.max_depth = kMaxJsonDepth,
                          .max_object_members = kMaxSafetensorsTensors + 1,  // + __metadata__
                          .max_array_elements = kMaxSafetensorsTensors};
  if (const std::optional<JsonExcess> excess = FindJsonExcess(view, bounds)) {
    switch (excess->kind) {
      case JsonExcess::Kind::kDepth:
        throw ModelError(fmt::format("{}: header nests deeper than {} levels; not a safetensors header", file, kMaxJsonDepth));
      case JsonExcess::Kind::kObjectMembers:
        throw ModelError(fmt::format("{}: header declares more than {} tensors", file, kMaxSafetensorsTensors));
      case JsonExcess::Kind::kArrayElements:
        throw ModelError(fmt::format("{}: header has an array of more than {} elements", file, kMaxSafetensorsTensors));
    }
  }
  try {
    return json::parse(view);
  } catch (const json::exception& e) {
    throw ModelError(fmt::format("{}: header is not valid JSON: {}", file, e.what()));
  }
}

// HF's writer packs tensors one after another from byte 0 to the end of the file
// (sorted by alignment, then name), and its reader refuses anything else. Here the
// tensors must tile the data section the same way, except that a tensor may follow
// the padding that aligns it to its element size. A byte of two tensors, or of none,
// is a corrupt or crafted header (offsets off by some bytes, a hidden payload).
// Empty tensors hold no bytes and may be anywhere in the section. O(n log n).
void CheckLayout(const SafetensorsHeader& header, std::uint64_t data_size, std::string_view file) {
  struct Span {
    std::uint64_t begin, end;
    const std::string* name;
    DType dtype;
  };
  std::vector<Span> spans;
  spans.reserve(header.tensors.size());
  for (const auto& [name, info] : header.tensors) {
    if (info.end > info.begin) spans.push_back({info.begin, info.end, &name, info.dtype});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end != b.end ? a.end < b.end : *a.name < *b.name;
  });
  const auto where = [](const Span& s) { return fmt::format("'{}' [{}, {})", *s.name, s.begin, s.end); };
  const auto unowned = [&](std::uint64_t from, std::uint64_t to, const std::string& context) {
    return ModelError(
        fmt::format("{}: bytes [{}, {}) of the data section belong to no tensor ({}); not a layout the safetensors library writes", file,
                    from, to, context));
  };
  const Span* last = nullptr;  // the tensor that ends furthest so far
  for (const Span& s : spans) {
    const std::uint64_t covered = last == nullptr ? 0 : last->end;
    if (s.begin < covered) throw ModelError(fmt::format("{}: tensors {} and {} overlap", file, where(*last), where(s)));
    const std::uint64_t align = DTypeSize(s.dtype);
    if (s.begin > covered && (s.begin - covered >= align || s.begin % align != 0)) {
      throw unowned(covered, s.begin, last == nullptr ? "before " + where(s) : "between " + where(*last) + " and " + where(s));
    }
    last = &s;
  }
  const std::uint64_t covered = last == nullptr ? 0 : last->end;
  if (covered < data_size) {
    throw unowned(covered, data_size, last == nullptr ? "the header declares no tensor data" : "after the last tensor, " + where(*last));
  }
}

}  // namespace

std::int64_t TensorInfo::elements() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

SafetensorsHeader ParseSafetensorsHeader(std::span<const std::byte> file_bytes, std::string_view file) {
  if (file_bytes.size() < 8) {
    throw ModelError(fmt::format("{}: {} bytes is too short for a safetensors file", file, file_bytes.size()));
  }
  const std::uint64_t header_len = ReadU64(file_bytes.first(8));
  if (header_len > kMaxSafetensorsHeaderBytes) {
    throw ModelError(fmt::format("{}: header length {} is over the {}-byte limit of safetensors headers; not a safetensors file?", file,
                                 header_len, kMaxSafetensorsHeaderBytes));
  }
  if (header_len > file_bytes.size() - 8) {
    throw ModelError(fmt::format("{}: header length {} does not fit in the file ({} bytes); truncated or not safetensors", file, header_len,
                                 file_bytes.size()));
  }
  const json header = ParseHeaderJson(reinterpret_cast<const char*>(file_bytes.data() + 8), header_len, file);
  if (!header.is_object()) throw ModelError(fmt::format("{}: header is not a JSON object", file));

  SafetensorsHeader out;
  out.data_offset = 8 + header_len;
  const std::uint64_t data_size = file_bytes.size() - out.data_offset;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw ModelError(fmt::format("{}: __metadata__ is not an object", file));
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) throw ModelError(fmt::format("{}: __metadata__ value '{}' is not a string", file, key));
        out.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    out.tensors.emplace(name, ParseTensor(name, entry, data_size, file));
  }
  CheckLayout(out, data_size, file);
  return out;
}

void SafetensorsWriter::Add(std::string name, DType dtype, std::vector<std::int64_t> shape) {
  TensorInfo info;
  info.dtype = dtype;
  info.shape = std::move(shape);
  tensors_[std::move(name)] = std::move(info);
}

void SafetensorsWriter::SetMetadata(std::string key, std::string value) { metadata_[std::move(key)] = std::move(value); }

std::vector<std::pair<std::string, std::uint64_t>> SafetensorsWriter::Layout() const {
  std::vector<std::pair<std::string, std::uint64_t>> layout;
  for (const auto& [name, info] : tensors_) {
    layout.emplace_back(name, static_cast<std::uint64_t>(info.elements()) * DTypeSize(info.dtype));
  }
  return layout;
}

std::uint64_t SafetensorsWriter::DataBytes() const {
  std::uint64_t total = 0;
  for (const auto& [name, size] : Layout()) total += size;
  return total;
}

void SafetensorsWriter::Write(const std::filesystem::path& path, const TensorBytes& bytes_of) const {
  WriteFileWhole(path, [&](std::ostream& out) {
    const std::string header = HeaderBytes();
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const auto& [name, size] : Layout()) {
      const std::span<const std::byte> bytes = bytes_of(name);
      if (bytes.size() != size) {
        throw ModelError(fmt::format("{}: tensor '{}' has {} bytes but its header declares {}", path.string(), name, bytes.size(), size));
      }
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      if (!out) break;
    }
  });
}

std::string SafetensorsWriter::HeaderBytes() const {
  json header = json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  std::uint64_t offset = 0;
  for (const auto& [name, info] : tensors_) {
    const std::uint64_t size = static_cast<std::uint64_t>(info.elements()) * DTypeSize(info.dtype);
    header[name] = {{"dtype", DTypeName(info.dtype)}, {"shape", info.shape}, {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data section 8-byte aligned
  std::string bytes(8, '\0');
  std::uint64_t len = text.size();
  for (int i = 0; i < 8; ++i, len >>= 8) bytes[static_cast<std::size_t>(i)] = static_cast<char>(len & 0xff);
  return bytes + text;
}

}  // namespace tandem::rt
