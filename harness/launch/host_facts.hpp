#pragma once

#include <nlohmann/json.hpp>

namespace tandem::harness {

// The machine a session ran on: CPU model, logical CPUs, memory, kernel, host name, the
// load averages, and the fraction of all CPUs busy over a short sampling window just before
// the session (`busy_fraction`, from /proc/stat). The load average lags by minutes, so it
// still counts the previous session's work; the busy fraction sees only what runs now.
nlohmann::json HostFacts(double sample_seconds = 1.0);

// The busy fraction above which a session is flagged as run under other load.
inline constexpr double kOtherLoadBusyFraction = 0.25;

}  // namespace tandem::harness
