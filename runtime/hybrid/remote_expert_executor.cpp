#include "runtime/hybrid/remote_expert_executor.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <stdexcept>

#include <boost/asio/io_context.hpp>
#include <fmt/format.h>

#include "runtime/engine/cuda/cuda_experts.hpp"
#include "runtime/engine/moe_slices.hpp"
#include "runtime/hybrid/frame_channel.hpp"
#include "runtime/hybrid/handshake.hpp"
#include "runtime/kernels/ops.hpp"
#include "runtime/kernels/thread_pool.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/model_revision.hpp"

namespace tandem::rt {

namespace {

// Far beyond any activation a model computes (bf16 models' hidden states stay within
// ~1e5), and far enough below FLT_MAX that the sum over up to 4096 ranks, rounded to
// fp32, stays finite.
constexpr double kMaxPartial = 1e30;

// A rank's loading progress is printed once it has loaded for kProgressAfter, then at
// most every kProgressEvery: a launcher that waits for progress hears of it well within
// any sensible timeout, and a load of minutes writes a few lines a rank.
constexpr auto kProgressAfter = std::chrono::seconds(1);
constexpr auto kProgressEvery = std::chrono::seconds(2);

}  // namespace

struct RemoteExpertExecutor::State {
  PlacementPlan plan;
  RemoteOptions options;
  wire::RequestShape shape;
  wire::Dtype wire_dtype;
  std::unique_ptr<ExpertSlices> local;          // rank 0's own slices
  std::unique_ptr<CudaMoeSlices> local_device;  // the same on the GPU (RemoteOptions::device)
  ThreadPool* pool = nullptr;
  boost::asio::io_context io;
  std::map<int, std::unique_ptr<FrameChannel>> channels;  // rank → connection
  std::map<int, RankStats> stats;
  std::map<int, std::vector<int>> owners;             // layer → ranks, ascending
  std::map<int, std::map<int, std::int64_t>> widths;  // layer → rank → partial values per row (ExpertSlices::PartialWidthOf)
  std::string failure;
  std::uint64_t next_request = 1;
  CoordinatorTimes times;

  // The step in flight.
  int layer = -1;
  std::uint64_t request_id = 0;  // of the request in flight; every response must carry it
  std::int64_t rows = 0;
  const float* x = nullptr;
  std::span<const ExpertRoute> routes;
  std::vector<int> remote;  // ranks asked this step
  Clock::time_point started;
  std::vector<double> own, partial, sum;
  std::vector<float> x_wire;
  ExpertInputPrecision input_precision = ExpertInputPrecision::kBf16;

  // Ranks the step in flight still waits for past options.late_after (Late()).
  mutable std::mutex late_mutex;
  std::string late_ranks;
  int late_layer = -1;
  Clock::time_point late_since;

  [[noreturn]] void Fail(std::string reason) {
    failure = std::move(reason);
    for (auto& [rank, channel] : channels) channel->Close();
    throw RemoteExpertError(failure);
  }

  std::string Name(int rank) const {
    const RankPlan& r = plan.ranks[static_cast<std::size_t>(rank)];
    return fmt::format("expert {} rank {} ({})", r.role, rank, r.address);
  }

  // A rank's connection failed. Rows that were not finite when we sent them make every
  // worker refuse the request and close: then the fault is ours, not the rank's. Only
  // looked at on failure, so the healthy path pays nothing for it.
  [[noreturn]] void FailRank(int rank, const std::string& reason) {
    const auto n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(shape.hidden);
    for (std::size_t i = 0; i < n; ++i) {
      if (!std::isfinite(x_wire[i])) {
        Fail(fmt::format("the coordinator's hidden rows entering layer {} are not finite (row {}, value {}: {}), so {} refused them: {}",
                         layer, i / static_cast<std::size_t>(shape.hidden), i % static_cast<std::size_t>(shape.hidden), x_wire[i],
                         Name(rank), reason));
      }
    }
    Fail(fmt::format("{}: {}", Name(rank), reason));
  }

