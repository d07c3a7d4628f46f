#include "runtime/model/safetensors.hpp"

#include <cstring>
#include <fstream>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/model/model_error.hpp"

namespace tandem::rt {

namespace {

using nlohmann::json;

constexpr std::uint64_t kMaxHeaderBytes = 256ull << 20;  // real headers are a few MB at most

std::uint64_t ReadU64(std::span<const std::byte> bytes) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(bytes[static_cast<std::size_t>(i)]);
  return v;
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
  std::uint64_t elements = 1;
  for (const json& dim : *shape) {
    if (!dim.is_number_unsigned()) throw fail(fmt::format("shape {} has a non-integer or negative dimension", shape->dump()));
    const std::uint64_t d = dim.get<std::uint64_t>();
    if (d > 0 && elements > std::numeric_limits<std::int64_t>::max() / d) throw fail("shape overflows");
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
  if (elements > std::numeric_limits<std::uint64_t>::max() / size || elements * size != info.end - info.begin) {
    throw fail(fmt::format("shape {} of {} needs {} bytes but data_offsets span {}", shape->dump(), DTypeName(info.dtype), elements * size,
                           info.end - info.begin));
  }
  return info;
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
  if (header_len > kMaxHeaderBytes || header_len > file_bytes.size() - 8) {
    throw ModelError(fmt::format("{}: header length {} does not fit in the file ({} bytes); truncated or not safetensors", file, header_len,
                                 file_bytes.size()));
  }
  const auto* text = reinterpret_cast<const char*>(file_bytes.data() + 8);
  json header;
  try {
    header = json::parse(text, text + header_len);
  } catch (const json::exception& e) {
    throw ModelError(fmt::format("{}: header is not valid JSON: {}", file, e.what()));
  }
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
  std::filesystem::path tmp = path;
  tmp += ".partial";
  std::error_code ec;
  try {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw ModelError(fmt::format("{}: cannot write", tmp.string()));
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
    out.flush();
    if (!out) throw ModelError(fmt::format("{}: write failed (disk full?)", tmp.string()));
  } catch (...) {
    std::filesystem::remove(tmp, ec);
    throw;
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw ModelError(fmt::format("{}: cannot rename {} to it: {}", path.string(), tmp.filename().string(), ec.message()));
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
