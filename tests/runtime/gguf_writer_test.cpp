// The GGUF container, ggml's block encodings and fp16 rounding, on values whose
// encodings can be written down by hand. (The whole export is checked against an
// independent reader in tests/reference/check_gguf.py.)
#include "runtime/model/gguf_writer.hpp"

#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/model/ggml_blocks.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/numeric/dtype.hpp"
#include "tests/runtime/tiny_model.hpp"

namespace tandem::rt {
namespace {

TEST(F32ToF16, EveryHalfRoundTripsAndTiesGoToEven) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    if ((bits & 0x7c00) == 0x7c00 && (bits & 0x3ff)) continue;  // NaN
    ASSERT_EQ(F32ToF16(F16ToF32(bits)), bits) << std::hex << h;
  }
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00) << "halfway between 1 and the next half: to even";
  EXPECT_EQ(F32ToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(F32ToF16(65519.0f), 0x7bff);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00) << "halfway past the largest half rounds to infinity";
  EXPECT_EQ(F32ToF16(-1e9f), 0xfc00);
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -25)), 0x0000) << "half the smallest subnormal: to even (zero)";
  EXPECT_EQ(F32ToF16(3 * std::ldexp(1.0f, -25)), 0x0002);
  EXPECT_EQ(F32ToF16(std::ldexp(1023.5f, -24)), 0x0400) << "the largest subnormal's halfway up: the smallest normal";
  EXPECT_EQ(F32ToF16(std::nanf("")) & 0x7e00, 0x7e00);
}

std::uint16_t ScaleOf(const std::byte* block) {
  return static_cast<std::uint16_t>(std::to_integer<int>(block[0]) | (std::to_integer<int>(block[1]) << 8));
}

TEST(GgmlBlocks, Q8_0OfValuesUpTo127IsTheValuesWithScaleOne) {
  std::array<float, 64> x{};
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j * 8 - 127);  // -127 ... 121: d = 1
  // The second block is zeros: scale 0, every q 0.
  std::array<std::byte, 2 * kQ8_0BlockBytes> out{};
  EncodeQ8_0(x, out);
  EXPECT_EQ(ScaleOf(out.data()), 0x3c00);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(static_cast<std::int8_t>(out[2 + j]), j * 8 - 127) << j;
  EXPECT_EQ(ScaleOf(out.data() + kQ8_0BlockBytes), 0);
  for (std::size_t j = 0; j < 32; ++j) EXPECT_EQ(static_cast<std::int8_t>(out[kQ8_0BlockBytes + 2 + j]), 0);
  // Halves round away from zero: 63.5 → 64 and -0.5 → -1 with d = 1.
  std::array<float, 32> h{};
  h[0] = 127, h[1] = 63.5f, h[2] = -0.5f;
  std::array<std::byte, kQ8_0BlockBytes> one{};
  EncodeQ8_0(h, one);
  EXPECT_EQ(static_cast<std::int8_t>(one[3]), 64);
  EXPECT_EQ(static_cast<std::int8_t>(one[4]), -1);
}

TEST(GgmlBlocks, Q4_0TakesItsScaleFromTheSignedExtremeAndPacksHalvesIntoNibbles) {
  // The extreme is -8: d = 1, nibble = x + 8; values 0..15 in the low nibbles, 16..31 high.
  std::array<float, 32> x{};
  for (int j = 0; j < 16; ++j) x[j] = static_cast<float>(j - 8), x[16 + j] = static_cast<float>(7 - j % 16);
  std::array<std::byte, kQ4_0BlockBytes> out{};
  EncodeQ4_0(x, out);
  EXPECT_EQ(ScaleOf(out.data()), 0x3c00);
  for (int j = 0; j < 16; ++j) {
    const int byte = std::to_integer<int>(out[2 + j]);
    EXPECT_EQ(byte & 0xf, j) << j;
    EXPECT_EQ(byte >> 4, 15 - j) << j;
  }
  // The extreme is +8: d = -1 (0xbc00), nibble = 8 - x, and +8 itself clamps to 0.
  std::array<float, 32> y{};
  y[0] = 8, y[1] = -7, y[2] = 3;
  EncodeQ4_0(y, out);
  EXPECT_EQ(ScaleOf(out.data()), 0xbc00);
  EXPECT_EQ(std::to_integer<int>(out[2]) & 0xf, 0);
  EXPECT_EQ(std::to_integer<int>(out[3]) & 0xf, 15);
  EXPECT_EQ(std::to_integer<int>(out[4]) & 0xf, 5);
}

