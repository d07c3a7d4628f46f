// One MoE layer's round trip over loopback: 16 rows, 4 expert workers (tp), hidden
// 512 (the small preset), bf16 rows out and f64 / f32 partials back. With
// --transport-only workers (no compute) it measures serialisation, syscalls, the
// network stack and scheduling: the transport's own cost. With computing workers,
// 4 workers share this machine's cores, so their compute queues; the time they
// report computing is subtracted, but not that queueing.
#include <algorithm>
#include <chrono>
#include <random>

#include <benchmark/benchmark.h>
#include <boost/asio/io_context.hpp>

#include "bench/bench_model.hpp"
#include "runtime/hybrid/frame_channel.hpp"
#include "runtime/hybrid/handshake.hpp"
#include "runtime/hybrid/local_workers.hpp"
#include "runtime/hybrid/placement_plan.hpp"
#include "runtime/hybrid/wire_protocol.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/model_revision.hpp"

namespace {

using namespace tandem::rt;

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
}

// range(0): the partial dtype; range(1): 1 = workers compute, 0 = --transport-only
// workers; range(2): how many workers.
void BM_LayerRoundTrip(benchmark::State& state) {
  const auto partial = static_cast<PartialDtype>(state.range(0));
  const bool compute = state.range(1) != 0;
  const auto n_workers = static_cast<int>(state.range(2));
  const Checkpoint ckpt = Checkpoint::Open(tandem::bench::BenchModel());
  const ModelConfig& c = ckpt.config();
  LocalWorkers workers(tandem::bench::BenchModel(), n_workers, false, 1, TANDEM_RT_BIN,
                       compute ? std::vector<std::string>{} : std::vector<std::string>{"--transport-only"});
  Layout layout;
  layout.workers = workers.worker_addresses();
  layout.partial = partial;
  const PlacementPlan plan = PlacementPlan::Compute(c, layout);
  const wire::RequestShape shape{c.hidden_size, c.num_experts_per_tok, c.n_routed_experts};
  boost::asio::io_context io;
  std::vector<std::unique_ptr<FrameChannel>> channels;
  const std::string revision = ModelRevision(ckpt.dir());
  for (int rank = 1; rank <= n_workers; ++rank) {
    const RankPlan& r = plan.ranks[static_cast<std::size_t>(rank)];
    const Hello hello{wire::kVersion, revision, rank, n_workers + 1, "worker", shape, wire::Dtype::kBf16, wire::ToWire(partial), r.slices};
    channels.push_back(ConnectAndHandshake(io, r.address, hello, std::chrono::seconds(30)));
  }
  std::vector<FrameChannel*> all;
  for (auto& ch : channels) all.push_back(ch.get());

  // 16 decode rows of 16 sequences, random hidden states and routes.
  constexpr int kRows = 16;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<Row> rows;
  std::vector<float> x(static_cast<std::size_t>(kRows * c.hidden_size));
  std::vector<ExpertRoute> routes;
  for (int r = 0; r < kRows; ++r) {
    rows.push_back({static_cast<SequenceId>(r + 1), 100 + r, 5, true});
    std::vector<int> experts(static_cast<std::size_t>(c.n_routed_experts));
    std::iota(experts.begin(), experts.end(), 0);
    std::shuffle(experts.begin(), experts.end(), rng);
    for (int k = 0; k < c.num_experts_per_tok; ++k) routes.push_back({experts[static_cast<std::size_t>(k)], 0.4f});
  }
  for (float& v : x) v = normal(rng);
  const int layer = c.first_k_dense_replace;
  std::vector<double> sum(x.size());

  std::vector<double> transport_us, round_trip_us;
  std::uint64_t request_bytes = 0, response_bytes = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto frame = std::make_shared<const std::vector<std::byte>>(
        wire::EncodeLayerRequest(1, layer, rows, routes, x.data(), shape, wire::Dtype::kBf16));
    for (FrameChannel* ch : all) {
      ch->StartSend(frame);
      ch->StartReceive();
    }
    RunUntilIdle(io, all, Clock::now() + std::chrono::seconds(10), "timeout", std::chrono::microseconds(state.range(3)));
    std::uint64_t slowest_compute = 0;
    std::fill(sum.begin(), sum.end(), 0.0);
    for (FrameChannel* ch : all) {
      if (ch->error()) {
        state.SkipWithError(ch->error()->c_str());
        return;
      }
      const wire::LayerResponse resp = wire::ParseLayerResponse(ch->header(), ch->payload(), kRows, c.hidden_size);
      for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += resp.partial[i];
      slowest_compute = std::max(slowest_compute, resp.compute_ns);
      response_bytes = wire::kHeaderBytes + ch->payload().size();
    }
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    round_trip_us.push_back(us);
    transport_us.push_back(us - static_cast<double>(slowest_compute) / 1e3);
    request_bytes = frame->size();
  }
  state.counters["transport_p50_us"] = Quantile(transport_us, 0.5);
  state.counters["transport_p99_us"] = Quantile(transport_us, 0.99);
  state.counters["round_trip_p50_us"] = Quantile(round_trip_us, 0.5);
  state.counters["round_trip_p99_us"] = Quantile(round_trip_us, 0.99);
  state.counters["request_bytes"] = static_cast<double>(request_bytes);
  state.counters["response_bytes"] = static_cast<double>(response_bytes);
}
BENCHMARK(BM_LayerRoundTrip)
    ->Args({static_cast<int>(PartialDtype::kF64), 0, 4, 0})
    ->Args({static_cast<int>(PartialDtype::kF64), 0, 4, 1000})
    ->Args({static_cast<int>(PartialDtype::kF32), 0, 4, 1000})
    ->Args({static_cast<int>(PartialDtype::kF64), 0, 1, 0})
    ->Args({static_cast<int>(PartialDtype::kF64), 0, 1, 1000})
    ->Args({static_cast<int>(PartialDtype::kF64), 1, 4, 1000})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(3.0);

}  // namespace
