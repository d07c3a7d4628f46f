#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

// DeepSeek V4.1's KV compression on a source layer: every `ratio` tokens become one
// latent. With ratio 2 the group's KV rows are pooled channel by channel, weighted by a
// softmax over the group of their gate scores (fp32, as the reference's Compressor);
// with ratio 1 a token's row is its latent. Tokens of an unfinished group wait in the
// state, so a prompt fed whole and one fed token by token give the same latents.
namespace tandem::rt {

class GatedPooling {
 public:
  GatedPooling(int ratio, std::int64_t width);

  // Adds the token at `position` (positions come in order, from 0): its KV row and gate
  // scores (`width` fp32 each). Returns the pooled latent (fp32, before its norm) when
  // the token completes a group, nothing otherwise.
  std::optional<std::vector<float>> Add(std::int64_t position, std::span<const float> kv, std::span<const float> score);

  int ratio() const { return ratio_; }

 private:
  int ratio_;
  std::int64_t width_;
  std::vector<float> kv_, score_;  // [ratio × width]: slot position % ratio
};

}  // namespace tandem::rt
