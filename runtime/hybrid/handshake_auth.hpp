#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

// The handshake's proof of a shared worker token (docs/wire-protocol.md, "Authentication"):
// neither side ever sends the token. The worker's Challenge carries a fresh random nonce,
// the coordinator's Hello another; each side proves it holds the token with an
// HMAC-SHA256 over both nonces, under a label of its own role so that one side's proof can
// never be replayed as the other's, and fresh nonces make every recorded proof useless on
// a later connection.
namespace tandem::rt {

constexpr std::size_t kNonceBytes = 32;
using Nonce = std::array<std::uint8_t, kNonceBytes>;
using Mac = std::array<std::uint8_t, 32>;  // HMAC-SHA256

// From the system's CSPRNG (OpenSSL RAND_bytes); throws std::runtime_error if it fails.
Nonce NewNonce();

// What the coordinator sends in its Hello, and what the worker sends in its HelloAck.
Mac CoordinatorProof(const std::string& token, const Nonce& worker_nonce, const Nonce& coordinator_nonce);
Mac WorkerProof(const std::string& token, const Nonce& worker_nonce, const Nonce& coordinator_nonce);

// Constant time (CRYPTO_memcmp): how much of a forged proof matched never shows in timing.
bool SameMac(const Mac& a, const Mac& b);

// Lower-case hex, and its inverse for exactly `out.size()` bytes (nullopt otherwise).
std::string ToHex(std::span<const std::uint8_t> bytes);
template <std::size_t N>
std::optional<std::array<std::uint8_t, N>> FromHex(const std::string& text);

}  // namespace tandem::rt
