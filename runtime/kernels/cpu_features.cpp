#include "runtime/kernels/cpu_features.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace tandem::rt {

std::string_view ToString(Isa isa) {
  switch (isa) {
    case Isa::kPortable:
      return "portable";
    case Isa::kAvxFma:
      return "avx-fma";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx512Bf16:
      return "avx512-bf16";
    case Isa::kAmx:
      return "amx";
  }
  return "?";
}

std::optional<Isa> ParseIsa(std::string_view name) {
  for (Isa isa : kAllIsas) {
    if (ToString(isa) == name) return isa;
  }
  return std::nullopt;
}

#if defined(__x86_64__)
namespace {

// CPUID leaf 1, ECX bit 29 (clang's __builtin_cpu_supports has no "f16c").
bool HasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

// CPUID leaf 7 subleaf 1, EAX bit 5 (GCC 12 and clang 14 name no such feature).
bool HasAvx512Bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && (eax & (1u << 5)) != 0;
}

// AMX-TILE and AMX-BF16 (CPUID leaf 7, EDX bits 24 and 22), tile state enabled by the
// OS (XCR0 bits 17 and 18), and this process allowed to use it: Linux grants the tile
// data's large save area only on request (arch_prctl ARCH_REQ_XCOMP_PERM), once, for
// every thread of the process. Where that fails (an older kernel, some emulators) the
// CPU is taken as without AMX.
bool HasAmxTiles() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  if ((edx & (1u << 22)) == 0 || (edx & (1u << 24)) == 0) return false;
  unsigned xcr0 = 0, xcr0_high = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0), "=d"(xcr0_high) : "c"(0));
  if ((xcr0 & (3u << 17)) != (3u << 17)) return false;
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtileData = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) == 0;
#else
  return false;
#endif
}

}  // namespace
#endif

Isa DetectedIsa() {
#if defined(__x86_64__)
  static const Isa detected = [] {
    __builtin_cpu_init();
    const bool avx_fma = __builtin_cpu_supports("avx") && __builtin_cpu_supports("fma") && HasF16c();
    if (!avx_fma) return Isa::kPortable;
    if (!__builtin_cpu_supports("avx2")) return Isa::kAvxFma;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
      if (!HasAvx512Bf16()) return Isa::kAvx512;
      return HasAmxTiles() ? Isa::kAmx : Isa::kAvx512Bf16;
    }
    return Isa::kAvx2;
  }();
  return detected;
#else
  return Isa::kPortable;
#endif
}

bool HasAvx512VnniGfni() {
#if defined(__x86_64__)
  static const bool both = HasAvx512Vnni() && __builtin_cpu_supports("gfni");
  return both;
#else
  return false;
#endif
}

bool HasAvx512Vnni() {
#if defined(__x86_64__)
  static const bool vnni = DetectedIsa() >= Isa::kAvx512 && __builtin_cpu_supports("avx512vnni");
  return vnni;
#else
  return false;
#endif
}

bool IsIntelCpu() {
#if defined(__x86_64__)
  static const bool intel = [] {
    __builtin_cpu_init();
    return __builtin_cpu_is("intel") != 0;
  }();
  return intel;
#else
  return false;
#endif
}

namespace {

Isa FromEnvironment() {
  const Isa detected = DetectedIsa();
  // The AVX-512 BF16 and AMX paths are taken only when asked for: they round bf16
  // products' inputs (and the AVX-512 BF16 one-input tile decoded 10-15% slower than
  // the AVX2 kernel on a Zen 4).
  const Isa by_default = detected < Isa::kAvx512 ? detected : Isa::kAvx512;
  const char* name = std::getenv("TANDEM_ISA");
  if (name == nullptr || *name == '\0') return by_default;
  const std::optional<Isa> wanted = ParseIsa(name);
  if (!wanted) {
    std::fprintf(stderr, "tandem: TANDEM_ISA=%s is not one of portable, avx-fma, avx2, avx512, avx512-bf16, amx; using %s\n", name,
                 ToString(by_default).data());
    return by_default;
  }
  if (*wanted > detected) {
    std::fprintf(stderr, "tandem: TANDEM_ISA=%s is not supported by this CPU; using %s\n", name, ToString(by_default).data());
    return by_default;
  }
  return *wanted;
}

std::atomic<Isa>& Active() {
  static std::atomic<Isa> active{FromEnvironment()};
  return active;
}

}  // namespace

Isa ActiveIsa() { return Active().load(std::memory_order_relaxed); }

Isa SetActiveIsa(Isa isa) {
  if (isa > DetectedIsa()) isa = DetectedIsa();
  return Active().exchange(isa, std::memory_order_relaxed);
}

}  // namespace tandem::rt
