#include "runtime/hybrid/expert_worker.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <thread>

#include <sys/prctl.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "runtime/engine/cuda/cuda_experts.hpp"
#include "runtime/engine/moe_slices.hpp"
#include "runtime/engine/v41_moe_slices.hpp"
#include "runtime/hybrid/frame_channel.hpp"
#include "runtime/hybrid/handshake.hpp"
#include "runtime/kernels/thread_pool.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/model_revision.hpp"
#include "runtime/model/v41_checkpoint.hpp"
#include "runtime/model/v41_config.hpp"

namespace tandem::rt {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// Connections waiting for their handshake at once, in all and from one source (an IPv4
// address, an IPv6 /64). A newcomer is always admitted: when its source already holds
// kMaxPendingPerSource, the oldest waiting connection of that source is closed to make
// room, else when kMaxPending wait, the oldest of all. So one source can never fill the
// worker, and a coordinator from another one always gets through; each connection waits
// at most the handshake timeout, and a thread per connection stays a bounded cost.
constexpr int kMaxPending = 64;
constexpr int kMaxPendingPerSource = 8;

// How long an authenticated coordinator waits for another's session to end before it is
// refused: long enough for a coordinator that was just killed and restarted, whose old
// connection's end the worker may not have read yet.
constexpr auto kSessionGrace = std::chrono::seconds(2);

// LoadProgress reports within a phase are sent at most this often (the first and the
// last of each always): enough for a coordinator to tell a load from a stall.
constexpr auto kProgressInterval = std::chrono::milliseconds(200);

// One accepted connection: its own io_context, driven only by its own thread.
struct Connection {
  asio::io_context io;
  std::optional<FrameChannel> channel;
  std::thread thread;
  std::atomic<bool> done{false};
  std::string source;  // what kMaxPendingPerSource counts (SourceOf)
  // Guarded by State::mutex.
  bool pending = false;  // waiting for its handshake: counted in State::pending
  bool evicted = false;  // closed to admit a newer connection; it must not take the session
};

// The unit a peer is counted by: its IPv4 address, or the /64 prefix of its IPv6 one (a
// single host commonly holds a whole /64).
std::string SourceOf(const asio::ip::address& address) {
  if (address.is_v6() && address.to_v6().is_v4_mapped()) return address.to_v6().to_v4().to_string();
  if (address.is_v4()) return address.to_string();
  auto bytes = address.to_v6().to_bytes();
  std::fill(bytes.begin() + 8, bytes.end(), 0);
  return asio::ip::address_v6(bytes).to_string() + "/64";
}

// A Hello that passed authentication.
struct Admitted {
  Hello hello;
  Challenge challenge;
};

}  // namespace

struct ExpertWorker::State {
  ExpertWorkerOptions options;
  asio::io_context io;  // the acceptor's
  tcp::acceptor acceptor{io};
  ThreadPool pool;
  // Only the connection holding the session touches these.
  std::optional<Checkpoint> checkpoint;  // opened at the first session (DeepSeek V2/V3)
  std::optional<V41Checkpoint> v41;      // or this (DeepSeek V4.1)
  std::string revision;
  std::unique_ptr<CudaMoeSlices> device_slices;  // --device cuda: the served slices on the GPU

  std::mutex mutex;
  std::condition_variable session_ended;
  bool in_session = false;                             // a coordinator holds the worker
  int pending = 0;                                     // connections waiting for their handshake
  std::map<std::string, int> pending_from;             // the same by source (none: absent)
  std::list<std::unique_ptr<Connection>> connections;  // the accepting thread's, oldest first

  explicit State(ExpertWorkerOptions o) : options(std::move(o)), pool(options.threads) {}

  // One fwrite per line (stdio locks the stream), so threads' lines never interleave.
  void Log(const std::string& message) const {
    fmt::print(stderr, "tandem-rt expert ({} {}): {}\n", options.role, options.listen, message);
    std::fflush(stderr);
  }

  static bool Send(Connection& c, std::vector<std::byte> frame, Clock::time_point deadline, const std::string& late) {
    c.channel->StartSend(std::make_shared<const std::vector<std::byte>>(std::move(frame)));
    FrameChannel* one[] = {&*c.channel};
    RunUntilIdle(c.io, one, deadline, late);
    return !c.channel->error();
  }

  // A whole frame by `deadline` (the handshake's).
  static bool ReceiveBy(Connection& c, Clock::time_point deadline, const std::string& late) {
    c.channel->StartReceive();
    FrameChannel* one[] = {&*c.channel};
    RunUntilIdle(c.io, one, deadline, late);
    return !c.channel->error();
  }

