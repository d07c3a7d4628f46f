// Synthetic DeepSeek V4.1 checkpoints in the official layout, and the check of a
// checkpoint's contents against its configuration.
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/model/mapped_file.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/model/v41_config.hpp"
#include "runtime/model/v41_synthetic.hpp"
#include "runtime/model/v41_tensors.hpp"
#include "runtime/numeric/microscaling.hpp"
#include "tests/runtime/eval_run.hpp"
#include "tests/runtime/tiny_model.hpp"
#include "tests/support/run_command.hpp"

namespace tandem::rt {
namespace {

namespace fs = std::filesystem;

std::string Refusal(const fs::path& dir) {
  try {
    CheckV41Checkpoint(dir, LoadV41Config(dir));
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

TEST(V41Checkpoint, PresetsHoldEveryTensorOfEveryBlockTypeAndInspectSaysSo) {
  for (const char* preset : {"v41-tiny", "v41-small"}) {
    const fs::path dir = testing::TempDir(preset);
    const auto init = testing::RunCommand(TANDEM_RT_BIN, {"init-model", "--preset", preset, "--seed", "1", "--out", dir.string()});
    ASSERT_EQ(init.exit_code, 0) << init.err;
    const auto inspect = testing::RunCommand(TANDEM_RT_BIN, {"inspect", dir.string()});
    ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
    for (const char* block : {"window", "kv+index source", "consumer, ratio 2", "candidate source", "consumer, ratio 1",
                              "candidate index source", "each as the configuration needs"}) {
      EXPECT_NE(inspect.out.find(block), std::string::npos) << preset << ": " << block << "\n" << inspect.out;
    }
    const V41Contents contents = CheckV41Checkpoint(dir, LoadV41Config(dir));
    EXPECT_EQ(contents.tensors, V41Tensors(LoadV41Config(dir)).size());
  }
}

TEST(V41Checkpoint, TheSameSeedWritesTheSameBytesAndTheWeightsHaveTheirScale) {
  const fs::path a = testing::TempDir("v41-a"), b = testing::TempDir("v41-b"), c = testing::TempDir("v41-c");
  WriteV41SyntheticCheckpoint("v41-tiny", 5, a);
  WriteV41SyntheticCheckpoint("v41-tiny", 5, b);
  WriteV41SyntheticCheckpoint("v41-tiny", 6, c);
  EXPECT_EQ(testing::ReadFile(a / "model.safetensors"), testing::ReadFile(b / "model.safetensors"));
  EXPECT_NE(testing::ReadFile(a / "model.safetensors"), testing::ReadFile(c / "model.safetensors"));
  // An FP4 expert's rows, dequantized: draws of variance 1/fan_in (256 inputs).
  const MappedFile file(a / "model.safetensors");
  const SafetensorsHeader header = ParseSafetensorsHeader(file.bytes(), "model.safetensors");
  const auto bytes = [&](const std::string& name) {
    const TensorInfo& t = header.tensors.at(name);
    return reinterpret_cast<const std::uint8_t*>(file.bytes().data() + header.data_offset + t.begin);
  };
  const TensorInfo& w1 = header.tensors.at("layers.2.ffn.experts.1.w1.weight");
  const std::int64_t rows = w1.shape[0], in = w1.shape[1] * 2;
  double sum = 0, squares = 0;
  std::vector<float> row(static_cast<std::size_t>(in));
  for (std::int64_t r = 0; r < rows; ++r) {
    DequantizeFp4Row(bytes("layers.2.ffn.experts.1.w1.weight") + r * in / 2, bytes("layers.2.ffn.experts.1.w1.scale") + r * in / 32, in,
                     row.data());
    for (float v : row) {
      sum += v;
      squares += static_cast<double>(v) * v;
    }
  }
  const double n = static_cast<double>(rows * in), std = std::sqrt(squares / n - (sum / n) * (sum / n));
  EXPECT_NEAR(std, 1.0 / 16, 0.01);
  EXPECT_NEAR(sum / n, 0.0, 0.005);
}

TEST(V41Checkpoint, ATensorThatIsMissingWrongOrUnknownIsNamed) {
  const fs::path dir = testing::TempDir("v41-check");
  WriteV41SyntheticCheckpoint("v41-tiny", 1, dir);
  EXPECT_EQ(Refusal(dir), "");
  // One routed expert more in the configuration: the gate's shape no longer fits.
  nlohmann::json args = nlohmann::json::parse(testing::ReadFile(dir / "inference" / "config.json"));
  const nlohmann::json original = args;
  args["n_routed_experts"] = 5;
  testing::WriteFile(dir / "inference" / "config.json", args.dump());
  EXPECT_NE(Refusal(dir).find("model.safetensors: tensor 'layers.0.ffn.gate.bias' is F32 [4]; this configuration needs F32 [5]"),
            std::string::npos)
      << Refusal(dir);
  // Without DSpark, the stages' tensors are not this configuration's.
  args = original;
  args["dspark_block_size"] = 0;
  testing::WriteFile(dir / "inference" / "config.json", args.dump());
  EXPECT_NE(Refusal(dir).find("tensor 'mtp.0."), std::string::npos) << Refusal(dir);
  EXPECT_NE(Refusal(dir).find("is not a tensor of this DeepSeek V4.1 configuration"), std::string::npos) << Refusal(dir);
  // A tensor left out of the file.
  testing::WriteFile(dir / "inference" / "config.json", original.dump());
  const std::string bytes = testing::ReadFile(dir / "model.safetensors");
  const SafetensorsHeader header =
      ParseSafetensorsHeader({reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}, "model.safetensors");
  SafetensorsWriter writer;
  for (const auto& [name, info] : header.tensors) {
    if (name != "layers.3.attn.indexer.k_norm.weight") writer.Add(name, info.dtype, info.shape);
  }
  writer.Write(dir / "model.safetensors", [&](const std::string& name) {
    const TensorInfo& t = header.tensors.at(name);
    return std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.data() + header.data_offset + t.begin), t.end - t.begin);
  });
  EXPECT_EQ(Refusal(dir), dir.string() + ": tensor 'layers.3.attn.indexer.k_norm.weight' (BF16 [64]) is missing from the checkpoint");
  const auto inspect = testing::RunCommand(TANDEM_RT_BIN, {"inspect", dir.string()});
  EXPECT_EQ(inspect.exit_code, 2);
  EXPECT_NE(inspect.err.find("'layers.3.attn.indexer.k_norm.weight' (BF16 [64]) is missing"), std::string::npos) << inspect.err;
}

}  // namespace
}  // namespace tandem::rt
