#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "runtime/hybrid/wire_protocol.hpp"

namespace tandem::rt {

using Clock = std::chrono::steady_clock;

// One TCP connection carrying wire frames, driven by an io_context that the owner
// runs (several channels can share one, so a coordinator waits on all its workers
// at once). Operations are started, then completed by running the io_context until
// a deadline; a channel that fails or times out is closed and keeps its error.
class FrameChannel {
 public:
  FrameChannel(boost::asio::io_context& io, boost::asio::ip::tcp::socket socket, std::string peer);
  // Connects to host:port within `timeout`, with TCP_NODELAY and keep-alive on.
  static std::unique_ptr<FrameChannel> Connect(boost::asio::io_context& io, const std::string& address, std::chrono::milliseconds timeout);

  const std::string& peer() const { return peer_; }
  bool open() const { return socket_.is_open(); }
  bool busy() const { return sending_ || receiving_; }
  // During a receive: whether the header has arrived (the rest should follow promptly).
  bool header_received() const { return header_received_; }
  const std::optional<std::string>& error() const { return error_; }

  void StartSend(std::shared_ptr<const std::vector<std::byte>> frame);
  void StartReceive();
  // Receives refuse a frame whose header announces more than `bytes` of payload
  // (wire::kMaxPayload until set), before reading or allocating any of it: the receive
  // ends with error() saying so ("... at most N are accepted STAGE") and header() set,
  // but the connection stays open, so its owner can still send why before closing it.
  void set_max_payload(std::uint32_t bytes, std::string stage = {});
  // The frame the last completed receive produced.
  const wire::FrameHeader& header() const { return header_; }
  std::span<const std::byte> payload() const { return payload_; }

  // Fails the channel: records `reason` (unless an error is already recorded) and closes it.
  // Sends are refused once it is closed; one started after a refused frame (above) still goes out.
  void Fail(const std::string& reason);
  void Close();

  std::uint64_t bytes_sent() const { return bytes_sent_; }
  std::uint64_t bytes_received() const { return bytes_received_; }

 private:
  boost::asio::ip::tcp::socket socket_;
  std::string peer_;
  bool sending_ = false;
  bool receiving_ = false;
  bool header_received_ = false;
  std::optional<std::string> error_;
  std::shared_ptr<const std::vector<std::byte>> out_;
  std::array<std::byte, wire::kHeaderBytes> header_bytes_{};
  wire::FrameHeader header_;
  std::vector<std::byte> payload_;
  std::uint32_t max_payload_ = wire::kMaxPayload;
  std::string max_payload_stage_;
  std::uint64_t bytes_sent_ = 0;
  std::uint64_t bytes_received_ = 0;
};

// Runs `io` until no channel in `channels` is busy or `deadline` passes; on a
// timeout every still-busy channel fails with `timeout_reason`. For the first
// `spin` it polls without blocking, yielding the core between polls: on virtual
// machines a blocked thread's wake-up costs tens of microseconds, a round trip's
// whole budget, while yielding still lets co-located workers run.
void RunUntilIdle(boost::asio::io_context& io, std::span<FrameChannel* const> channels, Clock::time_point deadline,
                  const std::string& timeout_reason, std::chrono::microseconds spin = std::chrono::microseconds(0));
// The same, but at `until` it returns false and leaves the busy channels as they are
// (to be waited for again); true once none is busy.
bool WaitUntilIdle(boost::asio::io_context& io, std::span<FrameChannel* const> channels, Clock::time_point until,
                   std::chrono::microseconds spin = std::chrono::microseconds(0));

// Splits "host:port"; throws std::invalid_argument naming the text.
std::pair<std::string, std::uint16_t> SplitHostPort(const std::string& address);

}  // namespace tandem::rt
