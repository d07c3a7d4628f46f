#include "runtime/model/checkpoint.hpp"

#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/model/model_error.hpp"
#include "runtime/model/model_revision.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/model/synthetic_checkpoint.hpp"
#include "runtime/numeric/dtype.hpp"
#include "tests/runtime/eval_run.hpp"
#include "tests/runtime/tiny_model.hpp"
#include "tests/support/run_command.hpp"

namespace tandem::rt {
namespace {

using tandem::testing::ReadFile;
using tandem::testing::TempDir;
using tandem::testing::TinyCheckpoint;
using tandem::testing::WriteFile;

std::string ErrorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ModelError& e) {
    return e.what();
  }
  return "(no error)";
}

std::span<const std::byte> AsBytes(const std::string& s) { return {reinterpret_cast<const std::byte*>(s.data()), s.size()}; }

TEST(DType, Conversions) {
  EXPECT_EQ(Bf16ToF32(0x3f80), 1.0f);
  EXPECT_EQ(F32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(F32ToBf16(1.00390625f), 0x3f80) << "halfway rounds to even";
  EXPECT_EQ(F32ToBf16(1.01171875f), 0x3f82);
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0xc000), -2.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(F16ToF32(0x7c00)));
  EXPECT_EQ(F8E4M3ToF32(0x7e), 448.0f);
  EXPECT_EQ(F8E4M3ToF32(0x38), 1.0f);
  EXPECT_EQ(F8E4M3ToF32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(F8E4M3ToF32(0xb8), -1.0f);
  EXPECT_TRUE(std::isnan(F8E4M3ToF32(0x7f)));
  EXPECT_TRUE(std::isnan(F8E4M3ToF32(0xff)));
  EXPECT_EQ(DTypeFromName("F8_E4M3"), DType::kF8E4M3);
  EXPECT_FALSE(DTypeFromName("Q4_K").has_value());
}

TEST(Safetensors, WriterOutputParsesBack) {
  SafetensorsWriter w;
  w.Add("b", DType::kBF16, {2, 3});
  w.Add("a", DType::kF32, {4});
  w.SetMetadata("format", "pt");
  std::string file = w.HeaderBytes();
  EXPECT_EQ((file.size() - 8) % 8, 0u);
  file.append(16 + 12, '\0');
  const SafetensorsHeader h = ParseSafetensorsHeader(AsBytes(file), "x.safetensors");
  EXPECT_EQ(h.metadata.at("format"), "pt");
  EXPECT_EQ(h.tensors.at("a").begin, 0u);  // name order
  EXPECT_EQ(h.tensors.at("b").begin, 16u);
  EXPECT_EQ(h.tensors.at("b").shape, (std::vector<std::int64_t>{2, 3}));
}

TEST(Safetensors, BadFilesAreErrorsNamingFileAndTensor) {
  auto header = [](const std::string& json, std::size_t data) {
    std::string f(8, '\0');
    std::uint64_t n = json.size();
    for (int i = 0; i < 8; ++i, n >>= 8) f[i] = static_cast<char>(n & 0xff);
    return f + json + std::string(data, '\0');
  };
  auto error = [&](const std::string& file) { return ErrorOf([&] { ParseSafetensorsHeader(AsBytes(file), "m.safetensors"); }); };
  EXPECT_EQ(error("abc"), "m.safetensors: 3 bytes is too short for a safetensors file");
  EXPECT_NE(error(header("{\"t\":", 0)).find("m.safetensors: header is not valid JSON"), std::string::npos);
  EXPECT_NE(error(std::string("\xff\xff\0\0\0\0\0\0", 8) + "{}").find("does not fit in the file"), std::string::npos);
  EXPECT_EQ(error(header(R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,2]}})", 2)), "m.safetensors: tensor 'w': unknown dtype 'Q4'");
  EXPECT_EQ(error(header(R"({"w":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,6]}})", 8)),
            "m.safetensors: tensor 'w': shape [2,2] of BF16 needs 8 bytes but data_offsets span 6");
  EXPECT_EQ(error(header(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 10)),
            "m.safetensors: tensor 'w': data ends at byte 16 but the file has only 10 data bytes (truncated file?)");
  EXPECT_EQ(error(header(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4)),
            "m.safetensors: tensor 'w': shape [-1] has a non-integer or negative dimension");
  EXPECT_EQ(error(header(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4)),
            "m.safetensors: tensor 'w': data_offsets begin after they end");
}

