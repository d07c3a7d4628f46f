// The SHA-256 and secret tokens both products use (common/): FIPS 180-2's known answers,
// the incremental hash fed in pieces equal to the one-shot one, and tokens of 64 hex digits
// that differ.
#include "common/sha256.hpp"

#include <string>

#include <gtest/gtest.h>

#include "common/secret_token.hpp"

namespace tandem {
namespace {

TEST(Sha256, KnownAnswersWholeAndInPieces) {
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(two_blocks), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  for (std::size_t cut = 0; cut <= two_blocks.size(); cut += 7) {
    Sha256 hash;
    hash.Update(std::string_view(two_blocks).substr(0, cut));
    hash.Update(std::string_view(two_blocks).substr(cut));
    EXPECT_EQ(hash.HexDigest(), Sha256Hex(two_blocks)) << "cut at " << cut;
  }
}

TEST(SecretToken, SixtyFourHexDigitsEachTimeNew) {
  const std::string a = NewSecretToken(), b = NewSecretToken();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace tandem
