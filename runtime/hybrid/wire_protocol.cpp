#include "runtime/hybrid/wire_protocol.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "runtime/kernels/ops.hpp"
#include "runtime/numeric/dtype.hpp"

namespace tandem::rt::wire {

namespace {

constexpr std::size_t kRowRecordBytes = 20;  // row_id u32, kind u8, n_routes u8, reserved u16, sequence u64, position u32
constexpr std::size_t kRouteBytes = 8;       // expert u32, weight f32

template <typename T>
void Put(std::byte* p, T value) {
  std::memcpy(p, &value, sizeof(T));  // the wire is little-endian, as is every platform we build for
}

template <typename T>
T Get(const std::byte* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");

// Reads through a payload, refusing to step past its end.
class Reader {
 public:
  explicit Reader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  const std::byte* Take(std::size_t n, const char* what) {
    if (bytes_.size() - pos_ < n) {
      throw WireError(fmt::format("payload ends inside {} (needs {} more bytes, has {})", what, n, bytes_.size() - pos_));
    }
    const std::byte* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  void ExpectEnd() const {
    if (pos_ != bytes_.size()) throw WireError(fmt::format("{} bytes of trailing garbage after the payload", bytes_.size() - pos_));
  }

 private:
  std::span<const std::byte> bytes_;
  std::size_t pos_ = 0;
};

RowKind KindOf(std::span<const Row> rows, std::size_t i) {
  for (std::size_t j = 0; j < rows.size(); ++j) {
    if (j != i && rows[j].sequence == rows[i].sequence) return RowKind::kPrefill;
  }
  return RowKind::kDecode;
}

}  // namespace

Dtype ToWire(WireDtype d) { return d == WireDtype::kBf16 ? Dtype::kBf16 : Dtype::kFp8Block32; }
Dtype ToWire(PartialDtype d) { return d == PartialDtype::kF64 ? Dtype::kF64 : d == PartialDtype::kF32 ? Dtype::kF32 : Dtype::kBf16; }

std::array<std::byte, kHeaderBytes> EncodeHeader(const FrameHeader& h) {
  std::array<std::byte, kHeaderBytes> out{};
  std::byte* p = out.data();
  Put<std::uint32_t>(p + 0, kMagic);
  Put<std::uint16_t>(p + 4, kVersion);
  Put<std::uint16_t>(p + 6, static_cast<std::uint16_t>(h.type));
  Put<std::uint64_t>(p + 8, h.request_id);
  Put<std::uint32_t>(p + 16, h.layer);
  Put<std::uint32_t>(p + 20, h.rows);
  Put<std::uint8_t>(p + 24, static_cast<std::uint8_t>(h.dtype));
  Put<std::uint8_t>(p + 25, 0);
  Put<std::uint16_t>(p + 26, h.flags);
  Put<std::uint32_t>(p + 28, h.payload_bytes);
  return out;
}

FrameHeader DecodeHeader(std::span<const std::byte> bytes) {
  if (bytes.size() != kHeaderBytes) throw WireError(fmt::format("frame header must be {} bytes, got {}", kHeaderBytes, bytes.size()));
  const std::byte* p = bytes.data();
  if (Get<std::uint32_t>(p) != kMagic)
    throw WireError(fmt::format("bad magic 0x{:08x}: not a Tandem expert connection", Get<std::uint32_t>(p)));
  if (Get<std::uint16_t>(p + 4) != kVersion) {
    throw WireError(fmt::format("protocol version {} is not the supported {}", Get<std::uint16_t>(p + 4), kVersion));
  }
  FrameHeader h;
  const auto type = Get<std::uint16_t>(p + 6);
  if (type < 1 || type > 7) throw WireError(fmt::format("unknown frame type {}", type));
  h.type = static_cast<FrameType>(type);
  h.request_id = Get<std::uint64_t>(p + 8);
  h.layer = Get<std::uint32_t>(p + 16);
  h.rows = Get<std::uint32_t>(p + 20);
  const auto dtype = Get<std::uint8_t>(p + 24);
  if (dtype > 3) throw WireError(fmt::format("unknown dtype {}", dtype));
  h.dtype = static_cast<Dtype>(dtype);
  if (Get<std::uint8_t>(p + 25) != 0) throw WireError("reserved header byte is not zero");
  h.flags = Get<std::uint16_t>(p + 26);
  h.payload_bytes = Get<std::uint32_t>(p + 28);
  if (h.payload_bytes > kMaxPayload) throw WireError(fmt::format("payload of {} bytes exceeds the {} limit", h.payload_bytes, kMaxPayload));
  if (h.rows > kMaxRows) throw WireError(fmt::format("{} rows exceeds the {} limit", h.rows, kMaxRows));
  return h;
}

std::size_t EncodedRowBytes(Dtype dtype, int hidden) {
  const auto n = static_cast<std::size_t>(hidden);
  switch (dtype) {
    case Dtype::kF32:
      return 4 * n;
    case Dtype::kBf16:
      return 2 * n;
    case Dtype::kFp8Block32:
      return n + (n + kFp8Block - 1) / kFp8Block;  // one exponent byte per block
    case Dtype::kF64:
      return 8 * n;
  }
  return 0;
}

void EncodeRow(const float* v, int hidden, Dtype dtype, std::byte* out) {
  switch (dtype) {
    case Dtype::kF64:
      for (int i = 0; i < hidden; ++i) Put<double>(out + 8 * i, static_cast<double>(v[i]));
      return;
    case Dtype::kF32:
      std::memcpy(out, v, 4 * static_cast<std::size_t>(hidden));
      return;
    case Dtype::kBf16:
      for (int i = 0; i < hidden; ++i) Put<std::uint16_t>(out + 2 * i, F32ToBf16(v[i]));
      return;
    case Dtype::kFp8Block32:
      // Each block: an int8 exponent e, then the block's values ÷ 2^e in e4m3. e is
      // the smallest that keeps the block's largest magnitude within e4m3's ±448.
      for (int b = 0; b < hidden; b += kFp8Block) {
        const int n = std::min(kFp8Block, hidden - b);
        const int e = Fp8BlockExponent(v + b, n);  // the same rounding as RoundExpertInput
        *out++ = static_cast<std::byte>(static_cast<std::int8_t>(e));
        for (int i = 0; i < n; ++i) *out++ = static_cast<std::byte>(F32ToF8E4M3(std::ldexp(v[b + i], -e)));
      }
      return;
  }
}

void DecodeRow(const std::byte* in, int hidden, Dtype dtype, float* v) {
  switch (dtype) {
    case Dtype::kF64:
      for (int i = 0; i < hidden; ++i) v[i] = static_cast<float>(Get<double>(in + 8 * i));
      break;
    case Dtype::kF32:
      std::memcpy(v, in, 4 * static_cast<std::size_t>(hidden));
      break;
    case Dtype::kBf16:
      for (int i = 0; i < hidden; ++i) v[i] = Bf16ToF32(Get<std::uint16_t>(in + 2 * i));
      break;
    case Dtype::kFp8Block32:
      for (int b = 0; b < hidden; b += kFp8Block) {
        const int n = std::min(kFp8Block, hidden - b);
        const auto e = static_cast<std::int8_t>(*in++);
        for (int i = 0; i < n; ++i) v[b + i] = std::ldexp(F8E4M3ToF32(static_cast<std::uint8_t>(*in++)), e);
      }
      break;
  }
  for (int i = 0; i < hidden; ++i) {
    if (!std::isfinite(v[i])) throw WireError(fmt::format("value {} of a row is not finite", i));
  }
}

std::vector<std::byte> EncodeLayerRequest(std::uint64_t request_id, int layer, std::span<const Row> rows,
                                          std::span<const ExpertRoute> routes, const float* x, const RequestShape& shape, Dtype dtype) {
  const std::size_t n = rows.size();
  const std::size_t row_bytes = EncodedRowBytes(dtype, shape.hidden);
  const std::size_t payload = n * (kRowRecordBytes + static_cast<std::size_t>(shape.top_k) * kRouteBytes) + n * row_bytes;
  FrameHeader h{FrameType::kLayerRequest,           request_id, static_cast<std::uint32_t>(layer), static_cast<std::uint32_t>(n), dtype, 0,
                static_cast<std::uint32_t>(payload)};
  std::vector<std::byte> frame(kHeaderBytes + payload);
  const auto head = EncodeHeader(h);
  std::copy(head.begin(), head.end(), frame.begin());
  std::byte* p = frame.data() + kHeaderBytes;
  for (std::size_t r = 0; r < n; ++r) {
    Put<std::uint32_t>(p, static_cast<std::uint32_t>(r));
    Put<std::uint8_t>(p + 4, static_cast<std::uint8_t>(KindOf(rows, r)));
    Put<std::uint8_t>(p + 5, static_cast<std::uint8_t>(shape.top_k));
    Put<std::uint16_t>(p + 6, 0);
    Put<std::uint64_t>(p + 8, rows[r].sequence);
    Put<std::uint32_t>(p + 16, static_cast<std::uint32_t>(rows[r].position));
    p += kRowRecordBytes;
    for (int k = 0; k < shape.top_k; ++k) {
      const ExpertRoute& route = routes[r * static_cast<std::size_t>(shape.top_k) + static_cast<std::size_t>(k)];
      Put<std::uint32_t>(p, static_cast<std::uint32_t>(route.expert));
      Put<float>(p + 4, route.weight);
      p += kRouteBytes;
    }
  }
  for (std::size_t r = 0; r < n; ++r, p += row_bytes) EncodeRow(x + r * static_cast<std::size_t>(shape.hidden), shape.hidden, dtype, p);
  return frame;
}

LayerRequest ParseLayerRequest(const FrameHeader& header, std::span<const std::byte> payload, const RequestShape& shape) {
  if (header.type != FrameType::kLayerRequest) throw WireError("expected a layer request");
  if (header.rows == 0) throw WireError("a layer request with no rows");
  if (header.dtype == Dtype::kF32 || header.dtype == Dtype::kF64) throw WireError("hidden rows must be bf16 or fp8");
  if (payload.size() != header.payload_bytes) throw WireError("payload length does not match the header");
  LayerRequest req;
  req.header = header;
  Reader in(payload);
  req.rows.resize(header.rows);
  req.routes.reserve(static_cast<std::size_t>(header.rows) * static_cast<std::size_t>(shape.top_k));
  for (std::uint32_t r = 0; r < header.rows; ++r) {
    const std::byte* p = in.Take(kRowRecordBytes, "a row record");
    WireRow& row = req.rows[r];
    row.row_id = Get<std::uint32_t>(p);
    if (row.row_id != r) throw WireError(fmt::format("row {} carries row id {}", r, row.row_id));
    const auto kind = Get<std::uint8_t>(p + 4);
    if (kind > 2) throw WireError(fmt::format("row {}: unknown kind {}", r, kind));
    row.kind = static_cast<RowKind>(kind);
    const auto n_routes = Get<std::uint8_t>(p + 5);
    if (n_routes != shape.top_k) throw WireError(fmt::format("row {}: {} routes, the model routes to {}", r, n_routes, shape.top_k));
    if (Get<std::uint16_t>(p + 6) != 0) throw WireError(fmt::format("row {}: reserved field is not zero", r));
    row.sequence = Get<std::uint64_t>(p + 8);
    row.position = Get<std::uint32_t>(p + 16);
    const std::byte* routes = in.Take(static_cast<std::size_t>(n_routes) * kRouteBytes, "a row's routes");
    for (int k = 0; k < n_routes; ++k) {
      const auto expert = Get<std::uint32_t>(routes + k * kRouteBytes);
      const auto weight = Get<float>(routes + k * kRouteBytes + 4);
      if (expert >= static_cast<std::uint32_t>(shape.n_experts)) {
        throw WireError(fmt::format("row {}: expert {} does not exist (the model has {})", r, expert, shape.n_experts));
      }
      if (!std::isfinite(weight) || weight < 0.0f)
        throw WireError(fmt::format("row {}: route weight {} is not finite and >= 0", r, weight));
      for (int j = 0; j < k; ++j) {
        if (Get<std::uint32_t>(routes + j * kRouteBytes) == expert)
          throw WireError(fmt::format("row {}: expert {} routed twice", r, expert));
      }
      req.routes.push_back({static_cast<std::int32_t>(expert), weight});
    }
  }
  const std::size_t row_bytes = EncodedRowBytes(header.dtype, shape.hidden);
  req.hidden.resize(static_cast<std::size_t>(header.rows) * static_cast<std::size_t>(shape.hidden));
  for (std::uint32_t r = 0; r < header.rows; ++r) {
    DecodeRow(in.Take(row_bytes, "a hidden row"), shape.hidden, header.dtype,
              req.hidden.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(shape.hidden));
  }
  in.ExpectEnd();
  return req;
}

std::vector<std::byte> EncodeLayerResponse(std::uint64_t request_id, int layer, std::uint32_t rows, const double* partial, int hidden,
                                           Dtype dtype, std::uint64_t compute_ns) {
  if (dtype == Dtype::kFp8Block32) throw WireError("partial rows must be f64, f32 or bf16");
  const std::size_t values = static_cast<std::size_t>(rows) * static_cast<std::size_t>(hidden);
  const std::size_t payload = values * EncodedRowBytes(dtype, 1) + 8;
  FrameHeader h{FrameType::kLayerResponse,          request_id, static_cast<std::uint32_t>(layer), rows, dtype, 0,
                static_cast<std::uint32_t>(payload)};
  std::vector<std::byte> frame(kHeaderBytes + payload);
  const auto head = EncodeHeader(h);
  std::copy(head.begin(), head.end(), frame.begin());
  std::byte* p = frame.data() + kHeaderBytes;
  for (std::size_t i = 0; i < values; ++i) {
    switch (dtype) {
      case Dtype::kF64:
        Put<double>(p + 8 * i, partial[i]);
        break;
      case Dtype::kF32:
        Put<float>(p + 4 * i, static_cast<float>(partial[i]));
        break;
      default:
        Put<std::uint16_t>(p + 2 * i, F32ToBf16(static_cast<float>(partial[i])));
        break;
    }
  }
  Put<std::uint64_t>(p + values * EncodedRowBytes(dtype, 1), compute_ns);
  return frame;
}

LayerResponse ParseLayerResponse(const FrameHeader& header, std::span<const std::byte> payload, std::uint32_t rows, int hidden) {
  if (header.type != FrameType::kLayerResponse) throw WireError("expected a layer response");
  if (header.rows != rows) throw WireError(fmt::format("response has {} rows, the request had {}", header.rows, rows));
  if (header.dtype == Dtype::kFp8Block32) throw WireError("partial rows must be f64, f32 or bf16");
  Reader in(payload);
  LayerResponse out;
  const std::size_t values = static_cast<std::size_t>(rows) * static_cast<std::size_t>(hidden);
  const std::size_t size = EncodedRowBytes(header.dtype, 1);
  const std::byte* p = in.Take(values * size, "the partial rows");
  out.partial.resize(values);
  for (std::size_t i = 0; i < values; ++i) {
    switch (header.dtype) {
      case Dtype::kF64:
        out.partial[i] = Get<double>(p + 8 * i);
        break;
      case Dtype::kF32:
        out.partial[i] = Get<float>(p + 4 * i);
        break;
      default:
        out.partial[i] = Bf16ToF32(Get<std::uint16_t>(p + 2 * i));
        break;
    }
  }
  out.compute_ns = Get<std::uint64_t>(in.Take(8, "the compute-time trailer"));
  in.ExpectEnd();
  return out;
}

std::vector<std::byte> EncodeTextFrame(FrameType type, const std::string& text) {
  FrameHeader h{type, 0, 0, 0, Dtype::kF32, 0, static_cast<std::uint32_t>(text.size())};
  std::vector<std::byte> frame(kHeaderBytes + text.size());
  const auto head = EncodeHeader(h);
  std::copy(head.begin(), head.end(), frame.begin());
  std::memcpy(frame.data() + kHeaderBytes, text.data(), text.size());
  return frame;
}

std::string PayloadText(std::span<const std::byte> payload) {
  return std::string(reinterpret_cast<const char*>(payload.data()), payload.size());
}

}  // namespace tandem::rt::wire
