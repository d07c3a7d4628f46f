#include "runtime/hybrid/expert_worker.hpp"

#include <cstdio>
#include <optional>
#include <set>
#include <thread>

#include <sys/prctl.h>

#include <boost/asio/ip/tcp.hpp>
#include <fmt/format.h>

#include "runtime/engine/cuda/cuda_experts.hpp"
#include "runtime/engine/moe_slices.hpp"
#include "runtime/hybrid/frame_channel.hpp"
#include "runtime/hybrid/handshake.hpp"
#include "runtime/kernels/thread_pool.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/model_revision.hpp"

namespace tandem::rt {

namespace asio = boost::asio;
using asio::ip::tcp;

struct ExpertWorker::State {
  ExpertWorkerOptions options;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  ThreadPool pool;
  std::optional<Checkpoint> checkpoint;  // opened at the first handshake
  std::string revision;
  std::unique_ptr<CudaMoeSlices> device_slices;  // --device cuda: the served slices on the GPU

  explicit State(ExpertWorkerOptions o) : options(std::move(o)), pool(options.threads) {}

  void Log(const std::string& message) const {
    fmt::print(stderr, "tandem-rt expert ({} {}): {}\n", options.role, options.listen, message);
    std::fflush(stderr);
  }

  // Waits as long as it takes for a frame to begin, then at most frame_timeout for the rest.
  bool Receive(FrameChannel& channel) {
    channel.StartReceive();
    io.restart();
    while (channel.busy() && !channel.header_received()) {
      if (io.run_one() == 0) break;
    }
    FrameChannel* one[] = {&channel};
    RunUntilIdle(io, one, Clock::now() + options.frame_timeout,
                 fmt::format("a frame did not complete within {} ms", options.frame_timeout.count()));
    return !channel.error();
  }

  bool Send(FrameChannel& channel, std::vector<std::byte> frame) {
    channel.StartSend(std::make_shared<const std::vector<std::byte>>(std::move(frame)));
    FrameChannel* one[] = {&channel};
    RunUntilIdle(io, one, Clock::now() + options.frame_timeout,
                 fmt::format("sending did not complete within {} ms", options.frame_timeout.count()));
    return !channel.error();
  }

  // Returns the slices to serve, or nullopt after telling the coordinator why not.
  std::optional<MoeSlices> Handshake(FrameChannel& channel, Hello& hello) {
    if (!Receive(channel)) {
      Log(fmt::format("{}: {}", channel.peer(), *channel.error()));
      return std::nullopt;
    }
    auto refuse = [&](const std::string& reason) {
      Log(fmt::format("{}: refusing the handshake: {}", channel.peer(), reason));
      Send(channel, wire::EncodeTextFrame(wire::FrameType::kError, reason));
      return std::nullopt;
    };
    if (channel.header().type != wire::FrameType::kHello) return refuse("the first frame must be a Hello");
    try {
      hello = ParseHello(wire::PayloadText(channel.payload()));
    } catch (const wire::WireError& e) {
      return refuse(e.what());
    }
    if (hello.role != options.role) {
      return refuse(fmt::format("this process was started as --role {}, the coordinator expects a {}", options.role, hello.role));
    }
    const auto t0 = Clock::now();
    try {
      if (!checkpoint) {
        // A GPU worker's slices are read only while uploading.
        const bool mapped = options.map_weights || options.device == Device::kCuda;
        checkpoint.emplace(Checkpoint::Open(options.model, mapped ? WeightPlacement::kMapped : WeightPlacement::kCopied));
        revision = ModelRevision(checkpoint->dir());
      }
    } catch (const ModelError& e) {
      return refuse(fmt::format("cannot open the model: {}", e.what()));
    }
    if (hello.model_revision != revision) {
      return refuse(fmt::format("model revision mismatch: the coordinator has {}, this worker ({}) has {}", hello.model_revision,
                                options.model.string(), revision));
    }
    const ModelConfig& c = checkpoint->config();
    if (hello.shape.hidden != c.hidden_size || hello.shape.top_k != c.num_experts_per_tok || hello.shape.n_experts != c.n_routed_experts) {
      return refuse("request shape does not match the model");
    }
    try {
      // The GPU copies gate and up apart (CudaMoeSlices).
      MoeSlices slices(*checkpoint, options.transport_only ? std::vector<LayerSlice>{} : hello.slices, &pool, true,
                       options.device != Device::kCuda);
      device_slices.reset();
      if (options.device == Device::kCuda) device_slices = CudaMoeSlices::Upload(slices);
      HelloAck ack{revision, device_slices ? device_slices->weight_bytes() : slices.weight_bytes(),
                   std::chrono::duration<double>(Clock::now() - t0).count()};
      if (!Send(channel, wire::EncodeTextFrame(wire::FrameType::kHelloAck, HelloAckJson(ack)))) return std::nullopt;
      Log(fmt::format("{}: serving rank {} of {}: {} slices, {:.1f} MB of expert weights on the {}, loaded in {:.3f} s", channel.peer(),
                      hello.rank, hello.world, hello.slices.size(), static_cast<double>(ack.weight_bytes) / 1e6,
                      device_slices ? "GPU" : "CPU", ack.load_seconds));
      return slices;
    } catch (const std::exception& e) {
      return refuse(fmt::format("cannot load the slices: {}", e.what()));
    }
  }

