#pragma once

#include <optional>
#include <string_view>

namespace tandem::rt {

// The instruction sets the kernels have code paths for, in increasing order.
// Every path up to kAvx512 computes the same fixed-lane sums in the same order, so
// switching among them changes speed, not results (FMA aside: the portable path
// multiplies and adds separately unless the compiler contracts them). kAvx512Bf16
// gives up that identity for bf16 weights: it rounds their inputs to bf16 to
// multiply pairs at twice the rate (dense_rows.hpp); everything else runs as on
// kAvx512. It is taken only when TANDEM_ISA=avx512-bf16 asks for it (or SetActiveIsa).
// kAmx multiplies bf16 weights by those rounded inputs in AMX tiles (matmul_amx.cpp),
// again with bits of its own; also only when asked for (TANDEM_ISA=amx).
enum class Isa {
  kPortable,    // plain C++ (whatever the compiler vectorises for the baseline target)
  kAvxFma,      // AVX + FMA + F16C, no AVX2 (older AMD machines of the CI kind)
  kAvx2,        // AVX2 + FMA + F16C
  kAvx512,      // AVX-512 F/BW/VL (+ VNNI when present, for the quantized kernels)
  kAvx512Bf16,  // kAvx512 + AVX512_BF16 (Zen 4 and later, Intel Cooper Lake and Sapphire Rapids on)
  kAmx,         // kAvx512Bf16 + AMX-TILE and AMX-BF16, the tile state granted by the kernel (Intel Sapphire Rapids on)
};

// Every path, in increasing order.
inline constexpr Isa kAllIsas[] = {Isa::kPortable, Isa::kAvxFma, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx};

std::string_view ToString(Isa isa);  // "portable" | "avx-fma" | "avx2" | "avx512" | "avx512-bf16" | "amx"
std::optional<Isa> ParseIsa(std::string_view name);

// What this CPU supports.
Isa DetectedIsa();
bool HasAvx512Vnni();
bool HasAvx512VnniGfni();  // and GFNI (Ice Lake, Sapphire Rapids and Zen 4 on)
// Whether the CPU is Intel's: for choices between kernels that give the same bits but
// run at different speeds on different cores (see matmul.cpp).
bool IsIntelCpu();

// The path the kernels take: the detected one up to kAvx512, or the one named by the
// TANDEM_ISA environment variable if the CPU has it (read once; a higher or unknown name
// is ignored with a warning on stderr), or what SetActiveIsa chose.
Isa ActiveIsa();
// Chooses the path (clamped to DetectedIsa) and returns the previous one. For tests
// and benchmarks comparing paths; not for use while kernels run on other threads.
Isa SetActiveIsa(Isa isa);

}  // namespace tandem::rt
