#pragma once

#include <optional>
#include <string>
#include <vector>

// The GPUs' conditions through a session, as nvidia-smi reported them on the hosts its
// layout used (session.conditions_json), and what breached the campaign's `conditions:`.
namespace tandem::store {

struct GpuSample {
  double t = 0;  // seconds from the session's launch
  std::string host;
  int index = 0;
  std::string uuid;
  std::optional<double> sm_clock_mhz, memory_clock_mhz, power_w, power_limit_w, temperature_c;
  std::string throttle;  // clocks_throttle_reasons.active as nvidia-smi prints it ("0x0000000000000000": none)
  bool operator==(const GpuSample&) const = default;
};

// What a campaign declares its GPUs run under; a session that breaches it is flagged and
// its layout's gate is inconclusive.
struct GpuControls {
  std::optional<double> power_limit_w;         // every GPU's power limit (within 1 W)
  std::optional<double> max_sm_clock_mhz;      // no SM clock above it
  std::optional<double> max_memory_clock_mhz;  // no memory clock above it
  std::vector<std::string> gpus;               // the only GPU UUIDs a session may run on
  bool any() const { return power_limit_w || max_sm_clock_mhz || max_memory_clock_mhz || !gpus.empty(); }
};

struct SessionConditions {
  std::vector<GpuSample> samples;
  std::vector<std::string> breaches;  // "host local GPU 0 (GPU-…): power limit 600 W, not the declared 700 W"
  bool operator==(const SessionConditions&) const = default;

  std::string ToJson() const;
  static SessionConditions FromJson(const std::string& text, const std::string& where);
};

// Each breach of `controls` among `samples`, once per GPU and control, in sample order.
std::vector<std::string> Breaches(const GpuControls& controls, const std::vector<GpuSample>& samples);

}  // namespace tandem::store
