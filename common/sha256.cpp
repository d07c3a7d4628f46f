#include "common/sha256.hpp"

#include <fstream>
#include <memory>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <openssl/evp.h>

#include "common/input_error.hpp"

namespace tandem {

namespace {

std::string Hex(const unsigned char* digest, unsigned int len) {
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

}  // namespace

void Sha256::Free::operator()(evp_md_ctx_st* ctx) const { EVP_MD_CTX_free(ctx); }

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("sha256: cannot set up OpenSSL's digest");
}

Sha256::~Sha256() = default;

void Sha256::Update(const void* data, std::size_t size) { EVP_DigestUpdate(ctx_.get(), data, size); }

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_.get(), digest, &len);
  return Hex(digest, len);
}

std::string Sha256Hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr);
  return Hex(digest, len);
}

std::string FileSha256(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot read", file.string()));
  Sha256 hash;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    hash.Update(buffer.data(), static_cast<std::size_t>(in.gcount()));
  }
  return hash.HexDigest();
}

}  // namespace tandem
