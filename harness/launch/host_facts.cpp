#include "harness/launch/host_facts.hpp"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <vector>

namespace tandem::harness {

namespace {

// One `key=value` line per fact; the two /proc/stat samples are one second apart.
constexpr const char* kFactsScript = R"sh(field() { grep -m1 "^$1" "$2" | sed 's/^[^:]*: *//'; }
echo "cpu_model=$(field 'model name' /proc/cpuinfo)"
echo "cpu_vendor=$(field 'vendor_id' /proc/cpuinfo)"
echo "cpu_family=$(field 'cpu family' /proc/cpuinfo)"
echo "cpu_model_number=$(grep -m1 -E '^model[[:space:]]*:' /proc/cpuinfo | sed 's/^[^:]*: *//')"
echo "cpu_stepping=$(field 'stepping' /proc/cpuinfo)"
echo "cpu_implementer=$(field 'CPU implementer' /proc/cpuinfo)"
echo "cpu_part=$(field 'CPU part' /proc/cpuinfo)"
echo "cpu_flags=$(grep -m1 -E '^(flags|Features)[[:space:]]*:' /proc/cpuinfo | sed 's/^[^:]*: *//')"
echo "logical_cpus=$(getconf _NPROCESSORS_ONLN)"
echo "memory=$(field MemTotal /proc/meminfo)"
echo "kernel=$(uname -sr)"
echo "hostname=$(uname -n)"
echo "loadavg=$(cut -d' ' -f1-3 /proc/loadavg)"
echo "stat0=$(head -n1 /proc/stat)"
sleep 1
echo "stat1=$(head -n1 /proc/stat)"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,uuid,driver_version,power.limit,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,memory.total \
    --format=csv,noheader,nounits 2>/dev/null | sed 's/^/gpu=/'
fi
)sh";

// busy and total ticks of an aggregate "cpu user nice system idle iowait irq softirq steal ..." line.
std::pair<unsigned long long, unsigned long long> CpuTicks(const std::string& line) {
  std::istringstream in(line);
  std::string label;
  in >> label;
  unsigned long long v[8] = {}, total = 0;
  for (auto& x : v) in >> x;
  for (auto x : v) total += x;
  return {total - v[3] - v[4], total};  // idle and iowait are not busy
}

// The instruction sets the kernels choose between (x86 and Arm names as /proc/cpuinfo
// spells them), in this order: what a host's flags say of these is what tells two
// machines of one model name apart (Zen 4 and Zen 5 are both "AMD EPYC" in a VM).
constexpr const char* kIsaFlags[] = {"avx",         "avx2",        "fma",         "f16c",     "avx512f",  "avx512bw", "avx512vl",
                                     "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8",
                                     "asimd",       "asimddp",     "bf16",        "i8mm",     "sve",      "sve2"};

nlohmann::json IsaOf(const std::string& flags) {
  std::istringstream in(flags);
  std::vector<std::string> present;
  for (std::string f; in >> f;) present.push_back(f);
  nlohmann::json isa = nlohmann::json::array();
  for (const char* f : kIsaFlags) {
    if (std::find(present.begin(), present.end(), f) != present.end()) isa.push_back(f);
  }
  return isa;
}

nlohmann::json Number(const std::string& text) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  return text;  // "[N/A]" and the like, as nvidia-smi says them
}

}  // namespace

std::vector<std::string> SplitNvidiaSmiCsv(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) {
    cell.erase(0, cell.find_first_not_of(' '));
    while (!cell.empty() && (cell.back() == ' ' || cell.back() == '\r')) cell.pop_back();
    out.push_back(cell);
  }
  return out;
}

nlohmann::json HostFacts(const Host& host) {
  const std::string out = host.Check("reading its facts", kFactsScript, std::chrono::seconds(60));
  nlohmann::json facts = nlohmann::json::object();
  std::string stat0, stat1;
  nlohmann::json gpus = nlohmann::json::array();
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "stat0") {
      stat0 = value;
    } else if (key == "stat1") {
      stat1 = value;
    } else if (key == "cpu_flags") {
      facts["cpu_isa"] = IsaOf(value);
    } else if (key.rfind("cpu_", 0) == 0 && key != "cpu_model" && value.empty()) {
      continue;  // a field this architecture's /proc/cpuinfo does not have
    } else if (key == "logical_cpus") {
      facts[key] = std::stoi(value.empty() ? "0" : value);
    } else if (key == "loadavg") {
      std::istringstream in(value);
      double l[3] = {0, 0, 0};
      in >> l[0] >> l[1] >> l[2];
      facts["load_average"] = {l[0], l[1], l[2]};
    } else if (key == "gpu") {
      const std::vector<std::string> c = SplitNvidiaSmiCsv(value);
      if (c.size() < 10) continue;
      gpus.push_back({{"index", Number(c[0])},
                      {"name", c[1]},
                      {"uuid", c[2]},
                      {"driver", c[3]},
                      {"power_limit_w", Number(c[4])},
                      {"sm_clock_mhz", Number(c[5])},
                      {"memory_clock_mhz", Number(c[6])},
                      {"max_sm_clock_mhz", Number(c[7])},
                      {"max_memory_clock_mhz", Number(c[8])},
                      {"memory_mib", Number(c[9])}});
    } else {
      facts[key] = value;
    }
  }
  const auto [busy0, total0] = CpuTicks(stat0);
  const auto [busy1, total1] = CpuTicks(stat1);
  facts["busy_fraction"] = total1 > total0 ? static_cast<double>(busy1 - busy0) / static_cast<double>(total1 - total0) : 0.0;
  facts["busy_sample_s"] = 1.0;
  if (!gpus.empty()) facts["gpus"] = gpus;
  return facts;
}

nlohmann::json HostFacts() { return HostFacts(*Host::Local(HostSpec{.name = "local"})); }

}  // namespace tandem::harness
