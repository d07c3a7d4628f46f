#include "store/sample_times.hpp"

#include <cmath>

#include <fmt/format.h>

namespace tandem::store {

std::string ImplausibleTimes(double t_start, double t_first_output, double t_finish) {
  for (const double t : {t_start, t_first_output, t_finish}) {
    if (!std::isfinite(t)) return "a time that is not a number";
    if (t < 0) return fmt::format("a negative time ({})", t);
  }
  if (t_finish < t_start) return fmt::format("a finish ({}) before its start ({})", t_finish, t_start);
  if (t_first_output > 0 && (t_first_output < t_start || t_first_output > t_finish)) {
    return fmt::format("a first output ({}) outside its start and finish ({}, {})", t_first_output, t_start, t_finish);
  }
  return "";
}

}  // namespace tandem::store
