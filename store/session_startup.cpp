#include "store/session_startup.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/input_error.hpp"

namespace tandem::store {

namespace {

using nlohmann::json;

[[noreturn]] void Refuse(const std::string& where, const std::string& what) { throw InputError(fmt::format("{}: {}", where, what)); }

double NonNegative(const json& v, const std::string& where, const std::string& key, const char* what) {
  if (!v.is_number() || !(v.get<double>() >= 0)) Refuse(where, fmt::format("'{}' is {}, not {} ≥ 0", key, v.dump(), what));
  return v.get<double>();
}

double Seconds(const json& v, const std::string& where, const std::string& key) {
  return NonNegative(v, where, key, "a number of seconds");
}

// {"role": value, …} in the order stored (nlohmann's objects are sorted; the order is kept as a list).
template <class T, class Read>
std::vector<std::pair<std::string, T>> Pairs(const json& j, const char* key, const std::string& where, Read read) {
  std::vector<std::pair<std::string, T>> out;
  if (!j.contains(key)) return out;
  const json& list = j.at(key);
  if (!list.is_array()) Refuse(where, fmt::format("'{}' is {}, not a list of [role, value]", key, list.dump()));
  for (const json& item : list) {
    if (!item.is_array() || item.size() != 2 || !item[0].is_string())
      Refuse(where, fmt::format("'{}' holds {}, not [role, value]", key, item.dump()));
    out.emplace_back(item[0].get<std::string>(), read(item[1], fmt::format("{}.{}", key, item[0].get<std::string>())));
  }
  return out;
}

GpuMemory ReadGpu(const json& g, const std::string& where) {
  if (!g.is_object()) Refuse(where, fmt::format("a GPU is {}, not an object", g.dump()));
  GpuMemory m;
  for (const auto& item : g.items()) {
    const std::string& key = item.key();
    const json& v = item.value();
    if (key == "host" || key == "uuid") {
      if (!v.is_string()) Refuse(where, fmt::format("gpus: '{}' is {}, not text", key, v.dump()));
      (key == "host" ? m.host : m.uuid) = v.get<std::string>();
    } else if (key == "index") {
      if (!v.is_number_integer()) Refuse(where, fmt::format("gpus: 'index' is {}, not a whole number", v.dump()));
      m.index = v.get<int>();
    } else if (key == "used_mib" || key == "total_mib") {
      (key == "used_mib" ? m.used_mib : m.total_mib) = NonNegative(v, where, "gpus." + key, "a number of MiB");
    }
  }
  return m;
}

}  // namespace

std::string SessionStartup::ToJson() const {
  json j = json::object();
  if (discarded) j["discarded"] = true;
  json l = json::array();
  for (const auto& [role, s] : listening) l.push_back({role, s});
  if (!l.empty()) j["listening"] = l;
  if (ready_s) j["ready_s"] = *ready_s;
  if (first_output_s) j["first_output_s"] = *first_output_s;
  json rss = json::array();
  for (const auto& [role, bytes] : resident_bytes) rss.push_back({role, bytes});
  if (!rss.empty()) j["resident_bytes"] = rss;
  json gpu_list = json::array();
  for (const GpuMemory& g : gpus) {
    gpu_list.push_back({{"host", g.host}, {"index", g.index}, {"uuid", g.uuid}, {"used_mib", g.used_mib}, {"total_mib", g.total_mib}});
  }
  if (!gpu_list.empty()) j["gpus"] = gpu_list;
  json phases = json::array();
  for (const auto& [name, seconds] : server_phases) phases.push_back({name, seconds});
  if (!phases.empty()) j["server_phases"] = phases;
  if (weight_bytes) j["weight_bytes"] = *weight_bytes;
  json loads = json::array();
  for (const auto& [role, seconds] : worker_loads) loads.push_back({role, seconds});
  if (!loads.empty()) j["worker_loads"] = loads;
  return j.dump();
}

SessionStartup SessionStartup::FromJson(const std::string& text, const std::string& where) {
  SessionStartup s;
  if (text.empty()) return s;
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) Refuse(where, fmt::format("not a JSON object: {}", text.substr(0, 200)));
  if (j.contains("discarded")) {
    if (!j["discarded"].is_boolean()) Refuse(where, fmt::format("'discarded' is {}, not true or false", j["discarded"].dump()));
    s.discarded = j["discarded"].get<bool>();
  }
  s.listening = Pairs<double>(j, "listening", where, [&](const json& v, const std::string& key) { return Seconds(v, where, key); });
  if (j.contains("ready_s")) s.ready_s = Seconds(j["ready_s"], where, "ready_s");
  if (j.contains("first_output_s")) s.first_output_s = Seconds(j["first_output_s"], where, "first_output_s");
  s.resident_bytes = Pairs<std::uint64_t>(j, "resident_bytes", where, [&](const json& v, const std::string& key) {
    if (!v.is_number_unsigned()) Refuse(where, fmt::format("'{}' is {}, not a number of bytes", key, v.dump()));
    return v.get<std::uint64_t>();
  });
  s.server_phases = Pairs<double>(j, "server_phases", where, [&](const json& v, const std::string& key) { return Seconds(v, where, key); });
  s.worker_loads = Pairs<double>(j, "worker_loads", where, [&](const json& v, const std::string& key) { return Seconds(v, where, key); });
  if (j.contains("weight_bytes")) {
    if (!j["weight_bytes"].is_number_unsigned())
      Refuse(where, fmt::format("'weight_bytes' is {}, not a number of bytes", j["weight_bytes"].dump()));
    s.weight_bytes = j["weight_bytes"].get<std::uint64_t>();
  }
  if (j.contains("gpus")) {
    if (!j["gpus"].is_array()) Refuse(where, fmt::format("'gpus' is {}, not a list", j["gpus"].dump()));
    for (const json& g : j["gpus"]) s.gpus.push_back(ReadGpu(g, where));
  }
  return s;
}

}  // namespace tandem::store
