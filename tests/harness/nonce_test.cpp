// Nonce markers: unique first tokens among a session's requests, a pure function of
// (workload, seed, position), and really the first token of the encoded prompt.
#include "harness/campaign/nonce.hpp"

#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "common/input_error.hpp"
#include "runtime/model/tokenizer.hpp"
#include "tests/support/run_command.hpp"

namespace tandem::harness {
namespace {

// The tiny preset's tokenizer, written once per test binary run.
const rt::Tokenizer& TinyTokenizer() {
  static const rt::Tokenizer tokenizer = [] {
    const auto dir = std::filesystem::temp_directory_path() / ("tandem-nonce-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    const auto r = testing::RunCommand(TANDEM_RT_BIN, {"init-model", "--preset", "tiny", "--seed", "5", "--out", dir.string()});
    if (r.exit_code != 0) throw std::runtime_error(r.err);
    rt::Tokenizer t = rt::Tokenizer::Load(dir / "tokenizer.json");
    std::filesystem::remove_all(dir);
    return t;
  }();
  return tokenizer;
}

TEST(NonceBook, MarkersAreUniqueAcrossWorkloadsAndPositions) {
  const NonceBook book(TinyTokenizer(), 3);
  ASSERT_GE(book.per_workload(), 16u);
  std::set<rt::TokenId> tokens;
  std::set<std::string> markers;
  for (int w = 0; w < 3; ++w) {
    for (std::uint64_t p = 0; p < book.per_workload(); ++p) {
      EXPECT_TRUE(tokens.insert(book.MarkerToken(w, 11 + static_cast<std::uint64_t>(w), p)).second) << w << " " << p;
      EXPECT_TRUE(markers.insert(book.Marker(w, 11 + static_cast<std::uint64_t>(w), p)).second);
    }
  }
}

TEST(NonceBook, SameInputsSameMarkerAndSeedsPermute) {
  const NonceBook one(TinyTokenizer(), 2);
  const NonceBook two(TinyTokenizer(), 2);  // a fresh book (a replay in another process)
  int moved = 0;
  for (std::uint64_t p = 0; p < 16; ++p) {
    EXPECT_EQ(one.Marker(1, 42, p), two.Marker(1, 42, p));
    moved += one.Marker(1, 42, p) != one.Marker(1, 43, p) ? 1 : 0;
  }
  EXPECT_GT(moved, 8);  // another seed is another permutation
}

TEST(NonceBook, TheMarkerIsThePromptsFirstToken) {
  const NonceBook book(TinyTokenizer(), 1);
  for (std::uint64_t p = 0; p < 32; ++p) {
    const std::string prompt = book.Marker(0, 9, p) + "Write a fable about a lighthouse.";
    const std::vector<rt::TokenId> ids = TinyTokenizer().Encode(prompt);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), book.MarkerToken(0, 9, p)) << prompt;
  }
}

TEST(NonceBook, PositionBeyondTheRangeIsAnError) {
  const NonceBook book(TinyTokenizer(), 4);
  EXPECT_THROW(book.Marker(0, 1, book.per_workload()), InputError);
  EXPECT_THROW(book.Marker(4, 1, 0), InputError);
}

}  // namespace
}  // namespace tandem::harness
