#include "stats/sessions_needed.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <boost/math/distributions/normal.hpp>
#include <fmt/format.h>

#include "stats/stats_error.hpp"

namespace tandem::stats {

std::size_t SessionsNeeded(double sd_log, double effect, double level, double power) {
  if (!(std::isfinite(sd_log) && sd_log >= 0.0)) {
    throw StatsError(fmt::format("sessions needed: sd_log {} must be finite and ≥ 0", sd_log));
  }
  if (!(std::isfinite(effect) && effect > -1.0 && effect != 0.0)) {
    throw StatsError(fmt::format("sessions needed: effect {} must be a relative change > −1 and ≠ 0 (0.03 = 3 %)", effect));
  }
  if (!(level > 0.0 && level < 1.0)) {
    throw StatsError(fmt::format("sessions needed: level {} must be in (0, 1)", level));
  }
  if (!(power > 0.0 && power < 1.0)) {
    throw StatsError(fmt::format("sessions needed: power {} must be in (0, 1)", power));
  }
  const boost::math::normal_distribution<double> z;
  const double z_sum = boost::math::quantile(z, 0.5 + level / 2.0) + boost::math::quantile(z, power);
  const double shift = std::log1p(effect);
  const double n = 2.0 * z_sum * z_sum * sd_log * sd_log / (shift * shift);
  if (!(n < 1e15)) {
    throw StatsError(fmt::format("sessions needed: detecting {} at sd_log {} would take more than 1e15 sessions", effect, sd_log));
  }
  return std::max<std::size_t>(2, static_cast<std::size_t>(std::ceil(n)));
}

}  // namespace tandem::stats
