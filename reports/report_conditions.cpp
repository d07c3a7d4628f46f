// The report's GPU conditions: what nvidia-smi said through each session on the hosts its
// layout used (clocks, power, temperature, throttle reasons), and every breach of the
// campaign's `conditions:`, which makes its layout's gate inconclusive.
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "reports/report_sections.hpp"
#include "stats/descriptive.hpp"

namespace tandem::reports::sections {

namespace {

std::string Of(const std::vector<double>& v, bool median, const char* unit) {
  if (v.empty()) return std::string(kNone);
  return fmt::format("{:.0f} {}", median ? stats::Median(v) : stats::Max(v), unit);
}

}  // namespace

void GpuConditions(const store::CampaignRecord& r, MarkdownDoc& d) {
  bool any = false;
  for (const store::SessionRecord& s : r.sessions) any = any || !s.conditions.samples.empty() || !s.conditions.breaches.empty();
  if (!any) return;
  d.Line("## GPU conditions");
  d.Blank();
  d.Line(
      "What `nvidia-smi` reported through each session on the hosts its layout used, from the launch to the teardown: the median SM "
      "and memory clocks, the most power drawn against the power limit, the hottest reading, and the throttle reasons seen "
      "(`clocks_throttle_reasons.active`, other than none).");
  d.Blank();
  d.Line("{}",
         Header({"session", "arm", "host", "GPU", "samples", "SM clock", "memory clock", "power (limit)", "temperature", "throttle"}, 4));
  for (const store::SessionRecord& s : r.sessions) {
    // Per (host, GPU index), in sample order.
    std::map<std::tuple<std::string, int>, std::vector<const store::GpuSample*>> by_gpu;
    for (const store::GpuSample& x : s.conditions.samples) by_gpu[{x.host, x.index}].push_back(&x);
    for (const auto& [gpu, samples] : by_gpu) {
      std::vector<double> sm, mem, power, limit, temperature;
      std::set<std::string> throttle;
      for (const store::GpuSample* x : samples) {
        if (x->sm_clock_mhz) sm.push_back(*x->sm_clock_mhz);
        if (x->memory_clock_mhz) mem.push_back(*x->memory_clock_mhz);
        if (x->power_w) power.push_back(*x->power_w);
        if (x->power_limit_w) limit.push_back(*x->power_limit_w);
        if (x->temperature_c) temperature.push_back(*x->temperature_c);
        if (!x->throttle.empty() && x->throttle.find_first_not_of("0x") != std::string::npos) throttle.insert(x->throttle);
      }
      d.Line("{}", Row({std::to_string(s.order_index + 1), s.arm, std::get<0>(gpu), std::to_string(std::get<1>(gpu)),
                        std::to_string(samples.size()), Of(sm, true, "MHz"), Of(mem, true, "MHz"),
                        fmt::format("{} ({})", Of(power, false, "W"), Of(limit, false, "W")), Of(temperature, false, "°C"),
                        throttle.empty() ? std::string("none") : fmt::format("{}", fmt::join(throttle, ", "))}));
    }
  }
  d.Blank();
  std::vector<std::string> breaches;
  for (const store::SessionRecord& s : r.sessions) {
    for (const std::string& b : s.conditions.breaches)
      breaches.push_back(fmt::format("session {} ({}, {}): {}", s.order_index + 1, s.layout, s.arm, b));
  }
  if (breaches.empty()) return;
  d.Line("**Outside the campaign's GPU conditions** (`conditions:`): the gate is inconclusive for these layouts.");
  d.Blank();
  for (const std::string& b : breaches) d.Line("- {}", Cell(b));
  d.Blank();
}

}  // namespace tandem::reports::sections
