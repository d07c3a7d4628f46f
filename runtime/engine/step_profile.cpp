#include "runtime/engine/step_profile.hpp"

#include <numeric>

namespace tandem::rt {

double StepProfile::TotalSeconds() const { return std::accumulate(seconds.begin(), seconds.end(), 0.0); }

std::string_view StepProfile::Name(Region region) {
  switch (region) {
    case kAttentionProjections:
      return "attention_projections";
    case kAttentionCache:
      return "attention_cache";
    case kRouter:
      return "router";
    case kExperts:
      return "experts";
    case kDenseMlp:
      return "dense_mlp";
    case kLmHead:
      return "lm_head";
    case kOther:
      return "other";
    case kRegions:
      break;
  }
  return "?";
}

}  // namespace tandem::rt