  void Serve(FrameChannel& channel) {
    Hello hello;
    std::optional<MoeSlices> slices = Handshake(channel, hello);
    if (!slices) return;
    if (device_slices) slices.reset();  // the GPU holds them now; free the host's copies
    std::vector<double> partial;
    std::set<int> held;
    for (const LayerSlice& s : hello.slices) held.insert(s.layer);
    for (;;) {
      if (!Receive(channel)) {
        Log(fmt::format("{}: {}; waiting for the next coordinator", channel.peer(), *channel.error()));
        return;
      }
      const auto arrived = Clock::now();
      try {
        if (channel.header().type != wire::FrameType::kLayerRequest) {
          throw wire::WireError(fmt::format("unexpected frame type {}", static_cast<int>(channel.header().type)));
        }
        const wire::LayerRequest request = wire::ParseLayerRequest(channel.header(), channel.payload(), hello.shape);
        const auto layer = static_cast<int>(request.header.layer);
        if (!held.contains(layer)) throw wire::WireError(fmt::format("layer {} is not held by this rank", layer));
        if (options.emulated_rtt.count() > 0) std::this_thread::sleep_until(arrived + options.emulated_rtt);
        const auto t0 = Clock::now();
        partial.resize(request.hidden.size());
        if (options.transport_only) {
          std::fill(partial.begin(), partial.end(), 0.0);
        } else if (device_slices) {
          device_slices->Compute(layer, request.hidden.data(), request.header.rows, request.routes, hello.shape.top_k, partial.data());
        } else {
          slices->Compute(layer, request.hidden.data(), request.header.rows, request.routes, hello.shape.top_k, partial.data());
        }
        const auto compute_ns = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
        if (!Send(channel, wire::EncodeLayerResponse(request.header.request_id, layer, request.header.rows, partial.data(),
                                                     hello.shape.hidden, hello.partial_dtype, compute_ns))) {
          Log(fmt::format("{}: {}", channel.peer(), *channel.error()));
          return;
        }
      } catch (const wire::WireError& e) {
        Log(fmt::format("{}: closing the connection: {}", channel.peer(), e.what()));
        return;
      } catch (const std::exception& e) {
        // A compute failure (a CUDA error, out of memory): say so here, where it
        // happened; the coordinator sees the connection close and names this rank.
        Log(fmt::format("{}: cannot compute the request: {}; closing the connection", channel.peer(), e.what()));
        return;
      }
    }
  }
};

ExpertWorker::ExpertWorker(ExpertWorkerOptions options) : state_(std::make_unique<State>(std::move(options))) {
  State& s = *state_;
  if (s.options.role != "worker" && s.options.role != "peer") {
    throw std::invalid_argument(fmt::format("--role must be worker or peer, got '{}'", s.options.role));
  }
  if (s.options.emulated_rtt.count() < 0) throw std::invalid_argument("--emulated-rtt-us must not be negative");
  const auto [host, port] = SplitHostPort(s.options.listen);
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) throw std::invalid_argument(fmt::format("--listen {}: '{}' is not an IP address", s.options.listen, host));
  const tcp::endpoint endpoint(address, port);
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error(fmt::format("--listen {}: {}", s.options.listen, ec.message()));
  s.options.listen = this->address();
  // The default 50 µs timer slack would lengthen every emulated round trip by as much.
  if (s.options.emulated_rtt.count() > 0) prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
}

ExpertWorker::~ExpertWorker() = default;

std::string ExpertWorker::address() const {
  const auto endpoint = state_->acceptor.local_endpoint();
  return fmt::format("{}:{}", endpoint.address().to_string(), endpoint.port());
}

void ExpertWorker::Run() {
  State& s = *state_;
  for (;;) {
    tcp::socket socket(s.io);
    boost::system::error_code ec;
    s.acceptor.accept(socket, ec);
    if (ec) {
      s.Log(fmt::format("accept failed: {}", ec.message()));
      continue;
    }
    const auto remote = socket.remote_endpoint(ec);
    FrameChannel channel(s.io, std::move(socket), ec ? "?" : fmt::format("{}:{}", remote.address().to_string(), remote.port()));
    s.Serve(channel);
    channel.Close();
  }
}

}  // namespace tandem::rt
