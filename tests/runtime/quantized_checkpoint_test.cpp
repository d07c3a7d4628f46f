// `tandem-rt quantize` and checkpoints whose routed experts are group-quantized:
// the real executable on the tiny preset, loading, slicing, placement and the engine.
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/engine/engine.hpp"
#include "runtime/engine/moe_slices.hpp"
#include "runtime/hybrid/placement_plan.hpp"
#include "runtime/kernels/quantized_matrix.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/mapped_file.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/model_revision.hpp"
#include "runtime/model/quantize_checkpoint.hpp"
#include "runtime/model/safetensors.hpp"
#include "tests/runtime/eval_run.hpp"
#include "tests/runtime/tiny_model.hpp"
#include "tests/support/run_command.hpp"

namespace tandem::rt {
namespace {

using tandem::testing::CommandResult;
using tandem::testing::EvalRun;
using tandem::testing::MaxRelativeError;
using tandem::testing::ReadFile;
using tandem::testing::RunCommand;
using tandem::testing::RunEval;
using tandem::testing::TempDir;
using tandem::testing::TinyCheckpoint;
using tandem::testing::WriteFile;
using namespace std::chrono_literals;

CommandResult Rt(const std::vector<std::string>& args, std::chrono::seconds timeout = 120s) {
  CommandResult r = RunCommand(TANDEM_RT_BIN, args, timeout);
  EXPECT_FALSE(r.timed_out);
  return r;
}

bool IsRoutedExpert(const std::string& name) { return name.find(".mlp.experts.") != std::string::npos && name.ends_with("_proj.weight"); }

// The tiny preset quantized by the real `tandem-rt quantize` (group 32), once per process.
const std::filesystem::path& QuantizedTiny(const std::string& format) {
  static std::map<std::string, std::filesystem::path> made;
  if (!made.contains(format)) {
    const auto out = TempDir("quantized") / ("tiny-" + format);
    const CommandResult r = Rt({"quantize", "--in", TinyCheckpoint().string(), "--out", out.string(), "--format", format});
    if (r.exit_code != 0) throw std::runtime_error("tandem-rt quantize failed: " + r.err);
    made[format] = out;
  }
  return made[format];
}

// Every tensor of a checkpoint's weight files with its bytes as stored.
class RawTensors {
 public:
  explicit RawTensors(const std::filesystem::path& file) : mapping_(file) {
    header_ = ParseSafetensorsHeader(mapping_.bytes(), file.string());
  }
  const SafetensorsHeader& header() const { return header_; }
  std::string Bytes(const std::string& name) const {
    const TensorInfo& info = header_.tensors.at(name);
    const auto* data = reinterpret_cast<const char*>(mapping_.bytes().data() + header_.data_offset + info.begin);
    return {data, static_cast<std::size_t>(info.end - info.begin)};
  }

 private:
  MappedFile mapping_;
  SafetensorsHeader header_;
};

WeightMatrix RandomF32(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  std::shared_ptr<float[]> values(new float[static_cast<std::size_t>(rows * cols)]);
  std::uint64_t state = seed;
  for (std::int64_t i = 0; i < rows * cols; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    values[i] = static_cast<float>(static_cast<double>(state >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  }
  return WeightMatrix::OwnedF32(rows, cols, std::move(values));
}

// `slice` is rows [row, row + rows) × columns [col, col + cols) of `q`: same format
// and group, every value the same.
void ExpectSliceOf(const QuantizedMatrix& slice, const QuantizedMatrix& q, std::int64_t row, std::int64_t rows, std::int64_t col,
                   std::int64_t cols) {
  EXPECT_EQ(slice.rows, rows);
  EXPECT_EQ(slice.cols, cols);
  EXPECT_EQ(slice.group, q.group);
  EXPECT_EQ(slice.format, q.format);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) ASSERT_EQ(slice.At(r, c), q.At(row + r, col + c)) << ToString(q.format) << " " << r << "," << c;
  }
}

// A worker's share of an expert is a slice of the whole: it must hold the slice's
// bytes only, not the whole matrix's storage (a copy would keep its capacity).
TEST(QuantizedMatrixRows, HoldOnlyTheirOwnBytes) {
  const WeightMatrix w = RandomF32(8, 128, 4);
  for (const QuantFormat format : {QuantFormat::kInt8, QuantFormat::kInt4}) {
    const QuantizedMatrix q = QuantizedMatrix::Quantize(w, format, 32);
    const QuantizedMatrix slice = q.Rows(2, 3);
    ExpectSliceOf(slice, q, 2, 3, 0, 128);
    EXPECT_EQ(slice.values.capacity(), slice.values.size());
    EXPECT_EQ(slice.scales.capacity(), slice.scales.size());
  }
}

TEST(QuantizedMatrixColumns, KeepWholeGroupsAndTheirScales) {
  const WeightMatrix w = RandomF32(5, 128, 3);
  for (const QuantFormat format : {QuantFormat::kInt8, QuantFormat::kInt4}) {
    const QuantizedMatrix q = QuantizedMatrix::Quantize(w, format, 32);
    const QuantizedMatrix slice = q.Columns(32, 96);
    ExpectSliceOf(slice, q, 0, 5, 32, 64);
    // Whole tiles of 16 rows are stored (quantized_matrix.hpp).
    const std::size_t stored_rows = 16u;
    EXPECT_EQ(slice.values.size(), format == QuantFormat::kInt8 ? stored_rows * 64u : stored_rows * 32u);
    EXPECT_EQ(slice.scales.size(), stored_rows * 2u);
    const QuantizedMatrix whole = q.Columns(0, 128);
    EXPECT_EQ(whole.values, q.values);
    EXPECT_EQ(whole.scales, q.scales);
    try {
      (void)q.Columns(16, 48);
      ADD_FAILURE() << "a cut inside a group must be refused";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("not whole groups of 32"), std::string::npos) << e.what();
    }
  }
}

class QuantizeTiny : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantizeTiny, ExpertsAreQuantizedAndEverythingElseIsCopied) {
  const std::string format_name = GetParam();
  const QuantFormat format = format_name == "int8" ? QuantFormat::kInt8 : QuantFormat::kInt4;
  const auto& dir = QuantizedTiny(format_name);
  const Checkpoint src = Checkpoint::Open(TinyCheckpoint());
  const Checkpoint dst = Checkpoint::Open(dir);
  const ModelConfig& c = src.config();

