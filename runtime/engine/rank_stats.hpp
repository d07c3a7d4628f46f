#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tandem::rt {

// Round-trip times of one rank, per layer, in a log-spaced histogram (8 buckets
// per doubling, 1 µs … ~70 s), plus traffic counters.
struct RankStats {
  int rank = 0;
  std::string address;
  std::uint64_t frames_sent = 0;
  std::uint64_t frames_received = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t compute_ns = 0;                             // as the worker reported it
  std::uint64_t weight_bytes = 0;                           // the slices it loaded, as its handshake said
  double load_seconds = 0;                                  // how long it took to load them, as its handshake said
  std::map<int, std::vector<std::uint64_t>> rtt_histogram;  // layer → bucket counts

  static constexpr int kBucketsPerDoubling = 8;
  static constexpr int kBuckets = 26 * kBucketsPerDoubling;  // 1 µs · 2^26 ≈ 67 s

  static int Bucket(std::uint64_t ns);
  static double BucketUpperMicros(int bucket);
  // An upper bound of the q-quantile (0..1) of round-trip times over all layers, in µs.
  double RoundTripQuantileMicros(double q) const;
};

}  // namespace tandem::rt