// A safetensors file: the header's length, `json` padded with spaces to 8 bytes as
// HF pads it, and `data` zero bytes of data.
std::string SafetensorsFile(std::string json, std::size_t data) {
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string f(8, '\0');
  std::uint64_t n = json.size();
  for (int i = 0; i < 8; ++i, n >>= 8) f[static_cast<std::size_t>(i)] = static_cast<char>(n & 0xff);
  return f + json + std::string(data, '\0');
}

std::string HeaderError(const std::string& json, std::size_t data) {
  return ErrorOf([&] { ParseSafetensorsHeader(AsBytes(SafetensorsFile(json, data)), "m.safetensors"); });
}

TEST(Safetensors, OverlappingTensorsAreRefusedNamingBoth) {
  EXPECT_EQ(HeaderError(
                R"({"a":{"dtype":"F32","shape":[16],"data_offsets":[0,64]},"b":{"dtype":"F32","shape":[16],"data_offsets":[32,96]}})", 96),
            "m.safetensors: tensors 'a' [0, 64) and 'b' [32, 96) overlap");
  EXPECT_EQ(HeaderError(
                R"({"b":{"dtype":"F32","shape":[16],"data_offsets":[0,64]},"a":{"dtype":"BF16","shape":[32],"data_offsets":[0,64]}})", 64),
            "m.safetensors: tensors 'a' [0, 64) and 'b' [0, 64) overlap")
      << "the same bytes twice";
  EXPECT_EQ(HeaderError(R"({"z":{"dtype":"F32","shape":[16],"data_offsets":[0,64]},"a":{"dtype":"F32","shape":[4],"data_offsets":[16,32]},)"
                        R"("c":{"dtype":"F32","shape":[8],"data_offsets":[64,96]}})",
                        96),
            "m.safetensors: tensors 'z' [0, 64) and 'a' [16, 32) overlap")
      << "one inside another, named in file order";
  // Empty tensors hold no bytes: anywhere in the data section is fine.
  EXPECT_EQ(HeaderError(
                R"({"a":{"dtype":"F32","shape":[16],"data_offsets":[0,64]},"e":{"dtype":"I64","shape":[0,4],"data_offsets":[32,32]}})", 64),
            "(no error)");
}

TEST(Safetensors, BytesOfNoTensorAreRefusedButAlignmentPaddingIsNot) {
  const std::string tail = "; not a layout the safetensors library writes";
  EXPECT_EQ(
      HeaderError(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[32,48]}})", 48),
      "m.safetensors: bytes [16, 32) of the data section belong to no tensor (between 'a' [0, 16) and 'b' [32, 48))" + tail);
  EXPECT_EQ(HeaderError(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[16,32]}})", 32),
            "m.safetensors: bytes [0, 16) of the data section belong to no tensor (before 'a' [16, 32))" + tail);
  EXPECT_EQ(HeaderError(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 24),
            "m.safetensors: bytes [16, 24) of the data section belong to no tensor (after the last tensor, 'a' [0, 16))" + tail)
      << "HF's reader wants the last tensor to end the file";
  EXPECT_EQ(HeaderError("{}", 8),
            "m.safetensors: bytes [0, 8) of the data section belong to no tensor (the header declares no tensor data)" + tail);
  // A U8 [0, 3) then an F32 at 4: the byte between aligns the F32, as a writer may pad.
  EXPECT_EQ(HeaderError(R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
            "(no error)");
  EXPECT_EQ(
      HeaderError(R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12),
      "m.safetensors: bytes [3, 8) of the data section belong to no tensor (between 'a' [0, 3) and 'b' [8, 12))" + tail)
      << "more than alignment needs";
  EXPECT_EQ(HeaderError(R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"b":{"dtype":"U8","shape":[1],"data_offsets":[4,5]}})", 5),
            "m.safetensors: bytes [3, 4) of the data section belong to no tensor (between 'a' [0, 3) and 'b' [4, 5))" + tail)
      << "a byte needs no alignment";
}

