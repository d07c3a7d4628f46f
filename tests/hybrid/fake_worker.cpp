#include "tests/hybrid/fake_worker.hpp"

#include <atomic>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "runtime/hybrid/handshake.hpp"
#include "runtime/hybrid/wire_protocol.hpp"

namespace tandem::testing {

namespace asio = boost::asio;
using asio::ip::tcp;
namespace wire = rt::wire;

struct FakeWorker::State {
  FakeFault fault;
  int fault_at;
  FakeLoad load;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  tcp::socket socket{io};
  std::atomic<int> requests{0};
  std::atomic<int> connection{-1};  // the accepted socket, for the destructor
  std::thread thread;

  // One frame; false once the peer has gone.
  bool Read(wire::FrameHeader& header, std::vector<std::byte>& payload) {
    std::array<std::byte, wire::kHeaderBytes> head;
    boost::system::error_code ec;
    asio::read(socket, asio::buffer(head), ec);
    if (ec) return false;
    header = wire::DecodeHeader(head);
    payload.resize(header.payload_bytes);
    asio::read(socket, asio::buffer(payload), ec);
    return !ec;
  }

  void Write(const std::vector<std::byte>& frame) {
    boost::system::error_code ec;
    asio::write(socket, asio::buffer(frame), ec);
  }

  void Serve() {
    boost::system::error_code ec;
    acceptor.accept(socket, ec);
    if (ec) return;
    connection = socket.native_handle();
    Write(wire::EncodeTextFrame(wire::FrameType::kChallenge, rt::ChallengeJson({wire::kVersion, false, rt::NewNonce()})));
    wire::FrameHeader header;
    std::vector<std::byte> payload;
    if (!Read(header, payload) || header.type != wire::FrameType::kHello) return;
    const rt::Hello hello = rt::ParseHello(wire::PayloadText(payload));
    for (const auto& [pause, report] : load.reports) {
      std::this_thread::sleep_for(pause);
      Write(wire::EncodeTextFrame(wire::FrameType::kLoadProgress, rt::LoadProgressJson(report)));
    }
    if (!load.ack) {
      while (Read(header, payload)) {
      }
      return;
    }
    Write(wire::EncodeTextFrame(wire::FrameType::kHelloAck, rt::HelloAckJson({hello.model_revision, 0, 0.0, std::nullopt})));
    while (Read(header, payload)) {
      const int n = requests++;
      const bool faulty = n >= fault_at;
      std::vector<double> partial(static_cast<std::size_t>(header.rows) * static_cast<std::size_t>(hello.shape.hidden), 0.0);
      std::uint64_t id = header.request_id;
      if (faulty && fault == FakeFault::kWrongRequestId) ++id;
      if (faulty && fault == FakeFault::kNanPartials) partial[1] = std::numeric_limits<double>::quiet_NaN();
      if (faulty && fault == FakeFault::kHugePartials) std::fill(partial.begin(), partial.end(), 1e300);
      Write(wire::EncodeLayerResponse(id, static_cast<int>(header.layer), header.rows, partial.data(), hello.shape.hidden,
                                      hello.partial_dtype, 0));
    }
  }
};

FakeWorker::FakeWorker(FakeFault fault, int fault_at, FakeLoad load) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.fault = fault;
  s.fault_at = fault_at;
  s.load = std::move(load);
  const tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), 0);
  s.acceptor.open(endpoint.protocol());
  s.acceptor.bind(endpoint);
  s.acceptor.listen();
  s.thread = std::thread([&s] {
    try {
      s.Serve();
    } catch (const std::exception&) {
      // A malformed frame from the coordinator ends the fake; the test sees the coordinator's verdict.
    }
  });
}

FakeWorker::~FakeWorker() {
  // shutdown(2) wakes the thread's blocking accept or read.
  ::shutdown(state_->acceptor.native_handle(), SHUT_RDWR);
  if (const int fd = state_->connection; fd >= 0) ::shutdown(fd, SHUT_RDWR);
  state_->thread.join();
}

std::string FakeWorker::address() const { return fmt::format("127.0.0.1:{}", state_->acceptor.local_endpoint().port()); }

int FakeWorker::requests() const { return state_->requests; }

}  // namespace tandem::testing
