#include "runtime/hybrid/wire_protocol.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include <gtest/gtest.h>

#include "runtime/hybrid/handshake.hpp"
#include "runtime/kernels/ops.hpp"
#include "runtime/numeric/dtype.hpp"

namespace tandem::rt::wire {
namespace {

const RequestShape kShape{.hidden = 64, .top_k = 2, .n_experts = 8};

struct Request {
  std::vector<Row> rows = {{7, 3, 1, true}, {9, 0, 2, true}, {9, 1, 3, true}};
  std::vector<ExpertRoute> routes = {{1, 0.5f}, {4, 0.25f}, {0, 1.0f}, {7, 0.0f}, {3, 2.0f}, {2, 0.125f}};
  std::vector<float> x;
  Request() {
    std::mt19937 rng(1);
    std::normal_distribution<float> n(0.0f, 3.0f);
    for (int i = 0; i < 3 * kShape.hidden; ++i) x.push_back(n(rng));
  }
  std::vector<std::byte> Encode(Dtype dtype = Dtype::kBf16) const {
    return EncodeLayerRequest(42, 5, rows, routes, x.data(), kShape, dtype);
  }
};

LayerRequest Parse(const std::vector<std::byte>& frame) {
  const FrameHeader h = DecodeHeader(std::span(frame).first(kHeaderBytes));
  return ParseLayerRequest(h, std::span(frame).subspan(kHeaderBytes), kShape);
}

std::string ErrorOf(const std::vector<std::byte>& frame) {
  try {
    Parse(frame);
  } catch (const WireError& e) {
    return e.what();
  }
  return "(no error)";
}

template <typename T>
void Poke(std::vector<std::byte>& frame, std::size_t offset, T value) {
  std::memcpy(frame.data() + offset, &value, sizeof(T));
}

constexpr std::size_t kRow0 = kHeaderBytes;          // first row record
constexpr std::size_t kRoutes0 = kHeaderBytes + 20;  // its routes
constexpr std::size_t kRow1 = kRoutes0 + 2 * 8;      // second row record

TEST(WireProtocol, LayerRequestRoundTrips) {
  const Request r;
  const LayerRequest got = Parse(r.Encode());
  EXPECT_EQ(got.header.request_id, 42u);
  EXPECT_EQ(got.header.layer, 5u);
  ASSERT_EQ(got.rows.size(), 3u);
  EXPECT_EQ(got.rows[0].sequence, 7u);
  EXPECT_EQ(got.rows[0].position, 3u);
  EXPECT_EQ(got.rows[0].kind, RowKind::kDecode);
  EXPECT_EQ(got.rows[1].kind, RowKind::kPrefill) << "sequence 9 has two rows";
  ASSERT_EQ(got.routes.size(), r.routes.size());
  for (std::size_t i = 0; i < r.routes.size(); ++i) {
    EXPECT_EQ(got.routes[i].expert, r.routes[i].expert);
    EXPECT_EQ(got.routes[i].weight, r.routes[i].weight);
  }
  std::vector<float> rounded = r.x;
  RoundExpertInput(rounded.data(), 3, kShape.hidden, ExpertInputPrecision::kBf16);
  EXPECT_EQ(got.hidden, rounded) << "bf16 on the wire is exactly RoundExpertInput(bf16)";
}

TEST(WireProtocol, Fp8RowsDecodeToRoundExpertInputWithinTheDocumentedBound) {
  const Request r;
  const LayerRequest got = Parse(r.Encode(Dtype::kFp8Block32));
  std::vector<float> rounded = r.x;
  RoundExpertInput(rounded.data(), 3, kShape.hidden, ExpertInputPrecision::kFp8Block32);
  EXPECT_EQ(got.hidden, rounded);
  // e4m3 keeps 3 mantissa bits: within a block scaled by 2^e, a normal value is off by at
  // most 2^-4 of itself, a subnormal by at most 2^(e-10).
  for (int b = 0; b < 3 * kShape.hidden; b += kFp8BlockSize) {
    const int e = Fp8BlockExponent(r.x.data() + b, kFp8BlockSize);
    for (int i = b; i < b + kFp8BlockSize; ++i) {
      EXPECT_LE(std::fabs(got.hidden[i] - r.x[i]), std::max(std::ldexp(std::fabs(r.x[i]), -4), std::ldexp(1.0f, e - 10))) << i;
    }
  }
  EXPECT_LT(r.Encode(Dtype::kFp8Block32).size(), r.Encode(Dtype::kBf16).size());
}

TEST(WireProtocol, Fp8CodecIsNearestEven) {
  for (int code = 0; code < 256; ++code) {
    const auto c = static_cast<std::uint8_t>(code);
    if ((c & 0x7f) == 0x7f) continue;  // NaN
    EXPECT_EQ(F32ToF8E4M3(F8E4M3ToF32(c)), c) << code;
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-500.0f, 500.0f);
  for (int i = 0; i < 20000; ++i) {
    const float v = u(rng) * std::ldexp(1.0f, -static_cast<int>(rng() % 16));
    const float got = F8E4M3ToF32(F32ToF8E4M3(v));
    float best = 448.0f;
    for (int c = 0; c < 255; ++c) {
      const float cand = F8E4M3ToF32(static_cast<std::uint8_t>(c));
      if (!std::isnan(cand) && std::fabs(cand - v) < std::fabs(best - v)) best = cand;
    }
    EXPECT_EQ(std::fabs(got - v), std::fabs(best - v)) << v;
  }
}

TEST(WireProtocol, LayerResponseRoundTrips) {
  std::vector<double> partial(2 * 64);
  for (std::size_t i = 0; i < partial.size(); ++i) partial[i] = static_cast<double>(i) * 0.25 - 3.0;
  for (Dtype d : {Dtype::kF64, Dtype::kF32, Dtype::kBf16}) {
    const auto frame = EncodeLayerResponse(9, 3, 2, partial.data(), 64, d, 12345);
    const FrameHeader h = DecodeHeader(std::span(frame).first(kHeaderBytes));
    const LayerResponse got = ParseLayerResponse(h, std::span(frame).subspan(kHeaderBytes), 2, 64);
    EXPECT_EQ(got.partial, partial);  // these values are exact in bf16
    EXPECT_EQ(frame.size(), kHeaderBytes + 2 * 64 * (d == Dtype::kF64 ? 8 : d == Dtype::kF32 ? 4 : 2) + 8);
    EXPECT_EQ(got.compute_ns, 12345u);
    EXPECT_THROW(ParseLayerResponse(h, std::span(frame).subspan(kHeaderBytes), 3, 64), WireError);
  }
  // An f64 partial keeps what f32 would round away.
  const double fine = 1.0 + std::ldexp(1.0, -40);
  const auto frame = EncodeLayerResponse(1, 1, 1, &fine, 1, Dtype::kF64, 0);
  const FrameHeader h = DecodeHeader(std::span(frame).first(kHeaderBytes));
  EXPECT_EQ(ParseLayerResponse(h, std::span(frame).subspan(kHeaderBytes), 1, 1).partial[0], fine);
}

TEST(WireProtocol, MalformedFramesAreRejectedWithAReason) {
  const Request r;
  auto frame = r.Encode();
  Poke<std::uint32_t>(frame, 0, 0xdeadbeef);
  EXPECT_NE(ErrorOf(frame).find("bad magic"), std::string::npos);

  frame = r.Encode();
  Poke<std::uint16_t>(frame, 4, 7);
  EXPECT_NE(ErrorOf(frame).find("protocol version 7"), std::string::npos);

  frame = r.Encode();
  Poke<std::uint32_t>(frame, kRoutes0, 8);
  EXPECT_EQ(ErrorOf(frame), "row 0: expert 8 does not exist (the model has 8)");

  frame = r.Encode();
  Poke<std::uint32_t>(frame, kRoutes0 + 8, 1);
  EXPECT_EQ(ErrorOf(frame), "row 0: expert 1 routed twice");

  frame = r.Encode();
  Poke<float>(frame, kRoutes0 + 4, -0.5f);
  EXPECT_EQ(ErrorOf(frame), "row 0: route weight -0.5 is not finite and >= 0");

  frame = r.Encode();
  Poke<float>(frame, kRoutes0 + 4, std::nanf(""));
  EXPECT_NE(ErrorOf(frame).find("is not finite"), std::string::npos);

  frame = r.Encode();
  Poke<std::uint8_t>(frame, kRow1 + 5, 3);
  EXPECT_EQ(ErrorOf(frame), "row 1: 3 routes, the model routes to 2");

  frame = r.Encode();
  Poke<std::uint8_t>(frame, kRow0 + 4, 9);
  EXPECT_EQ(ErrorOf(frame), "row 0: unknown kind 9");

  frame = r.Encode();
  Poke<std::uint16_t>(frame, frame.size() - 2, 0x7fc0);  // a bf16 NaN in the last hidden value
  EXPECT_NE(ErrorOf(frame).find("not finite"), std::string::npos);

  frame = r.Encode();
  frame.pop_back();
  Poke<std::uint32_t>(frame, 28, static_cast<std::uint32_t>(frame.size() - kHeaderBytes));
  EXPECT_NE(ErrorOf(frame).find("payload ends inside a hidden row"), std::string::npos);

  frame = r.Encode();
  frame.push_back(std::byte{0});
  Poke<std::uint32_t>(frame, 28, static_cast<std::uint32_t>(frame.size() - kHeaderBytes));
  EXPECT_EQ(ErrorOf(frame), "1 bytes of trailing garbage after the payload");

  frame = r.Encode();
  Poke<std::uint32_t>(frame, 20, kMaxRows + 1);
  EXPECT_NE(ErrorOf(frame).find("exceeds the 65536 limit"), std::string::npos);
}

TEST(Handshake, RoundTripsAndRejectsBadFields) {
  Hello h;
  h.model_revision = "abc";
  h.rank = 2;
  h.world = 5;
  h.role = "worker";
  h.shape = kShape;
  h.wire_dtype = Dtype::kFp8Block32;
  h.slices = {{.layer = 1, .expert_begin = 0, .expert_end = 8, .inter_begin = 16, .inter_end = 32}};
  const Hello got = ParseHello(HelloJson(h));
  EXPECT_EQ(got.model_revision, "abc");
  EXPECT_EQ(got.rank, 2);
  EXPECT_EQ(got.wire_dtype, Dtype::kFp8Block32);
  ASSERT_EQ(got.slices.size(), 1u);
  EXPECT_EQ(got.slices[0].inter_begin, 16);
  EXPECT_THROW(ParseHello("{"), WireError);
  EXPECT_THROW(ParseHello(R"({"protocol":1})"), WireError);
  h.rank = 5;  // rank must be below world
  EXPECT_THROW(ParseHello(HelloJson(h)), WireError);
}

// Everything before the handshake succeeds is read under kMaxHandshakePayload: a
// coordinator's Hello must fit it with room to spare, even for a rank serving 400 MoE
// layers with every number at its widest (real models have fewer than 100).
TEST(Handshake, AHelloForHundredsOfLayersFitsTheHandshakeLimit) {
  Hello h;
  h.model_revision = std::string(64, 'f');
  h.rank = 4094;
  h.world = 4095;
  h.role = "worker";
  h.shape = {1 << 20, 255, 1 << 20};
  h.auth = HelloAuth{NewNonce(), NewNonce()};
  for (int layer = (1 << 20) - 400; layer < (1 << 20); ++layer) {
    h.slices.push_back({.layer = layer,
                        .expert_begin = 999'999'999,
                        .expert_end = 1'000'000'000,
                        .inter_begin = 999'999'999,
                        .inter_end = 1'000'000'000,
                        .shared_begin = 999'999'999,
                        .shared_end = 1'000'000'000});
  }
  const std::string json = HelloJson(h);
  EXPECT_LE(json.size(), kMaxHandshakePayload);
  EXPECT_EQ(ParseHello(json).slices.size(), 400u);
}

// Version 2's additions: the worker's Challenge, the coordinator's proof in its Hello and
// the worker's in its HelloAck.
TEST(Handshake, ChallengeAndProofsRoundTrip) {
  const Challenge c{kVersion, true, NewNonce()};
  const Challenge got = ParseChallenge(ChallengeJson(c));
  EXPECT_TRUE(got.token_required);
  EXPECT_EQ(got.nonce, c.nonce);
  EXPECT_FALSE(ParseChallenge(ChallengeJson({kVersion, false, c.nonce})).token_required);
  EXPECT_THROW(ParseChallenge(R"({"protocol":1,"auth":"none","nonce":"00"})"), WireError);
  EXPECT_THROW(ParseChallenge(R"({"protocol":2,"auth":"plain","nonce":"00"})"), WireError);
  EXPECT_THROW(ParseChallenge(R"({"protocol":2,"auth":"none","nonce":"0g"})"), WireError);
  EXPECT_THROW(ParseChallenge(R"({"protocol":2,"auth":"none"})"), WireError);

  Hello h;
  h.model_revision = "abc";
  h.rank = 1;
  h.world = 2;
  h.role = "worker";
  h.shape = kShape;
  EXPECT_FALSE(ParseHello(HelloJson(h)).auth.has_value());
  h.auth = HelloAuth{NewNonce(), CoordinatorProof("t", c.nonce, NewNonce())};
  const Hello signed_hello = ParseHello(HelloJson(h));
  ASSERT_TRUE(signed_hello.auth.has_value());
  EXPECT_EQ(signed_hello.auth->nonce, h.auth->nonce);
  EXPECT_EQ(signed_hello.auth->proof, h.auth->proof);
  EXPECT_THROW(ParseHello(HelloJson(h).replace(HelloJson(h).find("\"auth\":{"), 8, "\"auth\":[")), WireError);

  HelloAck ack{"abc", 1, 0.5, WorkerProof("t", c.nonce, h.auth->nonce)};
  EXPECT_EQ(ParseHelloAck(HelloAckJson(ack)).proof, ack.proof);
  ack.proof.reset();
  EXPECT_FALSE(ParseHelloAck(HelloAckJson(ack)).proof.has_value());
}

TEST(Handshake, ProofsBindTheTokenBothNoncesAndTheRole) {
  const Nonce w = NewNonce(), c = NewNonce();
  const Mac proof = CoordinatorProof("token", w, c);
  EXPECT_TRUE(SameMac(proof, CoordinatorProof("token", w, c)));
  EXPECT_FALSE(SameMac(proof, WorkerProof("token", w, c))) << "one side's proof must not pass as the other's";
  EXPECT_FALSE(SameMac(proof, CoordinatorProof("token2", w, c)));
  EXPECT_FALSE(SameMac(proof, CoordinatorProof("token", c, w)));
  EXPECT_FALSE(SameMac(proof, CoordinatorProof("token", w, NewNonce())));
  EXPECT_NE(w, c);
  EXPECT_EQ(FromHex<kNonceBytes>(ToHex(w)), w);
  EXPECT_FALSE(FromHex<kNonceBytes>(ToHex(w).substr(2)).has_value());
}

// The fuzz target's seeds must be frames of the current protocol that parse: stale
// seeds (another version) would leave the fuzzer testing the header check alone.
TEST(WireProtocol, EveryFuzzSeedIsAValidFrame) {
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(TANDEM_WIRE_CORPUS)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::span<const std::byte> frame(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size());
    SCOPED_TRACE(entry.path().filename().string());
    ++seeds;
    try {
      const FrameHeader h = DecodeHeader(frame.first(kHeaderBytes));
      const auto payload = frame.subspan(kHeaderBytes);
      ASSERT_EQ(payload.size(), h.payload_bytes);
      switch (h.type) {
        case FrameType::kLayerRequest:
          (void)ParseLayerRequest(h, payload, kShape);
          break;
        case FrameType::kLayerResponse:
          (void)ParseLayerResponse(h, payload, h.rows, kShape.hidden);
          break;
        case FrameType::kChallenge:
          (void)ParseChallenge(PayloadText(payload));
          break;
        case FrameType::kHello:
          (void)ParseHello(PayloadText(payload));
          break;
        case FrameType::kHelloAck:
          (void)ParseHelloAck(PayloadText(payload));
          break;
        case FrameType::kLoadProgress:
          (void)ParseLoadProgress(PayloadText(payload));
          break;
        case FrameType::kError:
          break;
      }
    } catch (const WireError& e) {
      ADD_FAILURE() << e.what();
    }
  }
  EXPECT_GE(seeds, 12);
}

}  // namespace
}  // namespace tandem::rt::wire