TEST(Safetensors, HeaderLimitsAreErrorsNotCrashes) {
  // Over HF's 100 MB limit: refused before anything is read.
  std::string huge(8, '\0');
  std::uint64_t n = kMaxSafetensorsHeaderBytes + 1;
  for (int i = 0; i < 8; ++i, n >>= 8) huge[static_cast<std::size_t>(i)] = static_cast<char>(n & 0xff);
  EXPECT_EQ(ErrorOf([&] { ParseSafetensorsHeader(AsBytes(huge + "{}"), "m.safetensors"); }),
            "m.safetensors: header length 100000001 is over the 100000000-byte limit of safetensors headers; not a safetensors file?");
  // 100 000 nested arrays, as a shape and as metadata: an error, not a stack overflow.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string& json : {R"({"a":{"dtype":"F32","shape":)" + deep + R"(,"data_offsets":[0,0]}})",
                                  R"({"__metadata__":{"k":)" + deep + "}}", "{\"a\":" + deep + "}"}) {
    EXPECT_EQ(HeaderError(json, 0), "m.safetensors: header nests deeper than 8 levels; not a safetensors header");
  }
  EXPECT_EQ(HeaderError(R"({"a":{"dtype":"F32","shape":[[[[[1]]]]],"data_offsets":[0,4]}})", 4),
            "m.safetensors: tensor 'a': shape [[[[[1]]]]] has a non-integer or negative dimension");
  // Huge shapes: more elements than int64, more bytes than uint64, more dimensions than any tensor.
  EXPECT_EQ(HeaderError(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0),
            "m.safetensors: tensor 'a': shape [4294967296,4294967296] overflows");
  EXPECT_EQ(HeaderError(R"({"a":{"dtype":"F32","shape":[2305843009213693952,2],"data_offsets":[0,0]}})", 0),
            "m.safetensors: tensor 'a': shape [2305843009213693952,2] of F32 needs more bytes than a file can hold");
  std::string rank = R"({"a":{"dtype":"U8","shape":[1)";
  for (int i = 1; i < 17; ++i) rank += ",1";
  EXPECT_EQ(HeaderError(rank + R"(],"data_offsets":[0,1]}})", 1),
            "m.safetensors: tensor 'a': shape has 17 dimensions; at most 16 are supported");
  std::string long_shape = R"({"a":{"dtype":"U8","shape":[)" + std::string(1000, '[') + std::string(1000, ']');
  EXPECT_NE(HeaderError(long_shape + R"(],"data_offsets":[0,1]}})", 1).find("nests deeper"), std::string::npos);
  // Too many tensors: refused while reading, at the first entry past the limit.
  std::string many = "{";
  for (std::size_t i = 0; i <= kMaxSafetensorsTensors + 1; ++i) many += fmt::format("\"t{}\":0,", i);
  many.back() = '}';
  EXPECT_EQ(HeaderError(many, 0), "m.safetensors: header declares more than 1048576 tensors");
}

// The tiny checkpoint with `moved`'s data_offsets set to those of `onto` (same dtype and shape).
std::filesystem::path TinyWithTensorMoved(const std::string& moved, const std::string& onto);

TEST(Checkpoint, OverlappingTensorsAreAnError) {
  const auto dir = TinyWithTensorMoved("model.norm.weight", "model.layers.0.input_layernorm.weight");
  const std::string e = ErrorOf([&] { Checkpoint::Open(dir); });
  EXPECT_NE(e.find((dir / "model.safetensors").string() + ": tensors 'model.layers.0.input_layernorm.weight' ["), std::string::npos) << e;
  EXPECT_NE(e.find(") and 'model.norm.weight' ["), std::string::npos) << e;
  EXPECT_NE(e.find(") overlap"), std::string::npos) << e;
  // The commands that open it say so and exit 2 (they used to load and decode it).
  const tandem::testing::CommandResult inspect = tandem::testing::RunCommand(TANDEM_RT_BIN, {"inspect", dir.string()});
  EXPECT_EQ(inspect.exit_code, 2) << inspect.out;
  EXPECT_NE(inspect.err.find("overlap"), std::string::npos) << inspect.err;
  const tandem::testing::CommandResult generate =
      tandem::testing::RunCommand(TANDEM_RT_BIN, {"generate", "--model", dir.string(), "--prompt", "x", "--max-tokens", "2"});
  EXPECT_EQ(generate.exit_code, 2) << generate.out;
  EXPECT_NE(generate.err.find("overlap"), std::string::npos) << generate.err;
}