  ASSERT_TRUE(dst.config().quantization.has_value());
  EXPECT_EQ(dst.config().quantization->format, format);
  EXPECT_EQ(dst.config().quantization->group_size, 32);
  EXPECT_FALSE(src.config().quantization.has_value());
  EXPECT_TRUE(dst.synthetic()) << "the safetensors metadata is kept";

  // config.json: the source's keys, plus tandem_quantization.
  auto src_json = nlohmann::json::parse(ReadFile(TinyCheckpoint() / "config.json"));
  auto dst_json = nlohmann::json::parse(ReadFile(dir / "config.json"));
  EXPECT_EQ(dst_json["tandem_quantization"], (nlohmann::json{{"format", format_name}, {"group_size", 32}, {"tensors", "routed_experts"}}));
  dst_json.erase("tandem_quantization");
  EXPECT_EQ(dst_json, src_json);
  EXPECT_FALSE(dst_json.contains("quantization_config"));
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
    EXPECT_EQ(ReadFile(dir / file), ReadFile(TinyCheckpoint() / file)) << file;
  }
  EXPECT_NE(ModelRevision(dir), ModelRevision(TinyCheckpoint()));

  const RawTensors src_raw(TinyCheckpoint() / "model.safetensors");
  const RawTensors dst_raw(dir / "model.safetensors");
  int quantized = 0, copied = 0, mtp_quantized = 0;
  for (const std::string& name : src.TensorNames()) {
    const TensorInfo& info = src.Info(name);
    if (!IsRoutedExpert(name)) {
      ASSERT_TRUE(dst.Has(name)) << name;
      EXPECT_EQ(dst.Info(name).dtype, info.dtype) << name;
      EXPECT_EQ(dst.Info(name).shape, info.shape) << name;
      EXPECT_TRUE(src_raw.Bytes(name) == dst_raw.Bytes(name)) << name << " must be byte-identical";
      ++copied;
      continue;
    }
    const std::string base = name.substr(0, name.size() - std::string(".weight").size());
    EXPECT_FALSE(dst.Has(name)) << name;
    ASSERT_TRUE(dst.Has(base + ".qweight")) << name;
    ASSERT_TRUE(dst.Has(base + ".qscales")) << name;
    const std::int64_t rows = info.shape[0], cols = info.shape[1];
    EXPECT_EQ(dst.Info(base + ".qweight").dtype, format == QuantFormat::kInt8 ? DType::kI8 : DType::kU8);
    EXPECT_EQ(dst.Info(base + ".qweight").shape, (std::vector<std::int64_t>{rows, format == QuantFormat::kInt8 ? cols : cols / 2}));
    EXPECT_EQ(dst.Info(base + ".qscales").dtype, DType::kF32);
    EXPECT_EQ(dst.Info(base + ".qscales").shape, (std::vector<std::int64_t>{rows, cols / 32}));

    const WeightMatrix m = dst.Matrix(name, rows, cols);
    EXPECT_EQ(m.type, WeightMatrix::Type::kQuantized) << name;
    EXPECT_EQ(m.data, nullptr);
    EXPECT_EQ(m.rows, rows);
    EXPECT_EQ(m.cols, cols);
    ASSERT_TRUE(m.quantized) << name;
    const QuantizedMatrix expected = QuantizedMatrix::Quantize(src.Matrix(name, rows, cols), format, 32);
    EXPECT_EQ(m.quantized->format, format);
    EXPECT_EQ(m.quantized->group, 32);
    EXPECT_EQ(m.quantized->rows, rows);
    EXPECT_EQ(m.quantized->cols, cols);
    EXPECT_TRUE(m.quantized->values == expected.values) << name;
    EXPECT_TRUE(m.quantized->scales == expected.scales) << name;
    ++quantized;
    if (name.starts_with(fmt::format("model.layers.{}.", c.num_hidden_layers))) ++mtp_quantized;
  }
  const int moe_layers = c.num_hidden_layers - c.first_k_dense_replace;
  EXPECT_EQ(quantized, 3 * c.n_routed_experts * (moe_layers + c.num_nextn_predict_layers));
  EXPECT_EQ(mtp_quantized, 3 * c.n_routed_experts) << "the MTP layer's experts are quantized too";
  EXPECT_EQ(dst.TensorNames().size(), static_cast<std::size_t>(copied + 2 * quantized)) << "nothing else was added";

  // Shared experts and the dense MLP are not routed experts: they stay bf16.
  EXPECT_EQ(dst.Info("model.layers.1.mlp.shared_experts.down_proj.weight").dtype, DType::kBF16);
  EXPECT_EQ(dst.Info("model.layers.0.mlp.down_proj.weight").dtype, DType::kBF16);

  const CommandResult inspect = Rt({"inspect", dir.string()});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find(fmt::format("quantization  routed experts {}, group 32", format_name)), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find(fmt::format("{} ({})", format_name, format == QuantFormat::kInt8 ? "I8" : "U8")), std::string::npos)
      << inspect.out;
  const CommandResult inspect_src = Rt({"inspect", TinyCheckpoint().string()});
  const auto parameters = [](const std::string& out) {
    const auto at = out.find("parameters");
    return out.substr(at, out.find('\n', at) - at);
  };
  EXPECT_EQ(parameters(inspect.out), parameters(inspect_src.out)) << "the same parameters, fewer bytes";
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizeTiny, ::testing::Values("int8", "int4"));

