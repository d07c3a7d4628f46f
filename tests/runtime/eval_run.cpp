#include "tests/runtime/eval_run.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "tests/runtime/tiny_model.hpp"

namespace tandem::testing {

EvalRun RunEval(const std::filesystem::path& model, const std::vector<std::string>& extra, int decode) {
  EvalRun r;
  const auto logits = TempDir("eval") / "logits.bin";
  std::vector<std::string> args = {"eval",
                                   "--model",
                                   model.string(),
                                   "--tokens",
                                   "0,72,101,108,108,111,44,32,119,111,114,108,100,33,10,84",
                                   "--decode",
                                   std::to_string(decode),
                                   "--logits-out",
                                   logits.string(),
                                   "--threads",
                                   "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  r.run = RunCommand(TANDEM_RT_BIN, args, std::chrono::seconds(240));
  if (r.run.exit_code != 0) return r;
  const auto summary = nlohmann::json::parse(r.run.out);
  r.vocab = summary["vocab"];
  r.tokens = summary["tokens"].get<std::vector<int>>();
  r.logits.resize(std::filesystem::file_size(logits) / 4);
  std::ifstream(logits, std::ios::binary).read(reinterpret_cast<char*>(r.logits.data()), static_cast<std::streamsize>(r.logits.size() * 4));
  return r;
}

double MaxRelativeError(const std::vector<float>& a, const std::vector<float>& b, int vocab) {
  double worst = 0.0;
  for (std::size_t row = 0; row < b.size() / static_cast<std::size_t>(vocab); ++row) {
    double diff = 0.0, scale = 0.0;
    for (int v = 0; v < vocab; ++v) {
      const std::size_t i = row * static_cast<std::size_t>(vocab) + static_cast<std::size_t>(v);
      diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void WriteFile(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

}  // namespace tandem::testing