// A copy of the tiny checkpoint that a test may damage.
std::filesystem::path CopyOfTiny() {
  const auto dir = TempDir("ckpt");
  std::filesystem::copy(TinyCheckpoint(), dir,
                        std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  std::filesystem::remove(dir / ".tandem-revision.json");
  return dir;
}

std::filesystem::path TinyWithTensorMoved(const std::string& moved, const std::string& onto) {
  const auto dir = CopyOfTiny();
  const std::string bytes = ReadFile(dir / "model.safetensors");
  const SafetensorsHeader parsed = ParseSafetensorsHeader(AsBytes(bytes), "tiny");
  auto header = nlohmann::json::parse(bytes.substr(8, parsed.data_offset - 8));
  header[moved]["data_offsets"] = header[onto]["data_offsets"];
  const std::string file = SafetensorsFile(header.dump(), 0);
  WriteFile(dir / "model.safetensors", file + bytes.substr(parsed.data_offset));
  return dir;
}

TEST(Checkpoint, OpensTheTinyPresetAndChecksShapes) {
  const Checkpoint ckpt = Checkpoint::Open(TinyCheckpoint());
  EXPECT_EQ(ckpt.config().hidden_size, 128);
  EXPECT_TRUE(ckpt.Has("model.layers.4.eh_proj.weight")) << "the MTP layer";
  const WeightMatrix m = ckpt.Matrix("model.layers.0.mlp.gate_proj.weight", 256, 128);
  EXPECT_EQ(m.type, WeightMatrix::Type::kBF16);
  const std::string wrong = ErrorOf([&] { ckpt.Matrix("model.layers.0.mlp.gate_proj.weight", 128, 256); });
  EXPECT_NE(wrong.find("tensor 'model.layers.0.mlp.gate_proj.weight': shape [256, 128] but the config implies [128, 256]"),
            std::string::npos)
      << wrong;
  EXPECT_NE(wrong.find("model.safetensors"), std::string::npos) << "names the file: " << wrong;
  EXPECT_NE(ErrorOf([&] { ckpt.Matrix("model.layers.9.nothing", 1, 1); }).find("tensor 'model.layers.9.nothing' is missing"),
            std::string::npos);
}

TEST(Checkpoint, CopiesWeightsOntoWeightMemoryOnceOrReadsThemWhereMapped) {
  const std::string name = "model.layers.0.mlp.gate_proj.weight";
  const Checkpoint copied = Checkpoint::Open(TinyCheckpoint());
  const Checkpoint mapped = Checkpoint::Open(TinyCheckpoint(), WeightPlacement::kMapped);
  EXPECT_EQ(copied.placement(), WeightPlacement::kCopied) << "the default";
  const WeightMatrix a = copied.Matrix(name, 256, 128), b = copied.Matrix(name, 256, 128);
  const WeightMatrix view = mapped.Matrix(name, 256, 128);
  EXPECT_EQ(a.data, b.data) << "one copy per tensor while a matrix holds it";
  EXPECT_NE(a.data, view.data);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data) % 64, 0u) << "weight memory blocks are cache-line aligned";
  EXPECT_EQ(std::memcmp(a.data, view.data, a.bytes()), 0) << "the same bytes";
  EXPECT_NE(Checkpoint::Open(TinyCheckpoint()).Matrix(name, 256, 128).data, a.data) << "another checkpoint copies its own";
  // Asked for explicitly, a view of the mapping (as an embedding table is read).
  const WeightMatrix asked = copied.Matrix(name, 256, 128, WeightPlacement::kMapped);
  EXPECT_NE(asked.data, a.data);
  EXPECT_EQ(std::memcmp(asked.data, a.data, a.bytes()), 0);
}

TEST(Checkpoint, Fp8WeightsAreCopiedWithTheirScalesOrReadWhereMapped) {
  const auto dir = TempDir("fp8-placement");
  std::filesystem::copy_file(TinyCheckpoint() / "config.json", dir / "config.json");
  SafetensorsWriter writer;
  writer.Add("w.weight", DType::kF8E4M3, {130, 64});  // two block rows
  writer.Add("w.weight_scale_inv", DType::kF32, {2, 1});
  std::vector<std::uint8_t> fp8(130 * 64);
  for (std::size_t i = 0; i < fp8.size(); ++i) fp8[i] = static_cast<std::uint8_t>((i * 29 + 3) % 0x7f) | (i % 5 == 0 ? 0x80 : 0);
  const float scales[2] = {0.5f, 0.03125f};
  writer.Write(dir / "model.safetensors", [&](const std::string& n) {
    if (n.ends_with("_scale_inv")) return std::as_bytes(std::span<const float>(scales));
    return std::as_bytes(std::span<const std::uint8_t>(fp8));
  });
  const WeightMatrix copied = Checkpoint::Open(dir).Matrix("w.weight", 130, 64);  // the checkpoint goes first
  const WeightMatrix mapped = Checkpoint::Open(dir, WeightPlacement::kMapped).Matrix("w.weight", 130, 64);
  ASSERT_EQ(copied.type, WeightMatrix::Type::kF8E4M3);
  EXPECT_NE(copied.data, mapped.data);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(copied.data) % 64, 0u);
  for (const auto& [r, c] : {std::pair{0, 0}, {5, 63}, {127, 1}, {128, 7}, {129, 63}}) {
    EXPECT_EQ(copied.At(r, c), F8E4M3ToF32(fp8[static_cast<std::size_t>(r * 64 + c)]) * scales[r / 128]) << r << "," << c;
    EXPECT_EQ(copied.At(r, c), mapped.At(r, c));
  }
}

