#pragma once

#include <cmath>

// fp32 transcendental functions computed in double and rounded once: the correctly
// rounded fp32 value except at near-ties, so any two implementations that do the same (an
// independent numpy reference) agree on the bits, where fp32 library functions (glibc's,
// numpy's SIMD ones) may differ by an ulp.
namespace tandem::rt {

inline float RoundedExp(float v) { return static_cast<float>(std::exp(static_cast<double>(v))); }
inline float RoundedCos(float v) { return static_cast<float>(std::cos(static_cast<double>(v))); }
inline float RoundedSin(float v) { return static_cast<float>(std::sin(static_cast<double>(v))); }
// 1 / (1 + e^−v) in fp32 around the rounded exponential.
inline float RoundedSigmoid(float v) { return 1.0f / (1.0f + RoundedExp(-v)); }

}  // namespace tandem::rt
