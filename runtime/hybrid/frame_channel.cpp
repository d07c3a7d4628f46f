#include "runtime/hybrid/frame_channel.hpp"

#include <algorithm>
#include <stdexcept>
#include <thread>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

namespace tandem::rt {

namespace asio = boost::asio;
using asio::ip::tcp;

std::pair<std::string, std::uint16_t> SplitHostPort(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    throw std::invalid_argument(fmt::format("'{}' is not HOST:PORT", address));
  }
  const std::string port_text = address.substr(colon + 1);
  int port = 0;
  for (char c : port_text) {
    if (c < '0' || c > '9' || port > 65535)
      throw std::invalid_argument(fmt::format("'{}': port '{}' is not a number in [0, 65535]", address, port_text));
    port = port * 10 + (c - '0');
  }
  if (port > 65535) throw std::invalid_argument(fmt::format("'{}': port {} is out of range", address, port));
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);  // [::1]:port
  return {host, static_cast<std::uint16_t>(port)};
}

FrameChannel::FrameChannel(asio::io_context&, tcp::socket socket, std::string peer) : socket_(std::move(socket)), peer_(std::move(peer)) {
  boost::system::error_code ec;
  socket_.set_option(tcp::no_delay(true), ec);
  socket_.set_option(asio::socket_base::keep_alive(true), ec);
  // Probes after 30 s of silence, every 10 s, 3 unanswered: a peer whose host died or
  // dropped off the network is noticed within a minute, also by a side that waits for
  // nothing in particular (a worker between a coordinator's requests, which may be
  // hours apart), instead of after Linux's default two hours.
  const int fd = socket_.native_handle();
  const int idle_s = 30, interval_s = 10, probes = 3;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
  // A prefill's rows or a batch's partials can be megabytes: let a whole frame sit
  // in the kernel so a send never waits for the reader in small steps.
  socket_.set_option(asio::socket_base::send_buffer_size(4 << 20), ec);
  socket_.set_option(asio::socket_base::receive_buffer_size(4 << 20), ec);
}

std::unique_ptr<FrameChannel> FrameChannel::Connect(asio::io_context& io, const std::string& address, std::chrono::milliseconds timeout) {
  const auto [host, port] = SplitHostPort(address);
  tcp::resolver resolver(io);
  boost::system::error_code ec;
  const auto endpoints = resolver.resolve(host, std::to_string(port), ec);
  if (ec) throw std::runtime_error(fmt::format("{}: cannot resolve: {}", address, ec.message()));
  tcp::socket socket(io);
  std::optional<boost::system::error_code> result;
  asio::async_connect(socket, endpoints, [&](const boost::system::error_code& e, const tcp::endpoint&) { result = e; });
  io.restart();
  io.run_for(timeout);
  if (!result) {
    socket.close(ec);
    io.restart();
    io.poll();  // let the cancelled handler run before `result` goes out of scope
    throw std::runtime_error(fmt::format("{}: no connection within {} ms", address, timeout.count()));
  }
  if (*result) throw std::runtime_error(fmt::format("{}: cannot connect: {}", address, result->message()));
  return std::make_unique<FrameChannel>(io, std::move(socket), address);
}

void FrameChannel::Fail(const std::string& reason) {
  if (!error_) error_ = reason;
  Close();
}

void FrameChannel::Close() {
  boost::system::error_code ec;
  if (socket_.is_open()) {
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }
}

void FrameChannel::set_max_payload(std::uint32_t bytes, std::string stage) {
  max_payload_ = std::min(bytes, wire::kMaxPayload);
  max_payload_stage_ = std::move(stage);
}

void FrameChannel::StartSend(std::shared_ptr<const std::vector<std::byte>> frame) {
  if (error_ && !socket_.is_open()) return;
  sending_ = true;
  out_ = std::move(frame);
  asio::async_write(socket_, asio::buffer(out_->data(), out_->size()), [this](const boost::system::error_code& ec, std::size_t n) {
    sending_ = false;
    bytes_sent_ += n;
    if (ec) Fail(ec == asio::error::operation_aborted ? "connection closed" : fmt::format("send failed: {}", ec.message()));
  });
}

void FrameChannel::StartReceive() {
  if (error_) return;
  receiving_ = true;
  header_received_ = false;
  asio::async_read(socket_, asio::buffer(header_bytes_), [this](const boost::system::error_code& ec, std::size_t n) {
    bytes_received_ += n;
    if (ec) {
      receiving_ = false;
      Fail(ec == asio::error::eof                 ? "closed the connection"
           : ec == asio::error::operation_aborted ? "connection closed"
                                                  : fmt::format("receive failed: {}", ec.message()));
      return;
    }
    try {
      header_ = wire::DecodeHeader(header_bytes_);
    } catch (const wire::WireError& e) {
      receiving_ = false;
      Fail(fmt::format("malformed frame: {}", e.what()));
      return;
    }
    header_received_ = true;
    if (header_.payload_bytes > max_payload_) {
      // Refused on the header alone: nothing of the payload is read or allocated.
      receiving_ = false;
      payload_.clear();
      if (!error_) {
        error_ = fmt::format("frame type {} announces {} payload bytes; at most {} are accepted{}{}", static_cast<int>(header_.type),
                             header_.payload_bytes, max_payload_, max_payload_stage_.empty() ? "" : " ", max_payload_stage_);
      }
      return;
    }
    payload_.resize(header_.payload_bytes);
    asio::async_read(socket_, asio::buffer(payload_), [this](const boost::system::error_code& ec2, std::size_t n2) {
      receiving_ = false;
      bytes_received_ += n2;
      if (ec2) Fail(ec2 == asio::error::eof ? "closed the connection mid-frame" : fmt::format("receive failed: {}", ec2.message()));
    });
  });
}

bool WaitUntilIdle(asio::io_context& io, std::span<FrameChannel* const> channels, Clock::time_point until, std::chrono::microseconds spin) {
  auto any_busy = [&] {
    for (FrameChannel* c : channels) {
      if (c->busy()) return true;
    }
    return false;
  };
  io.restart();
  if (spin.count() > 0) {
    const auto spin_until = std::min(until, Clock::now() + spin);
    while (any_busy() && Clock::now() < spin_until) {
      if (io.poll() == 0) std::this_thread::yield();
      io.restart();
    }
  }
  while (any_busy()) {
    if (io.run_one_until(until) != 0) continue;
    if (Clock::now() < until) {
      // Nothing pending, yet a channel is busy: it can never complete.
      for (FrameChannel* c : channels) {
        if (c->busy()) c->Fail("no operation pending (internal error)");
      }
      io.restart();
      io.poll();
      return true;
    }
    io.restart();
    return false;
  }
  return true;
}

void RunUntilIdle(asio::io_context& io, std::span<FrameChannel* const> channels, Clock::time_point deadline,
                  const std::string& timeout_reason, std::chrono::microseconds spin) {
  if (WaitUntilIdle(io, channels, deadline, spin)) return;
  for (FrameChannel* c : channels) {
    if (c->busy()) c->Fail(timeout_reason);
  }
  io.restart();
  io.poll();  // run the cancelled handlers so nothing is left pending
}

}  // namespace tandem::rt
