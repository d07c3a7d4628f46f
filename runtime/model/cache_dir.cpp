#include "runtime/model/cache_dir.hpp"

#include <cstdlib>

namespace tandem::rt {

std::filesystem::path TandemCacheDir() {
  if (const char* dir = std::getenv("TANDEM_CACHE_DIR"); dir != nullptr && *dir != '\0') return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') return std::filesystem::path(xdg) / "tandem";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') return std::filesystem::path(home) / ".cache" / "tandem";
  return std::filesystem::temp_directory_path() / "tandem-cache";
}

}  // namespace tandem::rt