  // A partial row that is not finite, or beyond kMaxPartial, makes the step fail naming
  // the rank that computed it (rank 0: this process), before it enters the sum where it
  // would surface a layer later as a healthy rank refusing a non-finite request.
  [[noreturn]] void FailImplausible(int rank, const double* values, std::size_t n, std::size_t width) {
    std::size_t i = 0;
    while (i + 1 < n && std::fabs(values[i]) <= kMaxPartial) ++i;
    const bool finite = std::isfinite(values[i]);
    const std::string where = fmt::format("row {}, value {}: {}", i / width, i % width, values[i]);
    if (rank == 0)
      Fail(fmt::format("the coordinator's own share of layer {} is {} ({})", layer, finite ? "implausible" : "not finite", where));
    Fail(fmt::format("{} returned {} partials for layer {} ({}{})", Name(rank), finite ? "implausible" : "non-finite", layer, where,
                     finite ? fmt::format("; no model's partial exceeds ±{:g}", kMaxPartial) : ""));
  }
};

RemoteExpertExecutor::RemoteExpertExecutor(const Checkpoint& ckpt, PlacementPlan plan, const Layout& layout, ThreadPool* pool,
                                           RemoteOptions options)
    : RemoteExpertExecutor(ckpt.config(), ckpt.dir(), std::make_unique<MoeSlices>(ckpt, plan.ranks[0].slices, pool), plan, layout, pool,
                           options) {}

RemoteExpertExecutor::RemoteExpertExecutor(const ModelConfig& c, const std::filesystem::path& model_dir,
                                           std::unique_ptr<ExpertSlices> local, PlacementPlan plan, const Layout& layout, ThreadPool* pool,
                                           RemoteOptions options)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.plan = std::move(plan);
  s.options = options;
  s.shape = {c.hidden_size, c.num_experts_per_tok, c.n_routed_experts};
  s.wire_dtype = wire::ToWire(layout.wire);
  s.input_precision = layout.wire == WireDtype::kBf16 ? ExpertInputPrecision::kBf16 : ExpertInputPrecision::kFp8Block32;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    if (c.IsMoeLayer(l)) s.owners[l] = s.plan.OwnersOf(l);
  }
  s.local = std::move(local);
  for (const RankPlan& r : s.plan.ranks) {
    for (const LayerSlice& slice : r.slices) s.widths[slice.layer][r.rank] = s.local->PartialWidthOf(slice, c.num_experts_per_tok);
  }
  if (options.device == Device::kCuda) {
    const auto* host = dynamic_cast<const MoeSlices*>(s.local.get());
    if (host == nullptr) throw std::invalid_argument("a GPU coordinator computes DeepSeek-V3-family experts only");
    s.local_device = CudaMoeSlices::Upload(*host);
  }
  s.pool = pool;

  const std::string revision = ModelRevision(model_dir);
  const auto world = static_cast<int>(s.plan.ranks.size());
  std::vector<HandshakeTarget> targets;
  for (int rank = 1; rank < world; ++rank) {
    const RankPlan& r = s.plan.ranks[static_cast<std::size_t>(rank)];
    targets.push_back(
        {r.address, Hello{wire::kVersion, revision, rank, world, r.role, s.shape, s.wire_dtype, wire::ToWire(layout.partial), r.slices}});
  }
  // Every rank loads at once; a progress line for each that takes a while.
  const auto start = Clock::now();
  std::vector<Clock::time_point> printed(targets.size(), start - kProgressEvery + kProgressAfter);
  std::vector<bool> reported(targets.size(), false);
  HandshakeOptions handshake{options.connect_timeout, options.token, {}};
  if (options.progress_log) {
    handshake.on_progress = [&](std::size_t i, const LoadProgress& p) {
      const auto now = Clock::now();
      if (now - printed[i] < kProgressEvery) return;
      printed[i] = now;
      reported[i] = true;
      options.progress_log(fmt::format("loading progress: {}: {} after {:.1f} s", s.Name(static_cast<int>(i) + 1), Describe(p),
                                       std::chrono::duration<double>(now - start).count()));
    };
  }
  std::vector<HelloAck> acks;
  std::vector<std::unique_ptr<FrameChannel>> channels;
  try {
    channels = HandshakeAll(s.io, targets, handshake, &acks);
  } catch (const HandshakeError& e) {
    throw RemoteExpertError(fmt::format("{}: {}", s.Name(static_cast<int>(e.index()) + 1), e.what()));
  }
  for (int rank = 1; rank < world; ++rank) {
    const auto i = static_cast<std::size_t>(rank - 1);
    if (reported[i]) {
      options.progress_log(fmt::format("loading progress: {}: loaded, {:.2f} GB of expert weights in {:.1f} s", s.Name(rank),
                                       static_cast<double>(acks[i].weight_bytes) / 1e9, acks[i].load_seconds));
    }
    RankStats& st = s.stats[rank];
    st.rank = rank;
    st.address = targets[i].address;
    st.weight_bytes = acks[i].weight_bytes;
    st.load_seconds = acks[i].load_seconds;
    s.channels.emplace(rank, std::move(channels[i]));
  }
}

