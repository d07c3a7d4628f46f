// DeepSeek V4.1's Engram: the sidecar constants checked against the configuration, and the
// n-gram table rows against golden values computed with Python's integers
// (tests/reference/engram_golden.py) on the v41-tiny preset.
#include <algorithm>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/engine/engram_hash.hpp"
#include "runtime/model/engram_constants.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/numpy_random.hpp"
#include "runtime/model/v41_synthetic.hpp"
#include "tests/runtime/eval_run.hpp"
#include "tests/runtime/tiny_model.hpp"
#include "tests/support/run_command.hpp"

namespace tandem::rt {
namespace {

nlohmann::json Golden() {
  std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/tests/reference/golden/engram.json");
  EXPECT_TRUE(in) << "tests/reference/golden/engram.json is missing";
  return nlohmann::json::parse(in);
}

std::string Refusal(const std::filesystem::path& dir, const V41Config& c) {
  try {
    LoadEngramConstants(dir, c);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

TEST(Engram, RowsOfEveryPositionMatchTheGoldenValues) {
  const nlohmann::json golden = Golden();
  const auto dir = testing::TempDir("v41-engram");
  const V41SyntheticReport r = WriteV41SyntheticCheckpoint("v41-tiny", 1, dir);
  testing::WriteFile(dir / "engram.json", golden.at("engram_json").dump());
  const EngramConstants k = LoadEngramConstants(dir, r.config);
  std::vector<std::int64_t> compressed;
  for (const auto& t : golden.at("tokens")) compressed.push_back(k.token_map.at(t.get<std::size_t>()));
  const auto positions = static_cast<std::int64_t>(compressed.size());
  const int per = (r.config.engram_max_ngram_size - 1) * r.config.engram_n_heads;
  for (std::size_t l = 0; l < k.layers.size(); ++l) {
    std::vector<std::int64_t> rows(static_cast<std::size_t>(positions * per));
    EngramRows(k.layers[l], r.config.engram_max_ngram_size, r.config.engram_n_heads, k.pad_id, compressed, 0, positions, rows.data());
    std::vector<std::int64_t> want;
    for (const auto& p : golden.at("rows")[l]) {
      for (const auto& id : p) want.push_back(id.get<std::int64_t>());
    }
    EXPECT_EQ(rows, want) << "layer " << k.layers[l].layer;
    // A later chunk, given the history, reads the same rows.
    std::vector<std::int64_t> tail(static_cast<std::size_t>((positions - 25) * per));
    EngramRows(k.layers[l], r.config.engram_max_ngram_size, r.config.engram_n_heads, k.pad_id, compressed, 25, positions, tail.data());
    EXPECT_TRUE(std::equal(tail.begin(), tail.end(), rows.begin() + 25 * per));
    for (std::int64_t id : rows) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, r.config.engram_num_embeddings[l]);
    }
  }
}

TEST(Engram, TheSidecarScriptWritesWhatTheGoldenHoldsAndABadSidecarIsRefused) {
  const nlohmann::json golden = Golden();
  const auto dir = testing::TempDir("v41-sidecar");
  const V41SyntheticReport r = WriteV41SyntheticCheckpoint("v41-tiny", 1, dir);
  std::filesystem::remove(dir / "engram.json");  // init-model wrote one; the script's is checked here
  EXPECT_NE(Refusal(dir, r.config).find("engram.json: missing: the Engram constants are written by models/v41/engram_constants.py"),
            std::string::npos);
  const auto script =
      testing::RunCommand("/usr/bin/python3", {std::string(TANDEM_SOURCE_DIR) + "/models/v41/engram_constants.py", dir.string(), "--stub"});
  ASSERT_EQ(script.exit_code, 0) << script.err;
  EXPECT_EQ(nlohmann::json::parse(testing::ReadFile(dir / "engram.json")), golden.at("engram_json"));
  auto broken = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = golden.at("engram_json");
    edit(j);
    testing::WriteFile(dir / "engram.json", j.dump());
    return Refusal(dir, r.config);
  };
  EXPECT_NE(broken([](nlohmann::json& j) { j["layers"][1]["multipliers"][2] = 4; }).find("multiplier 4 is not an odd number"),
            std::string::npos);
  EXPECT_NE(broken([](nlohmann::json& j) { j["layers"][0]["primes"][0] = 97; }).find("its primes or offsets are not those"),
            std::string::npos);
  EXPECT_NE(broken([](nlohmann::json& j) {
              j["token_map"][5] = 256;
            }).find("sends token 5 to 256, outside [0, engram_compressed_vocab_size 256)"),
            std::string::npos);
  EXPECT_NE(broken([](nlohmann::json& j) { j["pad_id"] = 0; }).find("'pad_id' must be the token map's id of engram_pad_id 2"),
            std::string::npos);
  EXPECT_NE(broken([](nlohmann::json& j) { j["layers"].erase(1); }).find("'layers' must hold one entry per Engram layer (2)"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::rt

namespace tandem::rt {
namespace {

// numpy's default_rng(seed).integers(0, high), reproduced: against numpy's own draws
// (tests/reference/numpy_random_golden.py).
TEST(Engram, NumpyIntegersAreNumpysDraws) {
  std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/tests/reference/golden/numpy_random.json");
  ASSERT_TRUE(in) << "tests/reference/golden/numpy_random.json is missing";
  const nlohmann::json golden = nlohmann::json::parse(in);
  for (const auto& d : golden.at("draws")) {
    const std::vector<std::int64_t> expected = d.at("values");
    EXPECT_EQ(NumpyIntegers(d.at("seed").get<std::uint64_t>(), d.at("high").get<std::int64_t>(), static_cast<int>(expected.size())),
              expected)
        << "seed " << d.at("seed");
  }
}

// init-model writes the same constants as models/v41/engram_constants.py --stub.
TEST(Engram, SyntheticCheckpointsCarryTheReferencesConstants) {
  const nlohmann::json golden = Golden();
  const auto dir = testing::TempDir("v41-engram-init");
  WriteV41SyntheticCheckpoint("v41-tiny", 1, dir);
  nlohmann::json written = nlohmann::json::parse(testing::ReadFile(dir / "engram.json"));
  nlohmann::json expected = golden.at("engram_json");
  written.erase("source");
  expected.erase("source");
  EXPECT_EQ(written, expected);
}

}  // namespace
}  // namespace tandem::rt
