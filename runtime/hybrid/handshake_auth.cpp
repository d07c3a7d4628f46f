#include "runtime/hybrid/handshake_auth.hpp"

#include <stdexcept>
#include <string_view>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace tandem::rt {

namespace {

// HMAC-SHA256(token, label || 0 || worker nonce || coordinator nonce).
Mac Proof(std::string_view label, const std::string& token, const Nonce& worker_nonce, const Nonce& coordinator_nonce) {
  std::string message(label);
  message.push_back('\0');
  message.append(reinterpret_cast<const char*>(worker_nonce.data()), worker_nonce.size());
  message.append(reinterpret_cast<const char*>(coordinator_nonce.data()), coordinator_nonce.size());
  Mac mac{};
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()), reinterpret_cast<const unsigned char*>(message.data()),
           message.size(), mac.data(), &length) == nullptr ||
      length != mac.size()) {
    throw std::runtime_error("HMAC-SHA256 failed");
  }
  return mac;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Nonce NewNonce() {
  Nonce nonce{};
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1) throw std::runtime_error("the system's random generator failed");
  return nonce;
}

Mac CoordinatorProof(const std::string& token, const Nonce& worker_nonce, const Nonce& coordinator_nonce) {
  return Proof("tandem-rt worker token v2: coordinator", token, worker_nonce, coordinator_nonce);
}

Mac WorkerProof(const std::string& token, const Nonce& worker_nonce, const Nonce& coordinator_nonce) {
  return Proof("tandem-rt worker token v2: worker", token, worker_nonce, coordinator_nonce);
}

bool SameMac(const Mac& a, const Mac& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

std::string ToHex(std::span<const std::uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (std::uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

template <std::size_t N>
std::optional<std::array<std::uint8_t, N>> FromHex(const std::string& text) {
  if (text.size() != 2 * N) return std::nullopt;
  std::array<std::uint8_t, N> out{};
  for (std::size_t i = 0; i < N; ++i) {
    const int hi = HexDigit(text[2 * i]), lo = HexDigit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return out;
}

template std::optional<std::array<std::uint8_t, kNonceBytes>> FromHex<kNonceBytes>(const std::string&);

}  // namespace tandem::rt
