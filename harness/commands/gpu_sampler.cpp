// The GPUs' conditions through a session: nvidia-smi on each host the layout uses, every
// `conditions.sample_s`, from the launch to the teardown. A host without nvidia-smi is
// asked once.
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <thread>

#include "harness/commands/campaign_run.hpp"
#include "harness/launch/host_facts.hpp"
#include "harness/traffic/sse_client.hpp"

namespace tandem::harness {

namespace {

constexpr const char* kQuery =
    "command -v nvidia-smi >/dev/null 2>&1 || { echo no-nvidia-smi; exit 0; }\n"
    "nvidia-smi --query-gpu=index,uuid,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active "
    "--format=csv,noheader,nounits";

std::optional<double> Number(const std::string& cell) {
  try {
    std::size_t used = 0;
    const double v = std::stod(cell, &used);
    if (used == cell.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;  // "[N/A]", "[Not Supported]"
}

// One line of kQuery's output; none when it is not one.
std::optional<store::GpuSample> ParseLine(const std::string& line, const std::string& host, double t) {
  const std::vector<std::string> f = SplitNvidiaSmiCsv(line);
  if (f.size() != 8) return std::nullopt;
  const std::optional<double> index = Number(f[0]);
  if (!index) return std::nullopt;
  return store::GpuSample{t,   host, static_cast<int>(*index), f[1], Number(f[2]), Number(f[3]), Number(f[4]), Number(f[5]), Number(f[6]),
                          f[7]};
}

}  // namespace

struct GpuSampler::State {
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  std::vector<store::GpuSample> samples;
};

GpuSampler::GpuSampler(std::vector<const Host*> hosts, double interval_s, double started_at) : state_(std::make_shared<State>()) {
  thread_ = std::thread([state = state_, hosts = std::move(hosts), interval_s, started_at]() mutable {
    std::unique_lock lock(state->mutex);
    while (!state->stop && !hosts.empty()) {
      lock.unlock();
      std::vector<store::GpuSample> got;
      std::vector<const Host*> keep;
      for (const Host* h : hosts) {
        const double t = MonotonicSeconds() - started_at;
        try {
          const CommandResult r = h->Run(kQuery, std::chrono::seconds(20));
          if (r.code != 0 || r.out.rfind("no-nvidia-smi", 0) == 0) continue;  // not asked again
          keep.push_back(h);
          std::istringstream lines(r.out);
          for (std::string line; std::getline(lines, line);) {
            if (auto s = ParseLine(line, h->name(), t)) got.push_back(std::move(*s));
          }
        } catch (const std::exception&) {
          keep.push_back(h);  // the host did not answer this time
        }
      }
      hosts = std::move(keep);
      lock.lock();
      state->samples.insert(state->samples.end(), got.begin(), got.end());
      state->wake.wait_for(lock, std::chrono::duration<double>(interval_s), [&] { return state->stop; });
    }
  });
}

std::vector<store::GpuSample> GpuSampler::Stop() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stop = true;
  }
  state_->wake.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(state_->mutex);
  return state_->samples;
}

GpuSampler::~GpuSampler() { Stop(); }

}  // namespace tandem::harness