  // A request of the session: its header within the idle timeout (if any), the rest
  // within the frame timeout.
  bool ReceiveRequest(Connection& c) const {
    FrameChannel& channel = *c.channel;
    channel.StartReceive();
    c.io.restart();
    const bool limited = options.idle_timeout.count() > 0;
    const auto idle_deadline = Clock::now() + options.idle_timeout;
    while (channel.busy() && !channel.header_received()) {
      if ((limited ? c.io.run_one_until(idle_deadline) : c.io.run_one()) != 0) continue;
      channel.Fail(limited && Clock::now() >= idle_deadline
                       ? fmt::format("no request for {} s (--idle-timeout-s); closing the session",
                                     std::chrono::duration_cast<std::chrono::seconds>(options.idle_timeout).count())
                       : "the worker is stopping");
      c.io.restart();
      c.io.poll();  // run the cancelled handler
      return false;
    }
    FrameChannel* one[] = {&channel};
    RunUntilIdle(c.io, one, Clock::now() + options.frame_timeout,
                 fmt::format("a frame did not complete within {} ms", options.frame_timeout.count()));
    return !channel.error();
  }

  // Tells the peer why (`said`), logs why in full (`logged`).
  void Refuse(Connection& c, const std::string& said, const std::string& logged, Clock::time_point deadline) const {
    Log(fmt::format("{}: refusing the handshake: {}", c.channel->peer(), logged));
    Send(c, wire::EncodeTextFrame(wire::FrameType::kError, said), deadline, "sending the refusal timed out");
  }

  // The Challenge, then a Hello that proves the token, all within the handshake timeout.
  // Everything said here goes to a peer that has not proved anything yet: no local
  // details (paths, the model) — only what is wrong with what it sent.
  std::optional<Admitted> Authenticate(Connection& c) const {
    FrameChannel& channel = *c.channel;
    const auto deadline = Clock::now() + options.handshake_timeout;
    const std::string late =
        fmt::format("no complete Hello within the {} ms handshake timeout; closing", options.handshake_timeout.count());
    Admitted a;
    a.challenge = Challenge{wire::kVersion, options.token.has_value(), NewNonce()};
    auto refuse = [&](const std::string& reason) -> std::optional<Admitted> {
      Refuse(c, reason, reason, deadline);
      return std::nullopt;
    };
    // Nothing big is read from a peer that has proved nothing: a header announcing more
    // than a Hello can need is refused before its payload.
    channel.set_max_payload(wire::kMaxHandshakePayload, "during the handshake");
    if (!Send(c, wire::EncodeTextFrame(wire::FrameType::kChallenge, ChallengeJson(a.challenge)), deadline, late) ||
        !ReceiveBy(c, deadline, late)) {
      if (channel.open()) return refuse(*channel.error());  // a frame over the limit, refused on its header
      Log(fmt::format("{}: {}", channel.peer(), *channel.error()));
      return std::nullopt;
    }
    if (channel.header().type != wire::FrameType::kHello) return refuse("the first frame must be a Hello");
    try {
      a.hello = ParseHello(wire::PayloadText(channel.payload()));
    } catch (const wire::WireError& e) {
      return refuse(e.what());
    }
    if (options.token) {
      if (!a.hello.auth) {
        return refuse("worker requires a token (set TANDEM_WORKER_TOKEN or --worker-token-file on the coordinator to the worker's token)");
      }
      if (!SameMac(a.hello.auth->proof, CoordinatorProof(*options.token, a.challenge.nonce, a.hello.auth->nonce))) {
        return refuse("worker token mismatch");
      }
    } else if (a.hello.auth) {
      return refuse("worker token mismatch: this worker has no token, the coordinator has one");
    }
    channel.set_max_payload(wire::kMaxPayload);  // a session's requests may be large
    return a;
  }

  // Takes the worker for this connection, waiting kSessionGrace for a running session to end.
  bool TakeSession() {
    std::unique_lock lock(mutex);
    if (!session_ended.wait_for(lock, kSessionGrace, [&] { return !in_session; })) return false;
    in_session = true;
    return true;
  }

  void EndSession() {
    {
      std::lock_guard lock(mutex);
      in_session = false;
    }
    session_ended.notify_all();
  }

