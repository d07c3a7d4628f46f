#include "runtime/model/model_revision.hpp"

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/sha256.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/shard_index.hpp"

namespace tandem::rt {

namespace {

constexpr const char* kCacheName = ".tandem-revision.json";

struct FileStamp {
  std::filesystem::path path;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
};

FileStamp Stamp(const std::filesystem::path& path) {
  std::error_code ec;
  FileStamp s{path, std::filesystem::file_size(path, ec), 0};
  if (ec) throw ModelError(fmt::format("{}: cannot stat: {}", path.string(), ec.message()));
  const auto t = std::filesystem::last_write_time(path, ec);
  if (ec) throw ModelError(fmt::format("{}: cannot stat: {}", path.string(), ec.message()));
  s.mtime_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  return s;
}

nlohmann::json StampsJson(const std::vector<FileStamp>& stamps) {
  nlohmann::json files = nlohmann::json::array();
  for (const FileStamp& s : stamps) {
    files.push_back({{"name", s.path.filename().string()}, {"size", s.size}, {"mtime_ns", s.mtime_ns}});
  }
  return files;
}

std::string Sha256Files(const std::vector<FileStamp>& stamps, const LoadProgressFn& progress) {
  std::uint64_t all = 0, done = 0;
  for (const FileStamp& s : stamps) all += s.size;
  Sha256 hash;
  std::vector<char> buffer(1 << 20);
  for (const FileStamp& s : stamps) {
    hash.Update(fmt::format("{}\n{}\n", s.path.filename().string(), s.size));
    std::ifstream in(s.path, std::ios::binary);
    if (!in) throw ModelError(fmt::format("{}: cannot open for hashing", s.path.string()));
    std::uint64_t total = 0;
    while (in) {
      in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      const auto got = static_cast<std::size_t>(in.gcount());
      hash.Update(buffer.data(), got);
      total += got;
      done += got;
      if (progress) progress({LoadProgress::Phase::kRevision, done, all, s.path.filename().string()});
    }
    if (total != s.size) throw ModelError(fmt::format("{}: changed while it was being hashed", s.path.string()));
  }
  return hash.HexDigest();
}

}  // namespace

std::string ModelRevision(const std::filesystem::path& dir) { return ModelRevision(dir, {}); }

std::string ModelRevision(const std::filesystem::path& dir, const LoadProgressFn& progress) {
  std::vector<std::string> weights = ReadShardIndex(dir).files;
  std::sort(weights.begin(), weights.end());
  std::vector<FileStamp> stamps = {Stamp(dir / "config.json")};
  for (const auto& w : weights) stamps.push_back(Stamp(dir / w));
  const nlohmann::json files = StampsJson(stamps);

  const auto cache_path = dir / kCacheName;
  try {
    std::ifstream in(cache_path);
    if (in) {
      const auto cached = nlohmann::json::parse(in);
      if (cached.at("files") == files) return cached.at("revision").get<std::string>();
    }
  } catch (const nlohmann::json::exception&) {
    // A damaged cache is recomputed and rewritten.
  }

  const std::string revision = Sha256Files(stamps, progress);
  const auto tmp = cache_path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << nlohmann::json{{"revision", revision}, {"files", files}}.dump(1) << "\n";
  }
  std::error_code ec;
  std::filesystem::rename(tmp, cache_path, ec);  // atomic; failure (read-only dir) only costs a rehash next time
  if (ec) std::filesystem::remove(tmp, ec);
  return revision;
}

}  // namespace tandem::rt