std::vector<float> PromptLogits(const Checkpoint& ckpt, bool mtp = false) {
  Engine engine(ckpt, EngineOptions{.threads = 2, .mtp = mtp});
  const std::vector<TokenId> prompt = {0, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 10, 84, 200, 150, 250, 17};
  engine.kv().Open(1, 64);
  std::vector<Row> rows;
  for (std::size_t i = 0; i < prompt.size(); ++i) rows.push_back({1, static_cast<std::int32_t>(i), prompt[i], true});
  ForwardOutput out;
  std::vector<float> hidden;
  if (mtp) hidden.assign(prompt.size() * static_cast<std::size_t>(ckpt.config().hidden_size), 0.5f);
  engine.Forward(rows, out, mtp ? hidden.data() : nullptr);
  return out.logits;
}

// ‖a − b‖₂ / ‖b‖₂ over all positions' logits.
double RmsRelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

TEST(QuantizedCheckpoint, EngineLogitsStayCloseToTheSource) {
  const Checkpoint src = Checkpoint::Open(TinyCheckpoint());
  const int vocab = src.config().vocab_size;
  const std::vector<float> reference = PromptLogits(src);
  const std::vector<float> mtp_reference = PromptLogits(src, true);
  // Measured on the tiny preset (bf16 source, group 32), ‖Δlogits‖/‖logits‖ over a
  // prompt: int8 ≈ 0.0025 and int4 0.07–0.09 over 8 random 24-token prompts (the
  // per-row max|Δ|/max|logit| is noisier: 0.003 and 0.16–0.31). Bounds with margin:
  for (const auto& [format, bound] : std::vector<std::pair<std::string, double>>{{"int8", 0.01}, {"int4", 0.2}}) {
    const Checkpoint q = Checkpoint::Open(QuantizedTiny(format));
    const std::vector<float> logits = PromptLogits(q), mtp_logits = PromptLogits(q, true);
    const double error = RmsRelativeError(logits, reference), mtp_error = RmsRelativeError(mtp_logits, mtp_reference);
    std::printf("%s: relative logit error %.5f (MTP layer %.5f), max-row %.5f\n", format.c_str(), error, mtp_error,
                MaxRelativeError(logits, reference, vocab));
    EXPECT_LT(error, bound) << format;
    EXPECT_GT(error, 0.0) << format << ": the experts must actually be the quantized ones";
    EXPECT_LT(mtp_error, bound) << format;
    EXPECT_GT(mtp_error, 0.0) << format;
  }
}

