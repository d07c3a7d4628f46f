// Runs the real `tandem-rt` executable on a fresh tiny checkpoint.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/kernels/cuda/cuda_device.hpp"
#include "tests/runtime/tiny_model.hpp"
#include "tests/support/run_command.hpp"

namespace tandem::rt {
namespace {

using tandem::testing::CommandResult;
using tandem::testing::RunCommand;
using tandem::testing::TempDir;

CommandResult Rt(const std::vector<std::string>& args) {
  CommandResult r = RunCommand(TANDEM_RT_BIN, args);
  EXPECT_FALSE(r.timed_out);
  return r;
}

TEST(TandemRtCli, InitModelThenGenerateInOneGo) {
  const auto dir = TempDir("cli") / "tiny";
  const CommandResult init = Rt({"init-model", "--preset", "tiny", "--seed", "3", "--out", dir.string()});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  EXPECT_NE(init.out.find("vocab"), std::string::npos) << init.out;

  const CommandResult gen = Rt({"generate", "--model", dir.string(), "--chat", "--prompt", "Hello there", "--max-tokens", "12",
                                "--temperature", "0.7", "--seed", "5", "--threads", "2"});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  EXPECT_NE(gen.err.find("decode: 12 tokens"), std::string::npos) << gen.err;
  EXPECT_NE(gen.err.find("tok/s"), std::string::npos) << gen.err;

  const CommandResult again = Rt({"generate", "--model", dir.string(), "--chat", "--prompt", "Hello there", "--max-tokens", "12",
                                  "--temperature", "0.7", "--seed", "5", "--threads", "1"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(gen.out, again.out) << "a seeded request must give the same text at any thread count";

  // --warmup runs the prompt once before the timed run: the cache starts empty again,
  // so the text is the same.
  const CommandResult warm = Rt({"generate", "--model", dir.string(), "--chat", "--prompt", "Hello there", "--max-tokens", "12",
                                 "--temperature", "0.7", "--seed", "5", "--threads", "2", "--warmup"});
  ASSERT_EQ(warm.exit_code, 0) << warm.err;
  EXPECT_EQ(gen.out, warm.out) << "the warm-up prompt must leave nothing behind";
  EXPECT_NE(warm.err.find("decode: 12 tokens"), std::string::npos) << warm.err;
}

TEST(TandemRtCli, InitModelTokenizerMerges) {
  const auto dir = TempDir("cli-merges") / "tiny";
  const CommandResult init = Rt({"init-model", "--preset", "tiny", "--seed", "3", "--tokenizer-merges", "300", "--out", dir.string()});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  // Without the DeepSeek-V3 tokenizer (no scripts/setup) the vocabulary is byte-level whatever the count.
  const bool derived = init.out.find("byte-level") == std::string::npos;
  if (derived) {
    EXPECT_NE(init.out.find("cut to 300 merges"), std::string::npos) << init.out;
  }
  const auto config = nlohmann::json::parse(std::ifstream(dir / "config.json"));
  if (derived) {
    EXPECT_LT(config["vocab_size"].get<int>(), 600) << "256 bytes, 300 merges and the added tokens";
  }
}

TEST(TandemRtCli, InspectTokenizeAndEval) {
  const auto dir = tandem::testing::TinyCheckpoint();
  const CommandResult inspect = Rt({"inspect", dir.string()});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  for (const char* word : {"DeepseekV3ForCausalLM", "4 (1 dense, 3 MoE)", "active per token", "BF16", "revision"}) {
    EXPECT_NE(inspect.out.find(word), std::string::npos) << word << " in\n" << inspect.out;
  }

  const CommandResult tok = Rt({"tokenize", "--model", dir.string(), "--text", "hi"});
  ASSERT_EQ(tok.exit_code, 0) << tok.err;
  EXPECT_EQ(nlohmann::json::parse(tok.out).size(), 2u) << "byte-level: one token per byte";
  const CommandResult chat = Rt({"tokenize", "--model", dir.string(), "--text", "hi", "--chat"});
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  const auto chat_ids = nlohmann::json::parse(chat.out);
  EXPECT_EQ(chat_ids.front(), 0) << "chat starts with BOS";
  EXPECT_EQ(chat_ids.size(), 5u) << "BOS, <｜User｜>, h, i, <｜Assistant｜>";

  // --jsonl: one JSON string per line in, one array of ids per line out, as --text gives them.
  const auto lines = TempDir("tokenize") / "texts.jsonl";
  std::ofstream(lines) << "\"hi\"\n\"\"\n\"<\uff5cUser\uff5c>x\"\n";
  const CommandResult batch = Rt({"tokenize", "--model", dir.string(), "--jsonl", lines.string()});
  ASSERT_EQ(batch.exit_code, 0) << batch.err;
  EXPECT_EQ(batch.out, tok.out + "[]\n" + Rt({"tokenize", "--model", dir.string(), "--text", "<\uff5cUser\uff5c>x"}).out);
  const CommandResult parsed = Rt({"tokenize", "--model", dir.string(), "--jsonl", lines.string(), "--parse-special"});
  ASSERT_EQ(parsed.exit_code, 0) << parsed.err;
  EXPECT_NE(parsed.out, batch.out) << "--parse-special reads <｜User｜> as its token";
  std::ofstream(lines) << "\"ok\"\n42\n";
  const CommandResult bad = Rt({"tokenize", "--model", dir.string(), "--jsonl", lines.string()});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find(":2: expected a JSON string"), std::string::npos) << bad.err;

  const auto logits = TempDir("eval") / "logits.bin";
  const CommandResult eval = Rt({"eval", "--model", dir.string(), "--tokens", "0,5,6", "--decode", "2", "--logits-out", logits.string()});
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  const auto summary = nlohmann::json::parse(eval.out);
  EXPECT_EQ(summary["positions"], 5);
  const int vocab = summary["vocab"];
  EXPECT_EQ(std::filesystem::file_size(logits), static_cast<std::uintmax_t>(5 * vocab * 4));
}

TEST(TandemRtCli, BadInputExitsTwoWithAMessage) {
  const auto dir = tandem::testing::TinyCheckpoint();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"inspect", "/nonexistent/model"}, "/nonexistent/model: not a checkpoint directory"},
      {{"eval", "--model", dir.string(), "--tokens", "0,999999", "--logits-out", "/tmp/x.bin"}, "token 999999 is outside"},
      {{"eval", "--model", dir.string(), "--tokens", "0,a", "--logits-out", "/tmp/x.bin"}, "--tokens"},
      {{"generate", "--model", dir.string(), "--prompt", "x", "--max-tokens", "5000"}, "exceeds the model's context 2048"},
      {{"init-model", "--preset", "huge", "--seed", "1", "--out", "/tmp/x"}, "--preset"},
      {{"tokenize", "--model", dir.string()}, "give --text, --file or --jsonl"},
  };
  for (const auto& [args, message] : cases) {
    const CommandResult r = Rt(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << "stderr: " << r.err;
  }
}

TEST(TandemRtCli, DeviceCudaWithoutABackendOrAGpuExitsTwoAndSaysWhy) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a GPU is here: " << CudaDeviceSummary();
  const auto dir = tandem::testing::TinyCheckpoint();
  const std::string why = CudaBuilt() ? "CUDA device" : "configure with -DTANDEM_CUDA=ON";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"eval", "--model", dir.string(), "--tokens", "0,1", "--logits-out", "/tmp/x.bin", "--device", "cuda"},
        std::vector<std::string>{"expert", "--listen", "127.0.0.1:0", "--model", dir.string(), "--device", "cuda"}}) {
    const CommandResult r = Rt(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("--device cuda: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  }
  const CommandResult bad = Rt({"eval", "--model", dir.string(), "--tokens", "0", "--logits-out", "/tmp/x.bin", "--device", "tpu"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--device"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace tandem::rt
