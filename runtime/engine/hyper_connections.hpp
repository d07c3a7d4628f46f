#pragma once

#include <cstdint>
#include <span>

// DeepSeek V4.1's residual stream: `hc` copies of the hidden state, mixed around every
// sublayer (attention, then the FFN). From the stream entering a sublayer, HcMixes gives
// `post` and `comb`, used at once to fold the sublayer's output back in (HcPost), and
// `pre`, which collapses the input of the *next* sublayer (HcPre) — the reference's lag:
// a sublayer's input is collapsed with the `pre` the sublayer before it computed (the
// first attention with copy 0 alone, the final norm with the last FFN's).
namespace tandem::rt {

struct HyperConnectionWeights {
  int hc = 0;                    // copies
  std::int64_t dim = 0;          // hidden size
  const float* fn = nullptr;     // [(2 + hc)·hc × hc·dim]
  const float* base = nullptr;   // [(2 + hc)·hc]
  const float* scale = nullptr;  // [3]: pre, post, comb
  int sinkhorn_iters = 20;
  float norm_eps = 1e-20f;  // of the stream's RMS
  float hc_eps = 1e-6f;
};

// One token's mixes, in fp32: pre [hc], post [hc], comb [hc × hc] (row j, column i: how
// much of copy j goes into copy i). `x` is the token's stream, [hc × dim] (bf16 values).
void HcMixes(const HyperConnectionWeights& w, const float* x, float* pre, float* post, float* comb);

// out [dim] = bf16(Σ_j pre[j]·x[j]).
void HcPre(const float* x, int hc, std::int64_t dim, const float* pre, float* out);

// out [hc × dim]: copy i = bf16(post[i]·f + Σ_j comb[j][i]·residual[j]).
void HcPost(const float* f, const float* residual, int hc, std::int64_t dim, const float* post, const float* comb, float* out);

}  // namespace tandem::rt
