#include "runtime/engine/rank_stats.hpp"

#include <algorithm>
#include <cmath>

namespace tandem::rt {

int RankStats::Bucket(std::uint64_t ns) {
  const double us = std::max(1.0, static_cast<double>(ns) / 1000.0);
  return std::min(kBuckets - 1, static_cast<int>(std::floor(std::log2(us) * kBucketsPerDoubling)));
}

double RankStats::BucketUpperMicros(int bucket) { return std::exp2(static_cast<double>(bucket + 1) / kBucketsPerDoubling); }

double RankStats::RoundTripQuantileMicros(double q) const {
  std::vector<std::uint64_t> total(kBuckets);
  std::uint64_t n = 0;
  for (const auto& [layer, counts] : rtt_histogram) {
    for (int b = 0; b < kBuckets; ++b) total[b] += counts[b];
  }
  for (std::uint64_t c : total) n += c;
  if (n == 0) return 0.0;
  const auto target = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(n)));
  std::uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += total[b];
    if (seen >= std::max<std::uint64_t>(target, 1)) return BucketUpperMicros(b);
  }
  return BucketUpperMicros(kBuckets - 1);
}

}  // namespace tandem::rt