RemoteExpertExecutor::~RemoteExpertExecutor() {
  for (auto& [rank, channel] : state_->channels) channel->Close();
}

bool RemoteExpertExecutor::healthy() const { return state_->failure.empty(); }
const std::string& RemoteExpertExecutor::failure() const { return state_->failure; }
const PlacementPlan& RemoteExpertExecutor::plan() const { return state_->plan; }
const CoordinatorTimes& RemoteExpertExecutor::Times() const { return state_->times; }

namespace {

std::uint64_t Since(Clock::time_point t) {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count());
}

}  // namespace

std::string RemoteExpertExecutor::Late() const {
  const State& s = *state_;
  std::lock_guard lock(s.late_mutex);
  if (s.late_ranks.empty()) return "";
  return fmt::format("{} has not answered layer {} for {:.1f} s (late after --rank-late-ms {}; --round-trip-timeout-ms {} ends the wait)",
                     s.late_ranks, s.late_layer, std::chrono::duration<double>(Clock::now() - s.late_since).count(),
                     s.options.late_after.count(), s.options.round_trip_timeout.count());
}

std::vector<RankStats> RemoteExpertExecutor::RankStatistics() const {
  std::vector<RankStats> out;
  for (const auto& [rank, st] : state_->stats) {
    RankStats copy = st;
    const auto& channel = state_->channels.at(rank);
    copy.bytes_sent = channel->bytes_sent();
    copy.bytes_received = channel->bytes_received();
    out.push_back(std::move(copy));
  }
  return out;
}

void RemoteExpertExecutor::Start(int layer, std::span<const Row> rows, const float* x, std::span<const ExpertRoute> routes) {
  State& s = *state_;
  if (!s.failure.empty()) throw RemoteExpertError(fmt::format("expert workers unavailable: {}", s.failure));
  const auto t0 = Clock::now();
  ++s.times.layers;
  s.layer = layer;
  s.rows = static_cast<std::int64_t>(rows.size());
  // Every rank computes from the rows as the wire carries them, this one included.
  s.x_wire.assign(x, x + s.rows * s.shape.hidden);
  RoundExpertInput(s.x_wire.data(), s.rows, s.shape.hidden, s.input_precision);
  s.x = s.x_wire.data();
  s.routes = routes;
  s.remote.clear();
  for (int rank : s.owners.at(layer)) {
    if (rank != 0) s.remote.push_back(rank);
  }
  if (s.remote.empty()) {
    s.times.encode_ns += Since(t0);
    return;
  }
  ++s.times.remote_layers;
  // One canonical request, the same bytes for every rank.
  s.request_id = s.next_request++;
  const auto frame = std::make_shared<const std::vector<std::byte>>(
      wire::EncodeLayerRequest(s.request_id, layer, rows, routes, s.x, s.shape, s.wire_dtype));
  s.started = Clock::now();
  for (int rank : s.remote) {
    FrameChannel& channel = *s.channels.at(rank);
    channel.StartSend(frame);
    channel.StartReceive();
    ++s.stats[rank].frames_sent;
  }
  // Hand the requests to the kernel now; the answers are collected in Finish.
  s.io.restart();
  s.io.poll();
  s.times.encode_ns += Since(t0);
}

