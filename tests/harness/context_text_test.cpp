// Prompts of an exact token count cut from a source text: every count lands (with a lead,
// a tail, an offset, and past the source's end, where it is cycled), and a source that
// changed since the campaign recorded its sha256 is refused.
#include "harness/traffic/context_text.hpp"

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/input_error.hpp"
#include "common/sha256.hpp"

namespace tandem::harness {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = fs::path(TANDEM_SOURCE_DIR) / "campaigns" / "context-source.txt";

rt::Tokenizer MiniTokenizer() { return rt::Tokenizer::Load(fs::path(TANDEM_SOURCE_DIR) / "models/mini/checkpoint/tokenizer.json"); }

TEST(ContextSource, EveryCountLandsExactlyWithLeadTailAndOffsetAndPastTheSourcesEnd) {
  const rt::Tokenizer tokenizer = MiniTokenizer();
  const ContextSource source = ContextSource::Load(kSource, FileSha256(kSource), tokenizer);
  const std::string lead = "marker: Read this text.\n\n", tail = "\n\nReply with one word: OK.";
  const int fixed = static_cast<int>(tokenizer.Encode(lead + tail).size());
  std::ifstream in(kSource);
  const int whole = static_cast<int>(tokenizer.Encode(std::string(std::istreambuf_iterator<char>(in), {})).size());
  int checked = 0;
  for (int tokens = fixed; tokens < fixed + 400; ++tokens) {
    for (int offset : {0, 7, 1000}) {
      const std::string text = source.Fit(lead, tokens, tail, offset);
      ASSERT_EQ(static_cast<int>(tokenizer.Encode(text).size()), tokens) << "offset " << offset;
      ASSERT_EQ(text.rfind(lead, 0), 0u);
      ASSERT_TRUE(text.ends_with(tail));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 1200);
  // Three times the source: cycled, still exact.
  for (int tokens : {3 * whole, 3 * whole + 1}) EXPECT_EQ(static_cast<int>(tokenizer.Encode(source.Fit("", tokens)).size()), tokens);
  EXPECT_EQ(source.Fit("", 0), "");
}

// Byte-level BPE splits multi-byte characters across tokens: a cut never ends or starts
// inside one (a request body must be UTF-8), and the counts still land.
TEST(ContextSource, ACutOfATextBeyondAsciiIsWholeCharacters) {
  const rt::Tokenizer tokenizer = MiniTokenizer();
  const fs::path file = fs::temp_directory_path() / fmt::format("tandem-context-utf8-{}.txt", ::getpid());
  std::ofstream(file) << "Grüße aus Köln: naïve café, crème brûlée — 東京の夜、ソウルの朝。Ελληνικά γράμματα. Ünïcödé ëvërywhérë.\n";
  const ContextSource source = ContextSource::Load(file, "", tokenizer);
  int exact = 0;
  for (int tokens = 1; tokens < 300; ++tokens) {
    for (int offset : {0, 1, 2, 3, 5}) {
      std::string text;
      try {
        text = source.Fit("", tokens, "", offset);
      } catch (const InputError& e) {
        // A few tokens cannot always be whole characters of this text: refused, not sent broken.
        ASSERT_LT(tokens, 8) << e.what();
        continue;
      }
      ASSERT_NO_THROW((void)nlohmann::json(text).dump()) << tokens << " " << offset;
      ASSERT_EQ(static_cast<int>(tokenizer.Encode(text).size()), tokens);
      ++exact;
    }
  }
  EXPECT_GE(exact, 5 * 292);  // every count from 8 tokens on lands
  std::ofstream(file, std::ios::trunc) << "caf\xC3 broken\n";
  try {
    ContextSource::Load(file, "", tokenizer);
    ADD_FAILURE() << "a source that is not UTF-8 was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is not UTF-8 text"), std::string::npos) << e.what();
  }
  fs::remove(file);
}

TEST(ContextSource, AChangedMissingOrTooShortAskIsRefusedNamingTheFile) {
  const rt::Tokenizer tokenizer = MiniTokenizer();
  const auto error = [&](auto&& f) -> std::string {
    try {
      f();
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  };
  const fs::path copy = fs::temp_directory_path() / fmt::format("tandem-context-{}.txt", ::getpid());
  fs::copy_file(kSource, copy, fs::copy_options::overwrite_existing);
  const std::string sha = FileSha256(copy);
  std::ofstream(copy, std::ios::app) << "one more line\n";
  EXPECT_NE(error([&] {
              ContextSource::Load(copy, sha, tokenizer);
            }).find(copy.string() + ": the context source changed since the campaign started"),
            std::string::npos);
  std::ofstream(copy, std::ios::trunc).flush();
  EXPECT_NE(error([&] { ContextSource::Load(copy, "", tokenizer); }).find("the context source is empty"), std::string::npos);
  fs::remove(copy);
  EXPECT_NE(error([&] { ContextSource::Load(copy, "", tokenizer); }).find("the context source cannot be read"), std::string::npos);
  const ContextSource source = ContextSource::Load(kSource, "", tokenizer);
  EXPECT_NE(error([&] { source.Fit("a lead of several tokens here", 3); }).find("its fixed part alone is"), std::string::npos)
      << error([&] { source.Fit("a lead of several tokens here", 3); });
}

}  // namespace
}  // namespace tandem::harness