TEST(QuantizedCheckpoint, AllExpertsQuantizesTheSharedExpertsToo) {
  const auto out = TempDir("quantized-all") / "tiny-int8-all";
  const CommandResult r =
      Rt({"quantize", "--in", TinyCheckpoint().string(), "--out", out.string(), "--format", "int8", "--experts", "all"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Checkpoint src = Checkpoint::Open(TinyCheckpoint());
  const Checkpoint q = Checkpoint::Open(out);
  const ModelConfig& c = q.config();
  ASSERT_TRUE(c.quantization.has_value());
  EXPECT_TRUE(c.quantization->shared_experts());
  EXPECT_NE(ReadFile(out / "config.json").find(R"("tensors": "experts")"), std::string::npos);
  const std::int64_t shared = static_cast<std::int64_t>(c.moe_intermediate_size) * c.n_shared_experts;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    if (!c.IsMoeLayer(l)) continue;
    const std::string name = "model.layers." + std::to_string(l) + ".mlp.shared_experts.down_proj.weight";
    const WeightMatrix m = q.Matrix(name, c.hidden_size, shared);
    ASSERT_EQ(m.type, WeightMatrix::Type::kQuantized) << name;
    const QuantizedMatrix expected = QuantizedMatrix::Quantize(src.Matrix(name, c.hidden_size, shared), QuantFormat::kInt8, 32);
    EXPECT_EQ(m.quantized->values, expected.values) << name;
  }
  // The engine reads them: logits move a little more than with routed experts only.
  const double routed_only = RmsRelativeError(PromptLogits(Checkpoint::Open(QuantizedTiny("int8"))), PromptLogits(src));
  const double all = RmsRelativeError(PromptLogits(q), PromptLogits(src));
  std::printf("int8 routed experts: %.5f, all experts: %.5f\n", routed_only, all);
  EXPECT_GT(all, 0.0);
  EXPECT_LT(all, 0.02);
  EXPECT_NE(all, routed_only);
}

// --layers all: every linear layer but the router, the MTP layer's and lm_head
// included; --embedding adds the embeddings.
TEST(QuantizedCheckpoint, AllLayersQuantizesEveryLinearLayerButTheRouter) {
  const auto base = TempDir("quantized-layers");
  const auto out = base / "tiny-int8-linear";
  const CommandResult r = Rt({"quantize", "--in", TinyCheckpoint().string(), "--out", out.string(), "--format", "int8", "--layers", "all"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Checkpoint src = Checkpoint::Open(TinyCheckpoint());
  const Checkpoint q = Checkpoint::Open(out);
  const ModelConfig& c = q.config();
  ASSERT_TRUE(c.quantization.has_value());
  EXPECT_EQ(c.quantization->tensors, QuantizedTensors::kLinear);
  EXPECT_TRUE(c.quantization->shared_experts());
  EXPECT_FALSE(c.quantization->embedding);
  EXPECT_NE(ReadFile(out / "config.json").find(R"("tensors": "linear")"), std::string::npos);
  const int mtp = c.num_hidden_layers;
  for (const std::string& name :
       {std::string("lm_head.weight"), std::string("model.layers.0.self_attn.q_a_proj.weight"),
        std::string("model.layers.0.self_attn.q_b_proj.weight"), std::string("model.layers.1.self_attn.kv_a_proj_with_mqa.weight"),
        std::string("model.layers.1.self_attn.o_proj.weight"), std::string("model.layers.1.self_attn.kv_b_proj.weight"),
        std::string("model.layers.0.mlp.down_proj.weight"), std::string("model.layers.1.mlp.shared_experts.up_proj.weight"),
        "model.layers." + std::to_string(mtp) + ".eh_proj.weight", "model.layers." + std::to_string(mtp) + ".shared_head.head.weight"}) {
    const std::string stem = name.substr(0, name.size() - 7);
    EXPECT_TRUE(q.Has(stem + ".qweight") && !q.Has(name)) << name << " is not quantized";
    const TensorInfo& info = src.Info(name);
    const WeightMatrix m = q.Matrix(name, info.shape[0], info.shape[1]);
    ASSERT_EQ(m.type, WeightMatrix::Type::kQuantized) << name;
    EXPECT_EQ(m.quantized->values, QuantizedMatrix::Quantize(src.Matrix(name, info.shape[0], info.shape[1]), QuantFormat::kInt8, 32).values)
        << name;
  }
  for (const char* kept : {"model.embed_tokens.weight", "model.layers.1.mlp.gate.weight", "model.layers.1.input_layernorm.weight"}) {
    EXPECT_TRUE(q.Has(kept)) << kept << " should be kept as stored";
    EXPECT_EQ(q.Info(kept).dtype, src.Info(kept).dtype) << kept;
  }
  // The engine reads them all; int8 moves the logits more than experts alone do, little.
  const double experts_only = RmsRelativeError(PromptLogits(Checkpoint::Open(QuantizedTiny("int8"))), PromptLogits(src));
  const double linear = RmsRelativeError(PromptLogits(q), PromptLogits(src));
  std::printf("int8 routed experts: %.5f, every linear layer: %.5f\n", experts_only, linear);
  EXPECT_GT(linear, experts_only);
  EXPECT_LT(linear, 0.03);

  // --embedding quantizes the embeddings (the MTP layer's too, where it has its own).
  const auto with_embedding = base / "tiny-int4-linear-embedding";
  const CommandResult e = Rt({"quantize", "--in", TinyCheckpoint().string(), "--out", with_embedding.string(), "--format", "int4",
                              "--layers", "all", "--embedding"});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const Checkpoint qe = Checkpoint::Open(with_embedding);
  EXPECT_TRUE(qe.config().quantization->embedding);
  EXPECT_TRUE(qe.Has("model.embed_tokens.qweight"));
  const std::string inspected = Rt({"inspect", with_embedding.string()}).out;
  EXPECT_NE(inspected.find("quantization  linear layers and embeddings int4"), std::string::npos) << inspected;
  EXPECT_LT(RmsRelativeError(PromptLogits(qe), PromptLogits(src)), 0.5);
  // --experts routed contradicts --layers all.
  const CommandResult bad = Rt({"quantize", "--in", TinyCheckpoint().string(), "--out", (base / "bad").string(), "--format", "int8",
                                "--layers", "all", "--experts", "routed"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("drop --experts routed"), std::string::npos) << bad.err;
}

TEST(QuantizedCheckpoint, QuantizeErrorsNameTheFlagOrTheInput) {
  const auto base = TempDir("quantize-errors");
  const std::string tiny = TinyCheckpoint().string();
  std::filesystem::create_directories(base / "nonempty");
  WriteFile(base / "nonempty" / "keep.txt", "x");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"quantize", "--in", tiny, "--out", (base / "a").string(), "--format", "int3"}, "--format"},
      {{"quantize", "--in", tiny, "--out", (base / "b").string(), "--format", "int4", "--group", "128"},
       "--group 128 does not divide the 64 columns of 'model.layers.1.mlp.experts.0.down_proj.weight'"},
      {{"quantize", "--in", tiny, "--out", (base / "c").string(), "--format", "int8", "--group", "48"}, "--group"},
      {{"quantize", "--in", tiny, "--out", (base / "nonempty").string(), "--format", "int8"},
       "--out " + (base / "nonempty").string() + ": already exists and is not an empty directory"},
      {{"quantize", "--in", tiny, "--out", tiny, "--format", "int8"}, "already exists and is not an empty directory"},
      {{"quantize", "--in", QuantizedTiny("int4").string(), "--out", (base / "d").string(), "--format", "int8"},
       "config.json: the checkpoint is already quantized (tandem_quantization: int4, group 32)"},
      {{"quantize", "--out", (base / "e").string(), "--format", "int8"}, "--in is required"},
      {{"quantize", "--in", (base / "missing").string(), "--out", (base / "f").string(), "--format", "int8"},
       (base / "missing").string() + ": not a checkpoint directory"},
  };
  for (const auto& [args, message] : cases) {
    const CommandResult r = Rt(args);
    EXPECT_EQ(r.exit_code, 2) << args[2] << " " << args[4] << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << "expected '" << message << "' in stderr: " << r.err;
  }
  // Nothing was written for any of them: no outputs, no temporary directories.
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(base)) left.push_back(entry.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"nonempty"});
  EXPECT_EQ(ReadFile(base / "nonempty" / "keep.txt"), "x");
}

