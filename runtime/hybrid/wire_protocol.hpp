#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/engine/router.hpp"
#include "runtime/engine/row.hpp"
#include "runtime/hybrid/placement_plan.hpp"

// The coordinator ↔ expert-worker wire format (docs/wire-protocol.md). Every
// frame is a 32-byte little-endian header and a payload. Parsers check every
// field against its bounds and throw WireError with the reason; nothing a peer
// sends can make them read out of bounds.
namespace tandem::rt::wire {

constexpr std::uint32_t kMagic = 0x4D444E54;  // "TNDM" in memory order
constexpr std::uint16_t kVersion = 3;         // 2: the worker's Challenge and token proofs; 3: LoadProgress during the handshake
constexpr std::size_t kHeaderBytes = 32;
constexpr std::uint32_t kMaxRows = 1u << 16;
constexpr std::uint32_t kMaxPayload = 256u << 20;
// The largest payload either side reads before the handshake has succeeded (Challenge,
// Hello, HelloAck, a refusal): from a peer that has proved nothing, nothing large is
// allocated or parsed. A Hello holds about 85 bytes per MoE layer the rank serves (at
// most 135, with every number at its widest), so this fits over 480 layers even then;
// real models have fewer than 100.
constexpr std::uint32_t kMaxHandshakePayload = 64u << 10;
constexpr int kFp8Block = 32;  // values sharing one power-of-two scale (kFp8BlockSize)

enum class FrameType : std::uint16_t {
  kHello = 1,
  kHelloAck = 2,
  kLayerRequest = 3,
  kLayerResponse = 4,
  kError = 5,
  kChallenge = 6,
  kLoadProgress = 7,  // worker → coordinator while it loads, between Hello and HelloAck
};
enum class RowKind : std::uint8_t { kDecode = 0, kPrefill = 1, kVerify = 2 };
enum class Dtype : std::uint8_t { kF32 = 0, kBf16 = 1, kFp8Block32 = 2, kF64 = 3 };

class WireError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct FrameHeader {
  FrameType type = FrameType::kError;
  std::uint64_t request_id = 0;
  std::uint32_t layer = 0;
  std::uint32_t rows = 0;
  Dtype dtype = Dtype::kF32;  // hidden rows (requests) or partial rows (responses)
  std::uint16_t flags = 0;
  std::uint32_t payload_bytes = 0;
};

std::array<std::byte, kHeaderBytes> EncodeHeader(const FrameHeader& header);
FrameHeader DecodeHeader(std::span<const std::byte> bytes);  // exactly kHeaderBytes

struct WireRow {
  std::uint32_t row_id = 0;
  RowKind kind = RowKind::kDecode;
  std::uint64_t sequence = 0;
  std::uint32_t position = 0;
};

// What a worker needs to check a request against: fixed by the handshake.
struct RequestShape {
  int hidden = 0;
  int top_k = 0;
  int n_experts = 0;
};

struct LayerRequest {
  FrameHeader header;
  std::vector<WireRow> rows;
  std::vector<ExpertRoute> routes;  // rows × top_k
  std::vector<float> hidden;        // rows × hidden, decoded
};

// One canonical request for a layer: every row, its routes and its hidden state.
// The kind of a row: prefill when its sequence has more than one row in the
// batch, else decode (verification rows arrive with the drafting issue).
std::vector<std::byte> EncodeLayerRequest(std::uint64_t request_id, int layer, std::span<const Row> rows,
                                          std::span<const ExpertRoute> routes, const float* x, const RequestShape& shape, Dtype dtype);
LayerRequest ParseLayerRequest(const FrameHeader& header, std::span<const std::byte> payload, const RequestShape& shape);

struct LayerResponse {
  std::vector<double> partial;  // rows × hidden
  std::uint64_t compute_ns = 0;
};

// Partial rows travel as f64 (exact: ranks' parts add up to what one process
// computes), f32 or bf16 (fewer bytes, rounded). The parser checks the framing, not
// the values: the coordinator's reduce judges those and blames the rank that sent them.
std::vector<std::byte> EncodeLayerResponse(std::uint64_t request_id, int layer, std::uint32_t rows, const double* partial, int hidden,
                                           Dtype dtype, std::uint64_t compute_ns);
LayerResponse ParseLayerResponse(const FrameHeader& header, std::span<const std::byte> payload, std::uint32_t rows, int hidden);

// Challenge / Hello / HelloAck / Error frames carry text (JSON but for Error).
std::vector<std::byte> EncodeTextFrame(FrameType type, const std::string& text);
std::string PayloadText(std::span<const std::byte> payload);

// Hidden-row codecs, exposed for tests and benchmarks.
std::size_t EncodedRowBytes(Dtype dtype, int hidden);
void EncodeRow(const float* values, int hidden, Dtype dtype, std::byte* out);
void DecodeRow(const std::byte* in, int hidden, Dtype dtype, float* values);  // throws WireError on non-finite values

Dtype ToWire(WireDtype d);
Dtype ToWire(PartialDtype d);

}  // namespace tandem::rt::wire
