#include "reports/host_hardware.hpp"

#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tandem::reports {

std::string DescribeCpu(const store::HostFacts& facts) {
  if (!facts.known) return "?";
  std::vector<std::string> parts;
  parts.push_back(facts.cpu_model.empty() ? "?" : facts.cpu_model);
  if (facts.cpu_family) {
    parts.push_back(
        fmt::format("{} family {} model {} stepping {}", facts.cpu_vendor, *facts.cpu_family, facts.cpu_model_number, facts.cpu_stepping));
  } else if (facts.cpu_implementer) {
    parts.push_back(fmt::format("implementer {} part {}", *facts.cpu_implementer, facts.cpu_part));
  }
  if (facts.logical_cpus) parts.push_back(fmt::format("{} logical CPUs", *facts.logical_cpus));
  if (facts.cpu_isa) {
    parts.push_back(facts.cpu_isa->empty() ? "no SIMD extension the kernels use" : fmt::format("{}", fmt::join(*facts.cpu_isa, " ")));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string SessionHardware(const store::SessionRecord& session) {
  const store::HostFacts& h = session.host;
  if (!h.known) return "unknown";
  std::string out = DescribeCpu(h);
  for (const store::HostFacts& other : h.hosts) out += fmt::format("; {}: {}", other.name, DescribeCpu(other));
  return out;
}

HardwareMix AssessHardware(const store::CampaignRecord& record) {
  HardwareMix mix;
  for (const store::SessionRecord& s : record.sessions) {
    if (s.status == store::SessionStatus::kComplete) ++mix[s.layout][SessionHardware(s)][s.arm];
  }
  return mix;
}

std::size_t Machines(const HardwareMix& mix) {
  std::set<std::string> machines;
  for (const auto& [layout, by_hardware] : mix) {
    for (const auto& [hardware, arms] : by_hardware) machines.insert(hardware);
  }
  return machines.size();
}

std::vector<std::string> LopsidedHardware(const HardwareMix& mix, const std::string& baseline, const std::string& candidate) {
  std::vector<std::string> out;
  for (const auto& [layout, by_hardware] : mix) {
    if (by_hardware.size() < 2) continue;
    int total_b = 0, total_c = 0;
    for (const auto& [hardware, arms] : by_hardware) {
      total_b += arms.contains(baseline) ? arms.at(baseline) : 0;
      total_c += arms.contains(candidate) ? arms.at(candidate) : 0;
    }
    if (total_b == 0 || total_c == 0) continue;
    std::vector<std::string> shares;
    bool lopsided = false;
    int machine = 0;
    for (const auto& [hardware, arms] : by_hardware) {
      const int b = arms.contains(baseline) ? arms.at(baseline) : 0, c = arms.contains(candidate) ? arms.at(candidate) : 0;
      const double share_b = static_cast<double>(b) / total_b, share_c = static_cast<double>(c) / total_c;
      lopsided = lopsided || std::abs(share_b - share_c) > kHardwareShareTolerance;
      shares.push_back(fmt::format("machine {} ({}): baseline {} of {}, candidate {} of {}", ++machine, hardware, b, total_b, c, total_c));
    }
    if (lopsided) {
      out.push_back(
          fmt::format("layout {} ran on {} different machines and the arms' sessions are spread unlike over them ({}): the ratio mixes the "
                      "hardware with the change; rerun on one machine",
                      layout, by_hardware.size(), fmt::join(shares, "; ")));
    }
  }
  return out;
}

}  // namespace tandem::reports
