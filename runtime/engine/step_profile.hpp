#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tandem::rt {

// Where an engine's CPU forward passes spend their time, summed over passes: what
// sets a decode step against the memory roofline (BM_DecodeRoofline,
// bench/roofline.py). An engine fills one only when given it
// (EngineOptions::profile); the regions partition each pass, one clock read per
// boundary. Passes on the GPU are not counted, nor a pass that throws.
struct StepProfile {
  enum Region : std::size_t {
    kAttentionProjections,  // q_a, kv_a and q_b (with q_a's norm), and o_proj
    kAttentionCache,        // the new KV row (norm, rope, store); per head W_UK, the cache, W_UV
    kRouter,                // router logits and each row's choice of experts
    kExperts,               // the MoE layers' routed and shared experts, through their executor
    kDenseMlp,              // the dense layers' MLP
    kLmHead,                // the final norm and the LM head
    kOther,                 // the rest: embedding rows (and an MTP layer's input projection), norms, residual adds, checks
    kRegions
  };

  std::array<double, kRegions> seconds{};
  std::uint64_t passes = 0;

  double TotalSeconds() const;
  static std::string_view Name(Region region);
};

}  // namespace tandem::rt
