#include <cmath>
#include <cstdio>

#include <unistd.h>

#include <fmt/format.h>

#include "harness/commands/campaign_run.hpp"
#include "harness/traffic/sse_client.hpp"

namespace tandem::harness {

Progress::Progress(bool enabled, int total_requests)
    : enabled_(enabled && ::isatty(STDERR_FILENO)), total_(total_requests), start_(MonotonicSeconds()) {}

void Progress::Update(const std::string& where, int requests_done_in_workload, int workload_total) {
  if (!enabled_) return;
  const int done = done_ + requests_done_in_workload;
  const double elapsed = MonotonicSeconds() - start_;
  const double eta = done > 0 ? elapsed / done * (total_ - done) : 0;
  fmt::print(stderr, "\r\033[K{} · {}/{} requests · ETA {:.0f}m{:02.0f}s", where, requests_done_in_workload, workload_total,
             std::floor(eta / 60), std::fmod(eta, 60));
  std::fflush(stderr);
}

void Progress::Line(const std::string& text) {
  if (enabled_) fmt::print(stderr, "\r\033[K");
  fmt::print(stderr, "{}\n", text);
}

}  // namespace tandem::harness
