#pragma once

#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tandem::stats {

// Thrown for input the statistics cannot be computed from (too few values, a
// non-positive score, ...). The message says what was wrong and where.
class StatsError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Throws StatsError unless `values` holds at least `min_count` finite values.
// `what` names the input in the message ("baseline", "repeat scores").
void RequireFinite(std::span<const double> values, std::size_t min_count, std::string_view what);

// As RequireFinite, and every value must also be > 0 (scores that get logged).
void RequirePositive(std::span<const double> values, std::size_t min_count, std::string_view what);

}  // namespace tandem::stats