TEST(Checkpoint, TruncatedWeightsAreAnError) {
  const auto dir = CopyOfTiny();
  const std::string bytes = ReadFile(dir / "model.safetensors");
  WriteFile(dir / "model.safetensors", bytes.substr(0, bytes.size() - 1000));
  const std::string e = ErrorOf([&] { Checkpoint::Open(dir); });
  EXPECT_NE(e.find("model.safetensors: tensor '"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
}

TEST(Checkpoint, ConfigErrorsNameTheKey) {
  const auto dir = CopyOfTiny();
  auto config = nlohmann::json::parse(ReadFile(dir / "config.json"));
  config.erase("kv_lora_rank");
  WriteFile(dir / "config.json", config.dump());
  EXPECT_EQ(ErrorOf([&] { Checkpoint::Open(dir); }), (dir / "config.json").string() + ": 'kv_lora_rank' is missing");
  config["kv_lora_rank"] = 32;
  config["architectures"] = {"LlamaForCausalLM"};
  WriteFile(dir / "config.json", config.dump());
  EXPECT_EQ(ErrorOf([&] { Checkpoint::Open(dir); }),
            (dir / "config.json").string() +
                ": 'architectures' names 'LlamaForCausalLM'; supported: DeepseekV3ForCausalLM, DeepseekV2ForCausalLM");
  config["architectures"] = {"DeepseekV3ForCausalLM"};
  config["n_group"] = 3;
  WriteFile(dir / "config.json", config.dump());
  EXPECT_EQ(ErrorOf([&] { Checkpoint::Open(dir); }), (dir / "config.json").string() + ": 'n_group' must divide n_routed_experts");
  config["n_group"] = "four";
  WriteFile(dir / "config.json", config.dump());
  EXPECT_EQ(ErrorOf([&] { Checkpoint::Open(dir); }), (dir / "config.json").string() + ": 'n_group' must be an integer, got \"four\"");
}

TEST(Checkpoint, ShardIndexMustMatchTheFiles) {
  const auto dir = CopyOfTiny();
  nlohmann::json index = {{"weight_map", {{"model.norm.weight", "model.safetensors"}, {"ghost.weight", "model.safetensors"}}}};
  WriteFile(dir / "model.safetensors.index.json", index.dump());
  const std::string e = ErrorOf([&] { Checkpoint::Open(dir); });
  EXPECT_NE(e.find("tensor 'ghost.weight' is listed in model.safetensors.index.json but missing from the file"), std::string::npos) << e;
}

TEST(ModelRevision, IsCachedAndFollowsTheFiles) {
  const auto dir = CopyOfTiny();
  const std::string first = ModelRevision(dir);
  EXPECT_EQ(first.size(), 64u);
  EXPECT_TRUE(std::filesystem::exists(dir / ".tandem-revision.json"));
  EXPECT_EQ(ModelRevision(dir), first);
  auto config = nlohmann::json::parse(ReadFile(dir / "config.json"));
  config["rms_norm_eps"] = 1e-5;
  WriteFile(dir / "config.json", config.dump());
  EXPECT_NE(ModelRevision(dir), first) << "a changed config.json must change the revision";
}

TEST(SyntheticCheckpoint, IsBitIdenticalForASeedAndDiffersAcrossSeeds) {
  const auto a = TempDir("seed-a"), b = TempDir("seed-b"), c = TempDir("seed-c");
  const auto no_tokenizer = a / "none";
  WriteSyntheticCheckpoint(FindPreset("tiny"), 5, a, no_tokenizer);
  WriteSyntheticCheckpoint(FindPreset("tiny"), 5, b, no_tokenizer);
  WriteSyntheticCheckpoint(FindPreset("tiny"), 6, c, no_tokenizer);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}) {
    EXPECT_EQ(ReadFile(a / f), ReadFile(b / f)) << f;
  }
  EXPECT_NE(ReadFile(a / "model.safetensors"), ReadFile(c / "model.safetensors"));
  EXPECT_LT(std::filesystem::file_size(a / "model.safetensors"), 10u << 20) << "tiny must stay under 10 MB";
  EXPECT_THROW(FindPreset("huge"), ModelError);
}

}  // namespace
}  // namespace tandem::rt
