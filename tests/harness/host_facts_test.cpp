// Host facts as the harness reads them on any host (one shell script, run here through
// the local Host): the machine's own figures, and GPUs as nvidia-smi reports them (a fake
// nvidia-smi on PATH stands in for a GPU machine).
#include "harness/launch/host_facts.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>

namespace tandem::harness {
namespace {

namespace fs = std::filesystem;

TEST(HostFacts, AreReadThroughTheHostWithABusySample) {
  const nlohmann::json f = HostFacts();
  EXPECT_FALSE(f.value("cpu_model", "").empty()) << f.dump();
  EXPECT_GT(f.value("logical_cpus", 0), 0) << f.dump();
  EXPECT_NE(f.value("memory", "").find(" kB"), std::string::npos) << f.dump();
  EXPECT_EQ(f.value("kernel", "").rfind("Linux ", 0), 0u) << f.dump();
  ASSERT_TRUE(f["load_average"].is_array());
  EXPECT_EQ(f["load_average"].size(), 3u);
  const double busy = f.value("busy_fraction", -1.0);
  EXPECT_GE(busy, 0.0);
  EXPECT_LE(busy, 1.0);
  EXPECT_FALSE(f.contains("gpus")) << "no nvidia-smi here, so no GPUs";
}

TEST(HostFacts, NameTheCpuBeyondItsModelName) {
  // Read here independently: the flags line of /proc/cpuinfo (x86 "flags", Arm "Features").
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, flags, family;
  while (std::getline(cpuinfo, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    const std::size_t start = line.find_first_not_of(' ', colon + 1);
    const std::string value = start == std::string::npos ? "" : line.substr(start);
    if ((key == "flags" || key == "Features") && flags.empty()) flags = " " + value + " ";
    if (key == "cpu family" && family.empty()) family = value;
  }
  ASSERT_FALSE(flags.empty()) << "/proc/cpuinfo has no flags line";
  const nlohmann::json f = HostFacts();
  ASSERT_TRUE(f.contains("cpu_isa") && f["cpu_isa"].is_array()) << f.dump();
  for (const char* isa : {"avx2", "avx512f", "avx512_bf16", "amx_tile", "asimd", "sve"}) {
    const bool listed = std::find(f["cpu_isa"].begin(), f["cpu_isa"].end(), isa) != f["cpu_isa"].end();
    EXPECT_EQ(listed, flags.find(std::string(" ") + isa + " ") != std::string::npos) << isa << ": " << f.dump();
  }
  // x86: vendor, family, model number and stepping; nothing empty is stored.
  if (!family.empty()) {
    EXPECT_EQ(f.value("cpu_family", ""), family) << f.dump();
    EXPECT_FALSE(f.value("cpu_vendor", "").empty()) << f.dump();
    EXPECT_FALSE(f.value("cpu_model_number", "").empty()) << f.dump();
    EXPECT_FALSE(f.value("cpu_stepping", "").empty()) << f.dump();
    EXPECT_FALSE(f.contains("cpu_implementer")) << f.dump();
  }
}

TEST(HostFacts, ListEveryGpuNvidiaSmiReportsWithPowerLimitsAndClocks) {
  const fs::path dir = fs::temp_directory_path() / ("tandem-fake-nvidia-smi-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // What `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` prints on a two-GPU host.
  std::ofstream(dir / "nvidia-smi") << "#!/bin/sh\n"
                                       "echo '0, NVIDIA H200, GPU-5f0c1d2e, 570.86.15, 700.00, 1980, 3201, 1980, 3201, 143771'\n"
                                       "echo '1, NVIDIA H200, GPU-77aa01bb, 570.86.15, 500.00, 345, 3201, 1980, 3201, [N/A]'\n";
  fs::permissions(dir / "nvidia-smi", fs::perms::owner_all);
  const std::string path = std::getenv("PATH");
  ::setenv("PATH", (dir.string() + ":" + path).c_str(), 1);
  const nlohmann::json f = HostFacts();
  ::setenv("PATH", path.c_str(), 1);
  fs::remove_all(dir);
  ASSERT_TRUE(f.contains("gpus")) << f.dump();
  ASSERT_EQ(f["gpus"].size(), 2u);
  const nlohmann::json& g = f["gpus"][1];
  EXPECT_EQ(g["name"], "NVIDIA H200");
  EXPECT_EQ(g["uuid"], "GPU-77aa01bb");
  EXPECT_EQ(g["driver"], "570.86.15");
  EXPECT_EQ(g["power_limit_w"], 500.0);
  EXPECT_EQ(g["sm_clock_mhz"], 345.0);
  EXPECT_EQ(g["max_sm_clock_mhz"], 1980.0);
  EXPECT_EQ(g["memory_clock_mhz"], 3201.0);
  EXPECT_EQ(g["memory_mib"], "[N/A]");  // what nvidia-smi said, not a number
  EXPECT_EQ(f["gpus"][0]["memory_mib"], 143771.0);
}

}  // namespace
}  // namespace tandem::harness