  // Loads the slices the Hello names and answers HelloAck, or refuses. Only a peer that
  // proved the token hears local details (the model's path, why it cannot be read).
  std::unique_ptr<ExpertSlices> Load(Connection& c, const Admitted& a) {
    FrameChannel& channel = *c.channel;
    const Hello& hello = a.hello;
    const bool proved = options.token.has_value();
    auto refuse = [&](const std::string& said, const std::string& detail) -> std::unique_ptr<ExpertSlices> {
      Refuse(c, proved ? detail : said, detail, Clock::now() + options.frame_timeout);
      return nullptr;
    };
    if (hello.role != options.role) {
      const std::string reason =
          fmt::format("this process was started as --role {}, the coordinator expects a {}", options.role, hello.role);
      return refuse(reason, reason);
    }
    const auto t0 = Clock::now();
    // Reports to the coordinator as the load goes; a coordinator that has gone ends it.
    std::optional<LoadProgress::Phase> phase_sent;
    Clock::time_point sent_at;
    const LoadProgressFn progress = [&](const LoadProgress& p) {
      const bool last_of_phase = p.bytes_done == p.bytes_total;
      if (options.debug_load_delay.count() > 0 && p.phase == LoadProgress::Phase::kExperts && !last_of_phase) {
        std::this_thread::sleep_for(options.debug_load_delay);
      }
      const auto now = Clock::now();
      if (phase_sent == p.phase && !last_of_phase && now - sent_at < kProgressInterval) return;
      if (!Send(c, wire::EncodeTextFrame(wire::FrameType::kLoadProgress, LoadProgressJson(p)), now + options.frame_timeout,
                fmt::format("sending did not complete within {} ms", options.frame_timeout.count()))) {
        throw std::runtime_error(fmt::format("the coordinator went away while this worker loaded: {}", *channel.error()));
      }
      phase_sent = p.phase;
      sent_at = now;
    };
    try {
      if (!checkpoint && !v41 && IsV41Checkpoint(options.model)) {
        if (options.device == Device::kCuda) {
          throw ModelError("a DeepSeek V4.1 checkpoint's experts are computed on the CPU in this build (--device cpu)");
        }
        V41Checkpoint opened = V41Checkpoint::Open(options.model);
        revision = ModelRevision(opened.dir(), progress);
        v41.emplace(std::move(opened));
      } else if (!checkpoint && !v41) {
        // A GPU worker's slices are read only while uploading.
        const bool mapped = options.map_weights || options.device == Device::kCuda;
        Checkpoint opened = Checkpoint::Open(options.model, mapped ? WeightPlacement::kMapped : WeightPlacement::kCopied);
        revision = ModelRevision(opened.dir(), progress);
        checkpoint.emplace(std::move(opened));
      }
    } catch (const ModelError& e) {
      return refuse("cannot open the model (the worker's log says why)", fmt::format("cannot open the model: {}", e.what()));
    } catch (const std::exception& e) {
      Log(fmt::format("{}: {}", channel.peer(), e.what()));
      return nullptr;
    }
    if (hello.model_revision != revision) {
      return refuse(fmt::format("model revision mismatch: the coordinator has {}, this worker has {}", hello.model_revision, revision),
                    fmt::format("model revision mismatch: the coordinator has {}, this worker ({}) has {}", hello.model_revision,
                                options.model.string(), revision));
    }
    const ModelConfig cfg = v41 ? V41MoeConfig(v41->config()) : checkpoint->config();
    if (hello.shape.hidden != cfg.hidden_size || hello.shape.top_k != cfg.num_experts_per_tok ||
        hello.shape.n_experts != cfg.n_routed_experts) {
      return refuse("request shape does not match the model", "request shape does not match the model");
    }
    try {
      const std::vector<LayerSlice> served = options.transport_only ? std::vector<LayerSlice>{} : hello.slices;
      std::unique_ptr<ExpertSlices> slices;
      device_slices.reset();
      if (v41) {
        slices = std::make_unique<V41MoeSlices>(*v41, served, &pool, progress);
      } else {
        // The GPU copies gate and up apart (CudaMoeSlices).
        auto host = std::make_unique<MoeSlices>(*checkpoint, served, &pool, true, options.device != Device::kCuda, progress);
        if (options.device == Device::kCuda) device_slices = CudaMoeSlices::Upload(*host, progress);
        slices = std::move(host);
      }
      HelloAck ack{revision, device_slices ? device_slices->weight_bytes() : slices->weight_bytes(),
                   std::chrono::duration<double>(Clock::now() - t0).count()};
      if (options.token) ack.proof = WorkerProof(*options.token, a.challenge.nonce, hello.auth->nonce);
      if (!Send(c, wire::EncodeTextFrame(wire::FrameType::kHelloAck, HelloAckJson(ack)), Clock::now() + options.frame_timeout,
                fmt::format("sending did not complete within {} ms", options.frame_timeout.count()))) {
        Log(fmt::format("{}: {}", channel.peer(), *channel.error()));
        return nullptr;
      }
      Log(fmt::format("{}: serving rank {} of {}: {} slices, {:.1f} MB of expert weights on the {}, loaded in {:.3f} s", channel.peer(),
                      hello.rank, hello.world, hello.slices.size(), static_cast<double>(ack.weight_bytes) / 1e6,
                      device_slices ? "GPU" : "CPU", ack.load_seconds));
      return slices;
    } catch (const std::exception& e) {
      if (!channel.open()) {  // the coordinator went away: nobody to tell
        Log(fmt::format("{}: {}", channel.peer(), e.what()));
        return nullptr;
      }
      return refuse("cannot load the slices (the worker's log says why)", fmt::format("cannot load the slices: {}", e.what()));
    }
  }