TEST(GgmlBlocks, RefusesPartialBlocks) {
  std::vector<float> x(40);
  std::vector<std::byte> out(kQ8_0BlockBytes);
  EXPECT_THROW(EncodeQ8_0(x, out), std::invalid_argument);
}

std::string ReadAll(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::uint64_t Le(const std::string& s, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + static_cast<std::size_t>(i)]);
  return v;
}

TEST(GgufWriter, WritesTheHeaderMetadataAndAlignedTensors) {
  const auto dir = tandem::testing::TempDir("gguf");
  GgufWriter w;
  w.Set("a.flag", true);
  w.Set("a.n", std::uint32_t{7});
  w.AddTensor("x", GgmlType::kF32, {3});
  w.AddTensor("y", GgmlType::kQ8_0, {32, 2});
  const std::array<float, 3> x{1, 2, 3};
  std::array<std::byte, 2 * kQ8_0BlockBytes> y{};
  y.fill(std::byte{0x5a});
  w.Write(dir / "f.gguf", [&](const std::string& name, const GgufWriter::Emit& emit) {
    if (name == "x") {
      emit(std::as_bytes(std::span(x)));
    } else {
      emit(std::span(y).first(10));  // in pieces
      emit(std::span(y).subspan(10));
    }
  });
  const std::string f = ReadAll(dir / "f.gguf");
  ASSERT_GE(f.size(), 24u);
  EXPECT_EQ(f.substr(0, 4), "GGUF");
  EXPECT_EQ(Le(f, 4, 4), 3u);
  EXPECT_EQ(Le(f, 8, 8), 2u);   // tensors
  EXPECT_EQ(Le(f, 16, 8), 2u);  // metadata
  // "a.flag": key length, key, type 7 (bool), one byte.
  EXPECT_EQ(Le(f, 24, 8), 6u);
  EXPECT_EQ(f.substr(32, 6), "a.flag");
  EXPECT_EQ(Le(f, 38, 4), 7u);
  EXPECT_EQ(f[42], '\1');
  EXPECT_EQ(Le(f, 43, 8), 3u);  // the next key, right after the single byte
  // The data: x at the first 32-byte boundary after the header, y 32 bytes later.
  EXPECT_EQ(w.DataBytes(), 32u + 96u);
  const std::size_t data = f.size() - w.DataBytes();
  EXPECT_EQ(data % 32, 0u);
  float back[3];
  std::memcpy(back, f.data() + data, 12);
  EXPECT_EQ(back[2], 3.0f);
  EXPECT_EQ(f.substr(data + 12, 20), std::string(20, '\0'));
  EXPECT_EQ(static_cast<unsigned char>(f[data + 32]), 0x5a);
}

TEST(GgufWriter, RefusesBadTensorsAndLeavesNoFileWhenAProducerFails) {
  GgufWriter w;
  EXPECT_THROW(w.AddTensor(std::string(64, 'n'), GgmlType::kF32, {1}), std::invalid_argument);
  EXPECT_THROW(w.AddTensor("q", GgmlType::kQ4_0, {48, 2}), std::invalid_argument);
  w.AddTensor("t", GgmlType::kF32, {4});
  EXPECT_THROW(w.AddTensor("t", GgmlType::kF32, {4}), std::invalid_argument);
  w.Set("k", std::string("v"));
  EXPECT_THROW(w.Set("k", std::string("again")), std::invalid_argument);
  const auto dir = tandem::testing::TempDir("gguf-bad");
  const std::array<float, 3> three{};
  try {
    w.Write(dir / "f.gguf", [&](const std::string&, const GgufWriter::Emit& emit) { emit(std::as_bytes(std::span(three))); });
    FAIL() << "a short tensor was written";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 't' got 12 bytes, its size is 16"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "f.gguf"));
  EXPECT_FALSE(std::filesystem::exists(dir / "f.gguf.partial"));
}

}  // namespace
}  // namespace tandem::rt
