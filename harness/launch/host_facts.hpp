#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/launch/host.hpp"

namespace tandem::harness {

// The machine a process ran on, read there: CPU model name, vendor, family, model number
// and stepping (x86) or implementer and part (Arm), as /proc/cpuinfo has them; `cpu_isa`,
// the instruction sets among those the kernels choose between that its flags list; logical
// CPUs, memory, kernel, host name, the load averages, the fraction of all CPUs busy over one second just before the
// session (`busy_fraction`, from /proc/stat), and, where `nvidia-smi` answers, its GPUs
// (`gpus`: index, name, uuid, driver, power limit W, SM and memory clocks MHz now and at
// most, memory MiB). The load average lags by minutes, so it still counts the previous
// session's work; the busy fraction sees only what runs now. Throws std::runtime_error
// naming the host when it cannot be read.
nlohmann::json HostFacts(const Host& host);

// One line of `nvidia-smi --format=csv,noheader`: its cells, trimmed.
std::vector<std::string> SplitNvidiaSmiCsv(const std::string& line);

// The harness's own machine.
nlohmann::json HostFacts();

// The busy fraction above which a session is flagged as run under other load.
inline constexpr double kOtherLoadBusyFraction = 0.25;

}  // namespace tandem::harness
