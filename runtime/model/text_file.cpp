#include "runtime/model/text_file.hpp"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "runtime/model/model_error.hpp"

namespace tandem::rt {

std::string ReadTextFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ModelError(fmt::format("{}: cannot open", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteTextFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  if (!out) throw ModelError(fmt::format("{}: cannot write", path.string()));
}

void WriteFileWhole(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write) {
  std::filesystem::path tmp = path;
  tmp += ".partial";
  std::error_code ec;
  try {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw ModelError(fmt::format("{}: cannot write", tmp.string()));
    write(out);
    out.flush();
    if (!out) throw ModelError(fmt::format("{}: write failed (disk full?)", tmp.string()));
  } catch (...) {
    std::filesystem::remove(tmp, ec);
    throw;
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw ModelError(fmt::format("{}: cannot rename {} to it: {}", path.string(), tmp.filename().string(), ec.message()));
}

}  // namespace tandem::rt
