#include "runtime/model/engram_constants.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/model/engram_layout.hpp"
#include "runtime/model/json_bounds.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/numpy_random.hpp"
#include "runtime/model/text_file.hpp"
#include "runtime/model/v41_config.hpp"

namespace tandem::rt {

namespace {

using nlohmann::json;

std::vector<std::int64_t> Int64s(const json& doc, const char* key, const std::string& where) {
  const auto it = doc.find(key);
  if (it == doc.end() || !it->is_array()) throw ModelError(fmt::format("{}: '{}' must be a list of integers", where, key));
  std::vector<std::int64_t> out;
  out.reserve(it->size());
  for (const json& v : *it) {
    if (!v.is_number_integer()) throw ModelError(fmt::format("{}: '{}' holds {}, not an integer", where, key, v.dump()));
    out.push_back(v.get<std::int64_t>());
  }
  return out;
}

}  // namespace

EngramConstants LoadEngramConstants(const std::filesystem::path& dir, const V41Config& c) {
  const std::filesystem::path path = dir / "engram.json";
  if (!std::filesystem::exists(path)) {
    throw ModelError(
        fmt::format("{}: missing: the Engram constants are written by models/v41/engram_constants.py {} --tokenizer DIR "
                    "(a real checkpoint's; `tandem-rt init-model` writes a synthetic preset's)",
                    path.string(), dir.string()));
  }
  return ParseEngramConstants(ReadTextFile(path), c, path.string());
}

EngramConstants ParseEngramConstants(std::string_view text, const V41Config& c, std::string_view source) {
  const std::string where(source);
  // A token map per vocabulary entry (129 280 for DeepSeek V4.1), a few levels of nesting.
  if (FindJsonExcess(text, JsonBounds{.max_depth = 8, .max_object_members = 64, .max_array_elements = std::size_t{1} << 22})) {
    throw ModelError(fmt::format("{}: nested or sized beyond limits (8 levels, 64 keys an object, 2^22 elements an array)", where));
  }
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw ModelError(fmt::format("{}: not valid JSON: {}", where, e.what()));
  }
  if (!doc.is_object()) throw ModelError(fmt::format("{}: must be a JSON object", where));
  EngramConstants out;
  out.token_map = Int64s(doc, "token_map", where);
  if (out.token_map.size() != static_cast<std::size_t>(c.vocab_size)) {
    throw ModelError(fmt::format("{}: the token map has {} entries; the vocabulary has {}", where, out.token_map.size(), c.vocab_size));
  }
  for (std::size_t t = 0; t < out.token_map.size(); ++t) {
    if (out.token_map[t] < 0 || out.token_map[t] >= c.engram_compressed_vocab_size) {
      throw ModelError(fmt::format("{}: the token map sends token {} to {}, outside [0, engram_compressed_vocab_size {})", where, t,
                                   out.token_map[t], c.engram_compressed_vocab_size));
    }
  }
  const auto pad = doc.find("pad_id");
  if (pad == doc.end() || !pad->is_number_integer() ||
      pad->get<std::int64_t>() != out.token_map[static_cast<std::size_t>(c.engram_pad_id)]) {
    throw ModelError(fmt::format("{}: 'pad_id' must be the token map's id of engram_pad_id {}", where, c.engram_pad_id));
  }
  out.pad_id = pad->get<std::int64_t>();
  const std::vector<EngramLayerLayout> layout = EngramLayout(c);
  const auto layers = doc.find("layers");
  if (layers == doc.end() || !layers->is_array() || layers->size() != layout.size()) {
    throw ModelError(fmt::format("{}: 'layers' must hold one entry per Engram layer ({})", where, layout.size()));
  }
  // No product of a compressed id and a multiplier may overflow.
  const std::int64_t largest = std::numeric_limits<std::int64_t>::max() / c.engram_compressed_vocab_size;
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const json& l = (*layers)[i];
    const std::string at = fmt::format("{}: layers[{}]", where, i);
    if (!l.is_object()) throw ModelError(fmt::format("{} must be an object", at));
    EngramLayerConstants k;
    k.layer = l.value("layer", -1);
    k.multipliers = Int64s(l, "multipliers", at);
    k.primes = Int64s(l, "primes", at);
    k.offsets = Int64s(l, "offsets", at);
    if (k.layer != layout[i].layer) throw ModelError(fmt::format("{} is layer {}; engram_layer_ids says {}", at, k.layer, layout[i].layer));
    if (k.primes != layout[i].primes || k.offsets != layout[i].offsets) {
      throw ModelError(
          fmt::format("{}: its primes or offsets are not those engram_vocab_size, engram_n_heads and "
                      "engram_max_ngram_size give",
                      at));
    }
    if (k.multipliers.size() != static_cast<std::size_t>(c.engram_max_ngram_size)) {
      throw ModelError(fmt::format("{}: {} multipliers; engram_max_ngram_size is {}", at, k.multipliers.size(), c.engram_max_ngram_size));
    }
    for (std::int64_t m : k.multipliers) {
      if (m <= 0 || m % 2 == 0 || m > largest) {
        throw ModelError(fmt::format("{}: multiplier {} is not an odd number in [1, {}]", at, m, largest));
      }
    }
    out.layers.push_back(std::move(k));
  }
  return out;
}

void WriteStubEngramConstants(const std::filesystem::path& dir, const V41Config& c) {
  if (c.engram_compressed_vocab_size * 2 != c.vocab_size) {
    throw ModelError(fmt::format("the stub token map (t → t / 2) needs engram_compressed_vocab_size = vocab_size / 2, not {} for {}",
                                 c.engram_compressed_vocab_size, c.vocab_size));
  }
  const std::int64_t bound = std::max<std::int64_t>(1, (std::numeric_limits<std::int64_t>::max() / c.engram_compressed_vocab_size) / 2);
  json layers = json::array();
  for (const EngramLayerLayout& l : EngramLayout(c)) {
    std::vector<std::int64_t> multipliers;
    for (const std::int64_t v :
         NumpyIntegers(static_cast<std::uint64_t>(10007) * static_cast<std::uint64_t>(l.layer), bound, c.engram_max_ngram_size)) {
      multipliers.push_back(2 * v + 1);
    }
    layers.push_back({{"layer", l.layer}, {"multipliers", multipliers}, {"primes", l.primes}, {"offsets", l.offsets}});
  }
  std::vector<std::int64_t> map;
  for (int t = 0; t < c.vocab_size; ++t) map.push_back(t / 2);
  const json doc = {{"source", "tandem-rt init-model (the reference's small test tokenizer)"},
                    {"pad_id", map[static_cast<std::size_t>(c.engram_pad_id)]},
                    {"compressed_vocab_size", c.engram_compressed_vocab_size},
                    {"layers", layers},
                    {"token_map", map}};
  WriteTextFile(dir / "engram.json", doc.dump() + "\n");
}

}  // namespace tandem::rt
