#include "stats/stats_error.hpp"

#include <cmath>

#include <fmt/format.h>

namespace tandem::stats {

namespace {

void RequireCount(std::span<const double> values, std::size_t min_count, std::string_view what) {
  if (values.size() < min_count) {
    throw StatsError(fmt::format("{}: needs at least {} value{}, got {}", what, min_count, min_count == 1 ? "" : "s", values.size()));
  }
}

}  // namespace

void RequireFinite(std::span<const double> values, std::size_t min_count, std::string_view what) {
  RequireCount(values, min_count, what);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      throw StatsError(fmt::format("{}: value {} (index {}) is not finite", what, values[i], i));
    }
  }
}

void RequirePositive(std::span<const double> values, std::size_t min_count, std::string_view what) {
  RequireFinite(values, min_count, what);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!(values[i] > 0.0)) {
      throw StatsError(fmt::format("{}: value {} (index {}) is not positive; scores must be > 0", what, values[i], i));
    }
  }
}

}  // namespace tandem::stats
