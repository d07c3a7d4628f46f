#include "harness/launch/host_facts.hpp"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include <sys/utsname.h>
#include <unistd.h>

namespace tandem::harness {

namespace {

std::string Field(const char* file, const std::string& key) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) {
      const auto colon = line.find(':');
      std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      return value;
    }
  }
  return "";
}

struct CpuTicks {
  unsigned long long busy = 0, total = 0;
};

// The aggregate "cpu" line of /proc/stat: user nice system idle iowait irq softirq steal ...
CpuTicks ReadCpuTicks() {
  std::ifstream in("/proc/stat");
  std::string label;
  in >> label;
  CpuTicks t;
  if (label != "cpu") return t;
  unsigned long long v[8] = {};
  for (auto& x : v) in >> x;
  for (int i = 0; i < 8; ++i) t.total += v[i];
  t.busy = t.total - v[3] - v[4];  // idle and iowait are not busy
  return t;
}

}  // namespace

nlohmann::json HostFacts(double sample_seconds) {
  const CpuTicks t0 = ReadCpuTicks();
  std::this_thread::sleep_for(std::chrono::duration<double>(sample_seconds));
  const CpuTicks t1 = ReadCpuTicks();
  const double busy = t1.total > t0.total ? static_cast<double>(t1.busy - t0.busy) / static_cast<double>(t1.total - t0.total) : 0.0;
  utsname u{};
  uname(&u);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  return {{"cpu_model", Field("/proc/cpuinfo", "model name")},
          {"logical_cpus", std::thread::hardware_concurrency()},
          {"memory", Field("/proc/meminfo", "MemTotal")},
          {"kernel", std::string(u.sysname) + " " + u.release},
          {"hostname", host},
          {"load_average", {load[0], load[1], load[2]}},
          {"busy_fraction", busy},
          {"busy_sample_s", sample_seconds}};
}

}  // namespace tandem::harness
