#pragma once

#include <cstdint>
#include <vector>

#include "runtime/model/model_config.hpp"

namespace tandem::rt {

// Rotary position embedding for the MLA rope dims, with DeepSeek's YaRN scaling.
//
// Layout: we rotate interleaved pairs (x[2i], x[2i+1]) by pos·inv_freq[i] and keep
// them in place. HF's DeepSeek code first de-interleaves (evens to the first half,
// odds to the second) and then rotates halves; both layouts give the same q·k dot
// products because q_pe and k_pe are permuted alike, and only those dot products
// are ever used.
class RopeTable {
 public:
  explicit RopeTable(const ModelConfig& config);

  // Rotates `rows` vectors of rope_dim floats, all at `position`, `stride` floats
  // apart (packed when 0). The angles' cos and sin are taken once for all rows.
  void Apply(float* v, std::int64_t rows, std::int64_t position, std::int64_t stride = 0) const;

  // The factor the attention softmax scale is multiplied by (YaRN's mscale²).
  double softmax_scale_factor() const { return softmax_scale_factor_; }
  const std::vector<double>& inv_freq() const { return inv_freq_; }
  double mscale() const { return mscale_; }  // cos and sin are multiplied by it

 private:
  int dim_ = 0;
  std::vector<double> inv_freq_;
  double mscale_ = 1.0;  // applied to cos and sin, as HF does
  double softmax_scale_factor_ = 1.0;
};

}  // namespace tandem::rt