TEST(QuantizedCheckpoint, AFailureHalfwayLeavesNothingBehind) {
  // A checkpoint whose last expert (in file order) cannot be read as a matrix: the
  // error comes after other tensors were written.
  const auto in = TempDir("quantize-bad-input");
  std::filesystem::copy_file(TinyCheckpoint() / "config.json", in / "config.json");
  SafetensorsWriter writer;
  writer.Add("model.layers.1.mlp.experts.0.down_proj.weight", DType::kBF16, {128, 64});
  writer.Add("model.layers.1.mlp.experts.0.gate_proj.weight", DType::kBF16, {64, 128});
  writer.Add("model.layers.1.mlp.experts.0.up_proj.weight", DType::kI32, {64, 128});
  writer.Add("model.norm.weight", DType::kBF16, {128});
  std::vector<char> zeros(64 * 128 * 4, 0);
  writer.Write(in / "model.safetensors", [&](const std::string& name) {
    const std::size_t size = name.ends_with("up_proj.weight") ? 64 * 128 * 4 : name == "model.norm.weight" ? 256 : 64 * 128 * 2;
    return std::as_bytes(std::span<const char>(zeros.data(), size));
  });
  const auto parent = TempDir("quantize-bad-output");
  const CommandResult r = Rt({"quantize", "--in", in.string(), "--out", (parent / "q").string(), "--format", "int8"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("tensor 'model.layers.1.mlp.experts.0.up_proj.weight': dtype I32 is not a floating-point weight type"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(parent)) << "neither --out nor the temporary directory may remain";
}

TEST(QuantizedCheckpoint, ShardedInputGivesOneOutputFilePerShard) {
  // The tiny preset split over two shards with an index.
  const auto in = TempDir("sharded");
  for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json"}) std::filesystem::copy_file(TinyCheckpoint() / f, in / f);
  const RawTensors raw(TinyCheckpoint() / "model.safetensors");
  const std::vector<std::string> shards = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
  nlohmann::json weight_map;
  std::vector<SafetensorsWriter> writers(2);
  int i = 0;
  for (const auto& [name, info] : raw.header().tensors) {
    const int shard = (i++ % 2);
    writers[static_cast<std::size_t>(shard)].Add(name, info.dtype, info.shape);
    weight_map[name] = shards[static_cast<std::size_t>(shard)];
  }
  std::uint64_t total = 0;
  for (int s = 0; s < 2; ++s) {
    std::string bytes;
    writers[static_cast<std::size_t>(s)].Write(in / shards[static_cast<std::size_t>(s)], [&](const std::string& name) {
      bytes = raw.Bytes(name);
      return std::as_bytes(std::span<const char>(bytes));
    });
    total += writers[static_cast<std::size_t>(s)].DataBytes();
  }
  WriteFile(in / "model.safetensors.index.json", nlohmann::json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump());
  WriteFile(in / "generation_config.json", "{}");

  const auto out = TempDir("sharded-out") / "q";
  std::filesystem::create_directories(out);  // an existing empty --out is fine
  const QuantizeCheckpointReport report =
      QuantizeCheckpoint(in, out, CheckpointQuantization{.format = QuantFormat::kInt4, .group_size = 32});
  EXPECT_EQ(report.weight_files, shards);
  EXPECT_EQ(report.copied_files, (std::vector<std::string>{"generation_config.json", "tokenizer.json", "tokenizer_config.json"}));
  for (const auto& s : shards) EXPECT_TRUE(std::filesystem::exists(out / s)) << s;
  EXPECT_FALSE(std::filesystem::exists(out / "model.safetensors"));

  const auto index = nlohmann::json::parse(ReadFile(out / "model.safetensors.index.json"));
  const std::string expert = "model.layers.2.mlp.experts.5.up_proj";
  EXPECT_EQ(index["weight_map"][expert + ".qweight"], weight_map[expert + ".weight"]) << "a quantized tensor stays in its shard";
  EXPECT_EQ(index["weight_map"][expert + ".qscales"], weight_map[expert + ".weight"]);
  EXPECT_FALSE(index["weight_map"].contains(expert + ".weight"));
  EXPECT_EQ(index["metadata"]["total_size"], report.weight_bytes_out);

  // The same matrices as the single-file quantization (Open checks the index against the files).
  const Checkpoint sharded = Checkpoint::Open(out);
  const Checkpoint single = Checkpoint::Open(QuantizedTiny("int4"));
  EXPECT_EQ(sharded.TensorNames(), single.TensorNames());
  const WeightMatrix a = sharded.Matrix(expert + ".weight", 64, 128), b = single.Matrix(expert + ".weight", 64, 128);
  EXPECT_EQ(a.quantized->values, b.quantized->values);
  EXPECT_EQ(a.quantized->scales, b.quantized->scales);
  EXPECT_EQ(PromptLogits(sharded), PromptLogits(single));
}

TEST(QuantizedCheckpoint, Fp8InputKeepsItsFp8TensorsAndQuantizesItsFp8Experts) {
  // DeepSeek-V3 style: F8_E4M3 weights with 128×128-block `weight_scale_inv`.
  const auto in = TempDir("fp8");
  std::filesystem::copy_file(TinyCheckpoint() / "config.json", in / "config.json");
  const std::string expert = "model.layers.1.mlp.experts.3.down_proj.weight", attention = "model.layers.1.self_attn.o_proj.weight";
  SafetensorsWriter writer;
  for (const std::string& name : {expert, attention}) {
    writer.Add(name, DType::kF8E4M3, {128, 64});
    writer.Add(name + "_scale_inv", DType::kF32, {1, 1});
  }
  std::vector<std::uint8_t> fp8(128 * 64);
  for (std::size_t i = 0; i < fp8.size(); ++i)
    fp8[i] = static_cast<std::uint8_t>((i * 37 + 11) % 0x7f);  // finite e4m3 codes, both signs below
  for (std::size_t i = 0; i < fp8.size(); i += 3) fp8[i] |= 0x80;
  const float scale = 0.0125f;
  writer.Write(in / "model.safetensors", [&](const std::string& name) {
    if (name.ends_with("_scale_inv")) return std::as_bytes(std::span<const float>(&scale, 1));
    return std::as_bytes(std::span<const std::uint8_t>(fp8));
  });

  const auto out = TempDir("fp8-out") / "q";
  const QuantizeCheckpointReport report =
      QuantizeCheckpoint(in, out, CheckpointQuantization{.format = QuantFormat::kInt8, .group_size = 32});
  EXPECT_EQ(report.quantized_matrices, 1);
  EXPECT_EQ(report.copied_tensors, 2);
  EXPECT_EQ(report.quantized_bytes_in, 128u * 64u + 4u);
  const Checkpoint src = Checkpoint::Open(in), dst = Checkpoint::Open(out);
  EXPECT_EQ(dst.TensorNames(),
            (std::vector<std::string>{"model.layers.1.mlp.experts.3.down_proj.qscales", "model.layers.1.mlp.experts.3.down_proj.qweight",
                                      attention, attention + "_scale_inv"}))
      << "the expert's block scales go with its fp8 values; the attention weight stays fp8 with its scales";
  const RawTensors src_raw(in / "model.safetensors"), dst_raw(out / "model.safetensors");
  EXPECT_EQ(dst.Info(attention).dtype, DType::kF8E4M3);
  EXPECT_TRUE(src_raw.Bytes(attention) == dst_raw.Bytes(attention));
  EXPECT_TRUE(src_raw.Bytes(attention + "_scale_inv") == dst_raw.Bytes(attention + "_scale_inv"));
  const QuantizedMatrix expected = QuantizedMatrix::Quantize(src.Matrix(expert, 128, 64), QuantFormat::kInt8, 32);
  const WeightMatrix m = dst.Matrix(expert, 128, 64);
  ASSERT_EQ(m.type, WeightMatrix::Type::kQuantized);
  EXPECT_EQ(m.quantized->values, expected.values);
  EXPECT_EQ(m.quantized->scales, expected.scales);
  EXPECT_NEAR(m.At(5, 7), src.Matrix(expert, 128, 64).At(5, 7), 0.01 * 448 * scale);
}

// A small checkpoint with the tiny config (optionally tandem-quantized) and the given
// tensors, zero-filled: for the loader's checks.
std::filesystem::path HandMadeCheckpoint(const std::vector<std::tuple<std::string, DType, std::vector<std::int64_t>>>& tensors,
                                         const std::string& quantization = "") {
  const auto dir = TempDir("hand-made");
  auto config = nlohmann::json::parse(ReadFile(TinyCheckpoint() / "config.json"));
  if (!quantization.empty()) config["tandem_quantization"] = nlohmann::json::parse(quantization);
  WriteFile(dir / "config.json", config.dump());
  SafetensorsWriter writer;
  for (const auto& [name, dtype, shape] : tensors) writer.Add(name, dtype, shape);
  std::vector<char> zeros;
  writer.Write(dir / "model.safetensors", [&](const std::string& name) {
    for (const auto& [n, dtype, shape] : tensors) {
      if (n != name) continue;
      std::size_t size = DTypeSize(dtype);
      for (std::int64_t d : shape) size *= static_cast<std::size_t>(d);
      zeros.assign(size, 0);
    }
    return std::as_bytes(std::span<const char>(zeros));
  });
  return dir;
}

std::string LoadError(const std::filesystem::path& dir, std::int64_t rows = 64, std::int64_t cols = 128) {
  try {
    const Checkpoint ckpt = Checkpoint::Open(dir);
    (void)ckpt.Matrix("x.weight", rows, cols);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(QuantizedCheckpoint, LoaderChecksShapesDtypesAndGroups) {
  using T = std::vector<std::tuple<std::string, DType, std::vector<std::int64_t>>>;
  const std::string int4_32 = R"({"format": "int4", "group_size": 32, "tensors": "routed_experts"})";
  // Good ones first: int8 group 64, int4 group 32.
  {
    const Checkpoint ckpt =
        Checkpoint::Open(HandMadeCheckpoint(T{{"x.qweight", DType::kI8, {64, 128}}, {"x.qscales", DType::kF32, {64, 2}}}));
    const WeightMatrix m = ckpt.Matrix("x.weight", 64, 128);
    EXPECT_EQ(m.type, WeightMatrix::Type::kQuantized);
    EXPECT_EQ(m.quantized->format, QuantFormat::kInt8);
    EXPECT_EQ(m.quantized->group, 64);
    EXPECT_EQ(m.bytes(), 64u * 128u + 64u * 2u * 4u);
  }
  {
    const Checkpoint ckpt =
        Checkpoint::Open(HandMadeCheckpoint(T{{"x.qweight", DType::kU8, {64, 64}}, {"x.qscales", DType::kF32, {64, 4}}}, int4_32));
    const WeightMatrix m = ckpt.Matrix("x.weight", 64, 128);
    EXPECT_EQ(m.quantized->format, QuantFormat::kInt4);
    EXPECT_EQ(m.quantized->group, 32);
    EXPECT_EQ(m.RowSlice(8, 8).quantized->rows, 8);
  }
  const std::vector<std::pair<T, std::string>> cases = {
      {{{"x.qweight", DType::kI8, {64, 128}}}, "tensor 'x.qweight': quantized weight without 'x.qscales'"},
      {{{"x.qscales", DType::kF32, {64, 4}}}, "tensor 'x.qscales': quantized weight without 'x.qweight'"},
      {{{"x.qweight", DType::kF32, {64, 128}}, {"x.qscales", DType::kF32, {64, 4}}},
       "tensor 'x.qweight': dtype F32; a quantized weight is I8 (int8) or U8 (int4"},
      {{{"x.qweight", DType::kI8, {64, 64}}, {"x.qscales", DType::kF32, {64, 4}}},
       "tensor 'x.qweight': shape [64, 64] but the config implies [64, 128] (int8 of a [64, 128] matrix)"},
      {{{"x.qweight", DType::kU8, {64, 128}}, {"x.qscales", DType::kF32, {64, 4}}},
       "tensor 'x.qweight': shape [64, 128] but the config implies [64, 64] (int4 of a [64, 128] matrix)"},
      {{{"x.qweight", DType::kI8, {64, 128}}, {"x.qscales", DType::kBF16, {64, 4}}},
       "tensor 'x.qscales': dtype BF16; quantization scales are F32"},
      {{{"x.qweight", DType::kI8, {64, 128}}, {"x.qscales", DType::kF32, {64, 3}}},
       "tensor 'x.qscales': shape [64, 3] is not [64, 128 / group]"},
      {{{"x.qweight", DType::kU8, {64, 64}}, {"x.qscales", DType::kF32, {64, 128}}},
       "group size 1 (from [64, 128] scales of 128 columns) is not a multiple of 32"},
  };
  for (const auto& [tensors, message] : cases) {
    const std::string error = LoadError(HandMadeCheckpoint(tensors));
    EXPECT_NE(error.find(message), std::string::npos) << "expected '" << message << "' in: " << error;
    EXPECT_NE(error.find("model.safetensors: tensor"), std::string::npos) << "names the file: " << error;
  }
  const std::string mismatch =
      LoadError(HandMadeCheckpoint(T{{"x.qweight", DType::kI8, {64, 128}}, {"x.qscales", DType::kF32, {64, 4}}}, int4_32));
  EXPECT_NE(mismatch.find("tensor 'x.qweight': int8 with group 32, but config.json's tandem_quantization says int4 with group 32"),
            std::string::npos)
      << mismatch;
}

TEST(QuantizedCheckpoint, ConfigRejectsUnknownFormatsAndGroupsThatDoNotFit) {
  const auto config = nlohmann::json::parse(ReadFile(TinyCheckpoint() / "config.json"));
  const auto error_with = [&](const nlohmann::json& quantization) {
    auto c = config;
    c["tandem_quantization"] = quantization;
    try {
      (void)ParseModelConfig(c.dump(), "config.json");
    } catch (const ModelError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error_with({{"format", "int4"}, {"group_size", 64}, {"tensors", "routed_experts"}}), "(no error)");
  EXPECT_NE(error_with({{"format", "fp4"}, {"group_size", 32}, {"tensors", "routed_experts"}})
                .find("'tandem_quantization.format' 'fp4' is not a known format (int8, int4)"),
            std::string::npos);
  EXPECT_NE(error_with({{"format", "int8"}, {"group_size", 128}, {"tensors", "routed_experts"}})
                .find("'tandem_quantization.group_size' 128 does not divide moe_intermediate_size 64"),
            std::string::npos);
  EXPECT_NE(error_with({{"format", "int4"}, {"group_size", 3}, {"tensors", "routed_experts"}}).find("must be a multiple of 32"),
            std::string::npos);
  EXPECT_EQ(error_with({{"format", "int8"}, {"group_size", 32}, {"tensors", "experts"}}), "(no error)");
  EXPECT_NE(
      error_with({{"format", "int8"}, {"group_size", 32}, {"tensors", "all"}}).find("'all' is not one of 'routed_experts', 'experts'"),
      std::string::npos);
  EXPECT_NE(error_with("int8").find("'tandem_quantization' must be an object"), std::string::npos);
}

TEST(QuantizedCheckpoint, ExpertSlicesCutAtWholeGroupsOnly) {
  const Checkpoint q = Checkpoint::Open(QuantizedTiny("int4"));
  const ModelConfig& c = q.config();
  // Two tp halves of layer 1 add up to the whole layer.
  const int top_k = c.num_experts_per_tok;
  const std::int64_t rows = 3, h = c.hidden_size;
  std::vector<float> x(static_cast<std::size_t>(rows * h));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.37f);
  std::vector<ExpertRoute> routes;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (int k = 0; k < top_k; ++k) routes.push_back({static_cast<int>((r * 5 + k * 3) % c.n_routed_experts), 0.25f});
  }
  const auto compute = [&](int inter_begin, int inter_end, int shared_end) {
    MoeSlices slices(q, {{1, 0, c.n_routed_experts, inter_begin, inter_end, 0, shared_end}}, nullptr, false);
    std::vector<double> out(static_cast<std::size_t>(rows * h));
    slices.Compute(1, x.data(), rows, routes, top_k, out.data());
    return out;
  };
  const std::vector<double> whole = compute(0, 64, 64), first = compute(0, 32, 64), second = compute(32, 64, 0);
  {
    // Gate and up held as one matrix (the default) or apart (as a device backend
    // takes them): the same bits, for experts given one row and several, and the
    // shared expert's three.
    MoeSlices apart(q, {{1, 0, c.n_routed_experts, 0, 64, 0, 64}}, nullptr, false, /*fuse_gate_up=*/false);
    std::vector<double> out(static_cast<std::size_t>(rows * h));
    apart.Compute(1, x.data(), rows, routes, top_k, out.data());
    EXPECT_EQ(out, whole);
  }
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    worst = std::max(worst, std::fabs(first[i] + second[i] - whole[i]));
    scale = std::max(scale, std::fabs(whole[i]));
  }
  EXPECT_GT(scale, 0.0);
  EXPECT_LT(worst, 1e-5 * scale);

  try {
    MoeSlices slices(q, {{1, 0, c.n_routed_experts, 16, 32, 0, 0}}, nullptr, false);
    ADD_FAILURE() << "columns [16, 32) cut int4 groups of 32";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.1.mlp.experts.0.down_proj: intermediate columns [16, 32) are not whole "
                                         "quantization groups of 32 (int4 checkpoint)"),
              std::string::npos)
        << e.what();
  }
}

