#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace tandem::rt {

struct V41Config;

// DeepSeek V4.1's rotary embedding: the last `rope_dim` values of a vector taken as
// interleaved pairs (x[2i], x[2i+1]), rotated by position·freq_i in fp32 and written back
// as bf16; the output of attention is rotated back (inverse). Window-only layers use
// rope_theta without YaRN; compressing layers compress_rope_theta with YaRN's static
// frequency ramp (no attention-magnitude factor), as the reference's
// precompute_freqs_cis.
class V41Rope {
 public:
  struct Yarn {
    double original_seq_len = 0;
    double factor = 1;
    double beta_fast = 32;
    double beta_slow = 1;
  };
  V41Rope(int rope_dim, double base, std::optional<Yarn> yarn);
  // The table layer `layer` uses (its compress ratio decides).
  static V41Rope ForLayer(const V41Config& config, int layer);

  // Rotates the last rope_dim values of each of `rows` vectors of `width` floats (bf16
  // values), at `position`; `inverse`: by the negative angle.
  void Apply(float* v, std::int64_t rows, std::int64_t width, std::int64_t position, bool inverse = false) const;

  const std::vector<float>& freqs() const { return freqs_; }
  int ramp_low() const { return low_; }
  int ramp_high() const { return high_; }

 private:
  int dim_;
  std::vector<float> freqs_;  // per pair, fp32 as the reference computes them
  int low_ = 0, high_ = 0;    // YaRN's ramp: pairs below low keep their frequency, from high on it is divided by the factor
};

}  // namespace tandem::rt
