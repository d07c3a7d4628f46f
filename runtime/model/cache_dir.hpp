#pragma once

#include <filesystem>

namespace tandem::rt {

// Where Tandem keeps downloads and derived files outside the repository:
// $TANDEM_CACHE_DIR, else $XDG_CACHE_HOME/tandem, else $HOME/.cache/tandem
// (scripts/setup uses the same rule).
std::filesystem::path TandemCacheDir();

}  // namespace tandem::rt
