#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX

namespace tandem {

// An incremental SHA-256 (OpenSSL's): Update as the bytes come, then HexDigest once.
class Sha256 {
 public:
  Sha256();  // throws std::runtime_error when OpenSSL cannot set one up
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, std::size_t size);
  void Update(std::string_view bytes) { Update(bytes.data(), bytes.size()); }
  std::string HexDigest();  // lower-case hex; the hash is finished after it

 private:
  struct Free {
    void operator()(evp_md_ctx_st* ctx) const;
  };
  std::unique_ptr<evp_md_ctx_st, Free> ctx_;
};

// Lower-case hex SHA-256 of bytes, and of a file's contents (image ids). FileSha256
// throws InputError naming a file it cannot read.
std::string Sha256Hex(std::string_view bytes);
std::string FileSha256(const std::filesystem::path& file);

}  // namespace tandem