TEST(QuantizedCheckpoint, PlacementRefusesTpSplitsInsideAGroup) {
  const ModelConfig c = Checkpoint::Open(QuantizedTiny("int4")).config();  // moe_intermediate_size 64, group 32
  Layout layout;
  layout.workers = {"a:1", "b:2", "c:3", "d:4"};
  try {
    (void)PlacementPlan::Compute(c, layout);
    ADD_FAILURE() << "tp4 cuts 64 columns into 16s";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tp over 4 workers splits each routed expert's moe_intermediate_size 64 at column 16, "
                                         "which is not a multiple of the checkpoint's quantization group 32 (int4)"),
              std::string::npos)
        << e.what();
  }
  layout.parallel = ExpertParallel::kExpert;
  EXPECT_NO_THROW((void)PlacementPlan::Compute(c, layout)) << "ep keeps experts whole";
  layout.parallel = ExpertParallel::kTensor;
  layout.workers = {"a:1", "b:2"};
  EXPECT_NO_THROW((void)PlacementPlan::Compute(c, layout)) << "tp2 cuts at 32";
  layout.workers = {"a:1", "b:2", "c:3", "d:4"};
  layout.local_expert_layers = 3;  // every MoE layer stays on the coordinator
  EXPECT_NO_THROW((void)PlacementPlan::Compute(c, layout));
}