void RemoteExpertExecutor::Finish(float* out) {
  State& s = *state_;
  const std::vector<int>& owners = s.owners.at(s.layer);
  const std::map<int, std::int64_t>& widths = s.widths[s.layer];
  // The sum is as wide as the widest rank's partial (a narrower one adds into each row's start).
  std::int64_t width = s.shape.hidden;
  for (const auto& [rank, w] : widths) width = std::max(width, w);
  const bool own_share = !owners.empty() && owners.front() == 0;
  auto t = Clock::now();
  if (own_share) {
    s.own.resize(static_cast<std::size_t>(s.rows * widths.at(0)));
    // Overlaps the remote ranks' work.
    if (s.local_device) {
      s.local_device->Compute(s.layer, s.x, s.rows, s.routes, s.shape.top_k, s.own.data());
    } else {
      s.local->Compute(s.layer, s.x, s.rows, s.routes, s.shape.top_k, s.own.data());
    }
  }
  s.times.local_ns += Since(t);
  t = Clock::now();
  if (!s.remote.empty()) {
    if (s.pool != nullptr) s.pool->Park();  // the workers on this machine need the cores while we wait
    std::vector<FrameChannel*> waiting;
    for (int rank : s.remote) waiting.push_back(s.channels.at(rank).get());
    const auto deadline = s.started + s.options.round_trip_timeout;
    const std::string late = fmt::format("did not answer layer {} within {} ms", s.layer, s.options.round_trip_timeout.count());
    const auto late_at = s.started + s.options.late_after;
    if (late_at >= deadline) {
      RunUntilIdle(s.io, waiting, deadline, late, s.options.spin);
    } else if (!WaitUntilIdle(s.io, waiting, late_at, s.options.spin)) {
      // Still waiting: say on whom, for /health, until they answer or time out.
      std::string who;
      for (int rank : s.remote) {
        if (s.channels.at(rank)->busy()) who += (who.empty() ? "" : ", ") + s.Name(rank);
      }
      {
        std::lock_guard lock(s.late_mutex);
        s.late_ranks = who;
        s.late_layer = s.layer;
        s.late_since = s.started;
      }
      RunUntilIdle(s.io, waiting, deadline, late);
      std::lock_guard lock(s.late_mutex);
      s.late_ranks.clear();
    }
  }
  s.times.wait_ns += Since(t);
  t = Clock::now();
  s.sum.assign(static_cast<std::size_t>(s.rows * width), 0.0);
  for (int rank : owners) {
    const double* partial = s.own.data();
    const std::int64_t rank_width = widths.at(rank);
    if (rank != 0) {
      FrameChannel& channel = *s.channels.at(rank);
      if (channel.error()) s.FailRank(rank, *channel.error());
      if (channel.header().type == wire::FrameType::kError) {
        s.Fail(fmt::format("{}: {}", s.Name(rank), wire::PayloadText(channel.payload())));
      }
      if (channel.header().request_id != s.request_id) {
        // Partials of another request could be another layer's or step's: never sum them.
        s.Fail(fmt::format("{}: protocol error: the response carries request id {}, the request was {} (layer {})", s.Name(rank),
                           channel.header().request_id, s.request_id, s.layer));
      }
      try {
        wire::LayerResponse response =
            wire::ParseLayerResponse(channel.header(), channel.payload(), static_cast<std::uint32_t>(s.rows), static_cast<int>(rank_width));
        if (channel.header().layer != static_cast<std::uint32_t>(s.layer)) {
          throw wire::WireError(fmt::format("answered layer {} instead of {}", channel.header().layer, s.layer));
        }
        s.partial = std::move(response.partial);
        RankStats& st = s.stats[rank];
        ++st.frames_received;
        st.compute_ns += response.compute_ns;
        auto& histogram = st.rtt_histogram[s.layer];
        if (histogram.empty()) histogram.resize(RankStats::kBuckets);
        ++histogram[static_cast<std::size_t>(RankStats::Bucket(
            static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - s.started).count())))];
      } catch (const wire::WireError& e) {
        s.Fail(fmt::format("{}: malformed response: {}", s.Name(rank), e.what()));
      }
      partial = s.partial.data();
    }
    bool implausible = false;
    for (std::int64_t r = 0; r < s.rows; ++r) {
      for (std::int64_t i = 0; i < rank_width; ++i) {
        const double v = partial[r * rank_width + i];
        s.sum[static_cast<std::size_t>(r * width + i)] += v;
        implausible |= !(std::fabs(v) <= kMaxPartial);  // NaN compares false
      }
    }
    if (implausible) s.FailImplausible(rank, partial, static_cast<std::size_t>(s.rows * rank_width), static_cast<std::size_t>(rank_width));
  }
  s.local->Reduce(s.sum.data(), s.rows, width, out);  // rounded once
  s.times.reduce_ns += Since(t);
}

}  // namespace tandem::rt