  void Serve(Connection& c, const Admitted& a) {
    FrameChannel& channel = *c.channel;
    const Hello& hello = a.hello;
    std::unique_ptr<ExpertSlices> slices = Load(c, a);
    if (!slices) return;
    if (device_slices) slices.reset();  // the GPU holds them now; free the host's copies
    std::vector<double> partial;
    std::set<int> held;
    for (const LayerSlice& s : hello.slices) held.insert(s.layer);
    for (;;) {
      if (!ReceiveRequest(c)) {
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
        // A rank holding column slices of experts that are rounded whole sends each route's part too.
        const std::int64_t width = slices ? slices->PartialWidth(layer, hello.shape.top_k) : hello.shape.hidden;
        partial.resize(static_cast<std::size_t>(request.header.rows * width));
        if (options.transport_only) {
          std::fill(partial.begin(), partial.end(), 0.0);
        } else if (device_slices) {
          device_slices->Compute(layer, request.hidden.data(), request.header.rows, request.routes, hello.shape.top_k, partial.data());
        } else {
          slices->Compute(layer, request.hidden.data(), request.header.rows, request.routes, hello.shape.top_k, partial.data());
        }
        const auto compute_ns = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
        if (!Send(c,
                  wire::EncodeLayerResponse(request.header.request_id, layer, request.header.rows, partial.data(), static_cast<int>(width),
                                            hello.partial_dtype, compute_ns),
                  Clock::now() + options.frame_timeout,
                  fmt::format("sending did not complete within {} ms", options.frame_timeout.count()))) {
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

  // Counts `c` as waiting for its handshake (mutex held).
  void AddPending(Connection& c) {
    c.pending = true;
    ++pending;
    ++pending_from[c.source];
  }

  // Counts `c` no longer (mutex held).
  void RemovePending(Connection& c) {
    if (!c.pending) return;
    c.pending = false;
    --pending;
    if (--pending_from[c.source] == 0) pending_from.erase(c.source);
  }

  // The oldest connection still waiting for its handshake, of `source` or of all (mutex held).
  Connection* OldestPending(const std::string* source) {
    for (const auto& c : connections) {
      if (c->pending && (source == nullptr || c->source == *source)) return c.get();
    }
    return nullptr;
  }

  // Makes room for a connection from `source`, about to be admitted: closes the oldest
  // waiting connection of its source when that holds kMaxPendingPerSource, else the
  // oldest of all when kMaxPending wait. Returns the one closed, whose thread then ends
  // promptly (the caller joins it): Fail runs on that connection's own thread, which
  // always runs its io_context while it waits for the peer.
  Connection* Evict(const std::string& peer, const std::string& source) {
    Connection* victim = nullptr;
    std::string why;
    {
      std::lock_guard lock(mutex);
      if (const auto it = pending_from.find(source); it != pending_from.end() && it->second >= kMaxPendingPerSource) {
        victim = OldestPending(&source);
        why = fmt::format("{} connections from {} are waiting for their handshake", it->second, source);
      } else if (pending >= kMaxPending) {
        victim = OldestPending(nullptr);
        why = fmt::format("{} connections are waiting for their handshake", pending);
      }
      if (victim == nullptr) return nullptr;
      RemovePending(*victim);
      victim->evicted = true;
      asio::post(victim->io,
                 [victim] { victim->channel->Fail("closed to admit a newer connection: too many were waiting for their handshake"); });
    }
    Log(fmt::format("{}: {}; closing the oldest ({}) to admit this one", peer, why, victim->channel->peer()));
    return victim;
  }

  void HandleConnection(Connection& c) {
    std::optional<Admitted> admitted;
    try {
      admitted = Authenticate(c);
    } catch (const std::exception& e) {
      Log(fmt::format("{}: handshake failed: {}", c.channel->peer(), e.what()));
    }
    bool evicted = false;
    {
      std::lock_guard lock(mutex);
      RemovePending(c);
      evicted = c.evicted;
    }
    if (evicted) {
      // Closed to admit a newer connection while its handshake completed: that decision stands.
      if (admitted)
        Log(fmt::format("{}: closed to admit a newer connection: too many were waiting for their handshake", c.channel->peer()));
      return;
    }
    if (!admitted) return;
    if (!TakeSession()) {
      const std::string reason = "this worker already serves another coordinator (a worker serves one coordinator at a time)";
      Refuse(c, reason, reason, Clock::now() + options.frame_timeout);
      return;
    }
    try {
      Serve(c, *admitted);
    } catch (const std::exception& e) {
      Log(fmt::format("{}: {}; closing the connection", c.channel->peer(), e.what()));
    }
    EndSession();
  }

  // Joins the threads of connections that have ended, and of `also` (ending).
  void Reap(const Connection* also = nullptr) {
    for (auto it = connections.begin(); it != connections.end();) {
      if ((*it)->done || it->get() == also) {
        (*it)->thread.join();
        it = connections.erase(it);
      } else {
        ++it;
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
  if (s.options.handshake_timeout.count() <= 0) throw std::invalid_argument("--handshake-timeout-s must be positive");
  if (s.options.idle_timeout.count() < 0) throw std::invalid_argument("--idle-timeout-s must not be negative");
  const auto [host, port] = SplitHostPort(s.options.listen);
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) throw std::invalid_argument(fmt::format("--listen {}: '{}' is not an IP address", s.options.listen, host));
  if (!s.options.token && !address.is_loopback() && !s.options.allow_unauthenticated) {
    throw std::invalid_argument(
        fmt::format("--listen {} accepts connections from other machines, and no worker token is set: set TANDEM_WORKER_TOKEN or "
                    "--worker-token-file (coordinators need the same token), or pass --allow-unauthenticated to serve anyone who connects",
                    s.options.listen));
  }
  const tcp::endpoint endpoint(address, port);
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error(fmt::format("--listen {}: {}", s.options.listen, ec.message()));
  s.options.listen = this->address();
  if (!s.options.token) {
    s.Log(address.is_loopback()
              ? "warning: no worker token (TANDEM_WORKER_TOKEN or --worker-token-file): any local process can use this worker"
              : "warning: no worker token and --allow-unauthenticated: anyone who can reach this address can use this worker");
  }
  // The default 50 µs timer slack would lengthen every emulated round trip by as much
  // (connection threads, started from this one, inherit it).
  if (s.options.emulated_rtt.count() > 0) prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
}

// Run never returns; a worker destroyed without having run has no connections. Should
// one have any, they are stopped and joined rather than left running on freed state.
ExpertWorker::~ExpertWorker() {
  boost::system::error_code ec;
  state_->acceptor.close(ec);
  for (auto& c : state_->connections) {
    c->io.stop();
    if (c->thread.joinable()) c->thread.join();
  }
}

std::string ExpertWorker::address() const {
  const auto endpoint = state_->acceptor.local_endpoint();
  return fmt::format("{}:{}", endpoint.address().to_string(), endpoint.port());
}

void ExpertWorker::Run() {
  State& s = *state_;
  for (;;) {
    s.Reap();
    auto c = std::make_unique<Connection>();
    tcp::socket socket(c->io);
    boost::system::error_code ec;
    s.acceptor.accept(socket, ec);
    if (ec) {
      s.Log(fmt::format("accept failed: {}", ec.message()));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // e.g. out of descriptors: do not spin
      continue;
    }
    const auto remote = socket.remote_endpoint(ec);
    const std::string peer = ec ? "?" : fmt::format("{}:{}", remote.address().to_string(), remote.port());
    c->source = ec ? "?" : SourceOf(remote.address());
    // Joined at once, so that closed connections' threads never pile up.
    if (const Connection* evicted = s.Evict(peer, c->source)) s.Reap(evicted);
    {
      std::lock_guard lock(s.mutex);
      s.AddPending(*c);
    }
    c->channel.emplace(c->io, std::move(socket), peer);
    Connection* raw = c.get();
    s.connections.push_back(std::move(c));
    try {
      raw->thread = std::thread([&s, raw] {
        s.HandleConnection(*raw);
        raw->channel->Close();
        raw->done = true;
      });
    } catch (const std::system_error& e) {
      // Out of threads or memory for a stack: this connection is closed, the others go on.
      {
        std::lock_guard lock(s.mutex);
        s.RemovePending(*raw);
      }
      s.Log(fmt::format("{}: cannot start a thread for this connection: {}; closing it", peer, e.what()));
      raw->channel->Close();
      s.connections.pop_back();
    }
  }
}

}  // namespace tandem::rt
