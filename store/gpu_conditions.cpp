#include "store/gpu_conditions.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/input_error.hpp"

namespace tandem::store {

namespace {

using nlohmann::json;

[[noreturn]] void Refuse(const std::string& where, const std::string& what) { throw InputError(fmt::format("{}: {}", where, what)); }

constexpr const char* kNumbers[] = {"sm_clock_mhz", "memory_clock_mhz", "power_w", "power_limit_w", "temperature_c"};

std::optional<double>& NumberField(GpuSample& s, std::string_view key) {
  if (key == "sm_clock_mhz") return s.sm_clock_mhz;
  if (key == "memory_clock_mhz") return s.memory_clock_mhz;
  if (key == "power_w") return s.power_w;
  if (key == "power_limit_w") return s.power_limit_w;
  return s.temperature_c;
}

GpuSample ReadSample(const json& j, const std::string& where) {
  if (!j.is_object()) Refuse(where, fmt::format("a sample is {}, not an object", j.dump()));
  GpuSample s;
  const auto text = [&](const char* key) -> std::string {
    if (!j.contains(key)) return "";
    if (!j[key].is_string()) Refuse(where, fmt::format("samples: '{}' is {}, not text", key, j[key].dump()));
    return j[key].get<std::string>();
  };
  if (j.contains("t")) {
    if (!j["t"].is_number()) Refuse(where, fmt::format("samples: 't' is {}, not a number", j["t"].dump()));
    s.t = j["t"].get<double>();
  }
  if (j.contains("index")) {
    if (!j["index"].is_number_integer()) Refuse(where, fmt::format("samples: 'index' is {}, not a whole number", j["index"].dump()));
    s.index = j["index"].get<int>();
  }
  s.host = text("host");
  s.uuid = text("uuid");
  s.throttle = text("throttle");
  for (const char* key : kNumbers) {
    if (!j.contains(key)) continue;
    if (!j[key].is_number()) Refuse(where, fmt::format("samples: '{}' is {}, not a number", key, j[key].dump()));
    NumberField(s, key) = j[key].get<double>();
  }
  return s;
}

}  // namespace

std::string SessionConditions::ToJson() const {
  json list = json::array();
  for (const GpuSample& s : samples) {
    json j = {{"t", s.t}, {"host", s.host}, {"index", s.index}, {"uuid", s.uuid}};
    GpuSample copy = s;
    for (const char* key : kNumbers) {
      if (const std::optional<double>& v = NumberField(copy, key)) j[key] = *v;
    }
    if (!s.throttle.empty()) j["throttle"] = s.throttle;
    list.push_back(std::move(j));
  }
  json out = json::object();
  if (!list.empty()) out["samples"] = list;
  if (!breaches.empty()) out["breaches"] = breaches;
  return out.dump();
}

SessionConditions SessionConditions::FromJson(const std::string& text, const std::string& where) {
  SessionConditions c;
  if (text.empty()) return c;
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) Refuse(where, fmt::format("not a JSON object: {}", text.substr(0, 200)));
  if (j.contains("samples")) {
    if (!j["samples"].is_array()) Refuse(where, fmt::format("'samples' is {}, not a list", j["samples"].dump().substr(0, 200)));
    for (const json& s : j["samples"]) c.samples.push_back(ReadSample(s, where));
  }
  if (j.contains("breaches")) {
    if (!j["breaches"].is_array()) Refuse(where, fmt::format("'breaches' is {}, not a list", j["breaches"].dump().substr(0, 200)));
    for (const json& b : j["breaches"]) {
      if (!b.is_string()) Refuse(where, fmt::format("a breach is {}, not text", b.dump()));
      c.breaches.push_back(b.get<std::string>());
    }
  }
  return c;
}

std::vector<std::string> Breaches(const GpuControls& controls, const std::vector<GpuSample>& samples) {
  std::vector<std::string> out;
  std::set<std::string> said;  // GPU and control, once each
  const auto breach = [&](const GpuSample& s, const std::string& control, const std::string& what) {
    const std::string gpu = fmt::format("host {} GPU {} ({})", s.host, s.index, s.uuid);
    if (said.insert(gpu + '\x1f' + control).second) out.push_back(fmt::format("{}: {}", gpu, what));
  };
  for (const GpuSample& s : samples) {
    if (controls.power_limit_w && s.power_limit_w && std::abs(*s.power_limit_w - *controls.power_limit_w) > 1.0) {
      breach(s, "power",
             fmt::format("power limit {:g} W, not the declared {:g} W (at {:.1f} s)", *s.power_limit_w, *controls.power_limit_w, s.t));
    }
    if (controls.max_sm_clock_mhz && s.sm_clock_mhz && *s.sm_clock_mhz > *controls.max_sm_clock_mhz) {
      breach(s, "sm",
             fmt::format("SM clock {:g} MHz above the declared {:g} MHz (at {:.1f} s)", *s.sm_clock_mhz, *controls.max_sm_clock_mhz, s.t));
    }
    if (controls.max_memory_clock_mhz && s.memory_clock_mhz && *s.memory_clock_mhz > *controls.max_memory_clock_mhz) {
      breach(s, "memory",
             fmt::format("memory clock {:g} MHz above the declared {:g} MHz (at {:.1f} s)", *s.memory_clock_mhz,
                         *controls.max_memory_clock_mhz, s.t));
    }
    if (!controls.gpus.empty() && std::find(controls.gpus.begin(), controls.gpus.end(), s.uuid) == controls.gpus.end()) {
      breach(s, "uuid", "not one of the declared GPUs (conditions.gpus)");
    }
  }
  return out;
}

}  // namespace tandem::store
