// Fuzzes everything a coordinator or an expert worker parses from the network: the
// frame header, layer requests and responses, and the handshake JSON (the worker's
// Challenge, the Hello with its token proof, the HelloAck with the worker's), and
// checks a parsed proof the way each side does. Nothing but WireError may escape.
#include <cstdint>
#include <span>

#include "runtime/hybrid/handshake.hpp"
#include "runtime/hybrid/handshake_auth.hpp"
#include "runtime/hybrid/wire_protocol.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tandem::rt;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  if (size < wire::kHeaderBytes) return 0;
  try {
    const wire::FrameHeader h = wire::DecodeHeader(bytes.first(wire::kHeaderBytes));
    const auto payload = bytes.subspan(wire::kHeaderBytes);
    if (payload.size() != h.payload_bytes) return 0;  // the transport reads exactly payload_bytes
    const wire::RequestShape shape{.hidden = 64, .top_k = 2, .n_experts = 8};
    switch (h.type) {
      case wire::FrameType::kLayerRequest:
        (void)wire::ParseLayerRequest(h, payload, shape);
        break;
      case wire::FrameType::kLayerResponse:
        (void)wire::ParseLayerResponse(h, payload, h.rows, shape.hidden);
        break;
      case wire::FrameType::kChallenge:
        (void)CoordinatorProof("fuzz", ParseChallenge(wire::PayloadText(payload)).nonce, Nonce{});
        break;
      case wire::FrameType::kHello: {
        const Hello hello = ParseHello(wire::PayloadText(payload));
        if (hello.auth) (void)SameMac(hello.auth->proof, CoordinatorProof("fuzz", Nonce{}, hello.auth->nonce));
        break;
      }
      case wire::FrameType::kHelloAck: {
        const HelloAck ack = ParseHelloAck(wire::PayloadText(payload));
        if (ack.proof) (void)SameMac(*ack.proof, WorkerProof("fuzz", Nonce{}, Nonce{}));
        break;
      }
      case wire::FrameType::kLoadProgress:
        (void)Describe(ParseLoadProgress(wire::PayloadText(payload)));
        break;
      case wire::FrameType::kError:
        (void)wire::PayloadText(payload);
        break;
    }
  } catch (const wire::WireError&) {
  }
  return 0;
}