// Hybrid layouts on the quantized checkpoint reproduce the single process (with its
// expert inputs rounded as the wire rounds them).
TEST(QuantizedCheckpoint, HybridLayoutsMatchTheSingleProcess) {
  const auto& model = QuantizedTiny("int4");
  const EvalRun single = RunEval(model, {"--expert-input-dtype", "bf16"}, 32);
  ASSERT_EQ(single.run.exit_code, 0) << single.run.err;
  for (const std::vector<std::string>& layout :
       std::vector<std::vector<std::string>>{{"--spawn-workers", "4", "--expert-parallel", "ep"},
                                             {"--spawn-workers", "2", "--expert-parallel", "tp"},
                                             {"--spawn-workers", "2", "--expert-parallel", "tp", "--local-expert-layers", "1"}}) {
    const EvalRun hybrid = RunEval(model, layout, 32);
    ASSERT_EQ(hybrid.run.exit_code, 0) << fmt::format("{}", fmt::join(layout, " ")) << ": " << hybrid.run.err;
    EXPECT_LE(MaxRelativeError(hybrid, single), 1e-4) << fmt::format("{}", fmt::join(layout, " "));
    EXPECT_EQ(hybrid.tokens, single.tokens) << fmt::format("{}", fmt::join(layout, " "));
  }
  const EvalRun tp4 = RunEval(model, {"--spawn-workers", "4", "--expert-parallel", "tp"}, 32);
  EXPECT_EQ(tp4.run.exit_code, 2);
  EXPECT_NE(tp4.run.err.find("not a multiple of the checkpoint's quantization group 32"), std::string::npos) << tp4.run.err;
}

}  // namespace
}  // namespace tandem::rt
