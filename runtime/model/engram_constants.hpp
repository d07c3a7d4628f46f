#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

namespace tandem::rt {

struct V41Config;

// The constants of a DeepSeek V4.1 checkpoint's Engram layers, from its sidecar
// engram.json (written by models/v41/engram_constants.py, as the reference generates
// them): per layer the hash multipliers (one per n-gram position), the primes of its
// table heads and where their rows start; the token map and the pad id.
struct EngramLayerConstants {
  int layer = 0;
  std::vector<std::int64_t> multipliers;  // [max_ngram]
  std::vector<std::int64_t> primes;       // [(max_ngram − 1) · heads]
  std::vector<std::int64_t> offsets;      // the same length
};

struct EngramConstants {
  std::vector<EngramLayerConstants> layers;  // in engram_layer_ids order
  std::vector<std::int64_t> token_map;       // raw token id → compressed id
  std::int64_t pad_id = 0;                   // compressed
};

// Reads DIR/engram.json and checks it against the configuration: a layer per Engram
// layer, its primes and offsets those of EngramLayout, multipliers odd and small enough
// that no product of a compressed id overflows, a token map over the vocabulary onto
// [0, engram_compressed_vocab_size). Throws ModelError naming the file and what is wrong
// (a missing file: which script writes it).
EngramConstants LoadEngramConstants(const std::filesystem::path& dir, const V41Config& config);
// The same from the file's text (`source` names it in errors); its nesting and sizes bounded.
EngramConstants ParseEngramConstants(std::string_view text, const V41Config& config, std::string_view source);

// Writes DIR/engram.json for a synthetic checkpoint whose tokenizer is the reference's small
// test stub (token t → compressed id t / 2: engram_compressed_vocab_size = vocab_size / 2): the
// primes and offsets of EngramLayout, and the multipliers numpy draws for the reference
// (default_rng(10007 · layer), NumpyIntegers) — what `models/v41/engram_constants.py --stub`
// computes. Throws ModelError when the configuration is not such a stub's.
void WriteStubEngramConstants(const std::filesystem::path& dir, const V41Config& config);

}  // namespace tandem::rt
