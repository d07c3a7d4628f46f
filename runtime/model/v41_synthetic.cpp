#include "runtime/model/v41_synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/model/engram_constants.hpp"
#include "runtime/model/engram_layout.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/model/seeded_stream.hpp"
#include "runtime/model/synthetic_tokenizer.hpp"
#include "runtime/model/text_file.hpp"
#include "runtime/model/v41_tensors.hpp"
#include "runtime/numeric/dtype.hpp"
#include "runtime/numeric/microscaling.hpp"

namespace tandem::rt {

namespace {

V41Config Tiny() {
  V41Config c;
  c.vocab_size = 512;
  c.dim = 256;
  c.moe_inter_dim = 128;
  c.n_layers = 6;
  c.n_mtp_layers = 1;
  c.n_heads = 4;
  c.n_routed_experts = 4;
  c.n_activated_experts = 2;
  c.route_scale = 1.5;
  c.swiglu_limit = 10.0;
  c.q_lora_rank = 64;
  c.head_dim = 64;
  c.rope_head_dim = 16;
  c.o_groups = 2;
  c.o_lora_rank = 64;
  c.window_size = 16;
  c.compress_ratios = {0, 2, 2, 1, 1, 1, 0};
  c.kv_source_layers = {1, 3};
  c.index_source_layers = {1, 3, 5};
  c.compress_rope_theta = 160000.0;
  c.original_seq_len = 32;
  c.rope_factor = 4;
  c.index_n_heads = 4;
  c.index_head_dim = 64;
  c.index_topk = 8;
  c.candidate_source_layer = 3;
  c.candidate_topk_blocks = 3;
  c.candidate_block_size = 4;
  c.hc_mult = 4;
  c.hc_sinkhorn_iters = 20;
  c.engram_layer_ids = {0, 1};
  c.engram_max_ngram_size = 4;
  c.engram_vocab_size = 100;
  c.engram_n_heads = 2;
  c.engram_head_dim = 32;
  c.engram_compressed_vocab_size = 256;
  c.dspark_block_size = 2;
  c.dspark_noise_token_id = 511;
  c.dspark_target_layer_ids = {4, 5};
  c.dspark_markov_rank = 32;
  c.max_position_embeddings = 4096;
  return c;
}

V41Config Small() {
  V41Config c = Tiny();
  c.vocab_size = 1024;
  c.dim = 512;
  c.moe_inter_dim = 256;
  c.n_layers = 8;
  c.n_mtp_layers = 2;
  c.n_heads = 8;
  c.n_routed_experts = 8;
  c.q_lora_rank = 128;
  c.head_dim = 128;
  c.rope_head_dim = 32;
  c.o_groups = 4;
  c.o_lora_rank = 128;
  c.window_size = 32;
  c.compress_ratios = {0, 2, 2, 2, 1, 1, 1, 1, 0, 0};
  c.kv_source_layers = {1, 4};
  c.index_source_layers = {1, 4, 6};
  c.original_seq_len = 64;
  c.index_topk = 16;
  c.candidate_source_layer = 4;
  c.candidate_topk_blocks = 4;
  c.candidate_block_size = 8;
  c.engram_layer_ids = {0, 2};
  c.engram_vocab_size = 1000;
  c.engram_n_heads = 4;
  c.engram_compressed_vocab_size = 512;
  c.dspark_block_size = 3;
  c.dspark_noise_token_id = 1023;
  c.dspark_target_layer_ids = {6, 7};
  c.dspark_n_routed_experts = 4;
  return c;
}

// Draws `n` values of standard deviation `std` (uniform) into `out`.
void Draw(std::uint64_t& state, double std, std::int64_t n, std::vector<float>& out) {
  const double a = std::sqrt(3.0) * std;
  out.resize(static_cast<std::size_t>(n));
  for (float& v : out) v = static_cast<float>(a * NextSymmetric(state));
}

std::uint8_t E8M0Of(float scale) { return static_cast<std::uint8_t>((std::bit_cast<std::uint32_t>(scale) >> 23) & 0xffu); }

// A power-of-two scale that maps `amax` to at most `max`.
float Pow2Scale(float amax, float max) { return RoundScalePow2(std::max(amax, 1e-30f), 1.0f / max); }

class Generator {
 public:
  Generator(const V41Config& c, std::uint64_t seed) : seed_(seed), residual_(1.0 / std::sqrt(2.0 * c.n_layers)) {}

  // The bytes of every tensor, a weight and its scale made together.
  void Make(const V41Tensor& t, std::map<std::string, std::vector<char>>& out) {
    if (out.contains(t.name)) return;
    const std::string& n = t.name;
    if (t.dtype == DType::kF8E8M0) return;  // made with its weight
    std::uint64_t state = StreamSeed(seed_, n);
    const std::int64_t rows = t.shape[0], cols = t.shape.size() > 1 ? t.shape[1] : 1;
    std::vector<float> v;
    if (t.dtype == DType::kF8E4M3) {
      const bool table = n.ends_with("engram.embed.weight");
      Draw(state, table ? 1.0 : Std(n, cols), rows * cols, v);
      const std::string base = n.substr(0, n.size() - std::string(".weight").size());
      Fp8(v, rows, cols, table, out[n], out[base + ".scale"]);
      return;
    }
    if (t.dtype == DType::kI8) {  // FP4, two a byte
      const std::int64_t in = cols * 2;
      Draw(state, Std(n, in), rows * in, v);
      const std::string base = n.substr(0, n.size() - std::string(".weight").size());
      Fp4(v, rows, in, out[n], out[base + ".scale"]);
      return;
    }
    std::int64_t count = 1;
    for (std::int64_t d : t.shape) count *= d;
    if (n.ends_with("norm.weight") || n.ends_with("q_weight") || n.ends_with("k_weight")) {
      Draw(state, 0.1 / std::sqrt(3.0), count, v);
      for (float& x : v) x += 1.0f;
    } else if (n.ends_with("_scale")) {
      Draw(state, 0.1, count, v);
      for (float& x : v) x += 1.0f;
    } else if (n.ends_with("_base") || n.ends_with("attn_sink")) {
      Draw(state, 0.5, count, v);
    } else if (n.ends_with("gate.bias")) {
      Draw(state, 0.05, count, v);
    } else if (n.ends_with("embed.weight")) {
      Draw(state, 1.0, count, v);
    } else {
      Draw(state, Std(n, cols), count, v);
    }
    std::vector<char>& bytes = out[n];
    bytes.resize(static_cast<std::size_t>(count) * DTypeSize(t.dtype));
    for (std::int64_t i = 0; i < count; ++i) {
      if (t.dtype == DType::kF32) {
        std::memcpy(bytes.data() + 4 * i, &v[static_cast<std::size_t>(i)], 4);
      } else {
        const std::uint16_t b = F32ToBf16(v[static_cast<std::size_t>(i)]);
        std::memcpy(bytes.data() + 2 * i, &b, 2);
      }
    }
  }

 private:
  // 1/sqrt(fan_in); the residual stream's writers scaled down with depth.
  double Std(const std::string& name, std::int64_t fan_in) const {
    const bool residual = name.ends_with("wo_b.weight") || name.ends_with(".w2.weight") || name.ends_with("engram.wkv.weight");
    const double hc = name.find("hc_") != std::string::npos ? 0.5 : 1.0;
    return hc * (residual ? residual_ : 1.0) / std::sqrt(static_cast<double>(fan_in));
  }

  // E4M3 codes with an E8M0 scale per 32×32 block (per row and 32 columns for a table).
  static void Fp8(const std::vector<float>& v, std::int64_t rows, std::int64_t cols, bool table, std::vector<char>& codes,
                  std::vector<char>& scales) {
    const std::int64_t row_blocks = table ? rows : (rows + 31) / 32, col_blocks = (cols + 31) / 32;
    codes.resize(static_cast<std::size_t>(rows * cols));
    scales.resize(static_cast<std::size_t>(row_blocks * col_blocks));
    for (std::int64_t rb = 0; rb < row_blocks; ++rb) {
      const std::int64_t r0 = table ? rb : rb * 32, r1 = table ? rb + 1 : std::min(rows, r0 + 32);
      for (std::int64_t cb = 0; cb < col_blocks; ++cb) {
        const std::int64_t c0 = cb * 32, c1 = std::min(cols, c0 + 32);
        float amax = 0.0f;
        for (std::int64_t r = r0; r < r1; ++r)
          for (std::int64_t k = c0; k < c1; ++k) amax = std::max(amax, std::fabs(v[static_cast<std::size_t>(r * cols + k)]));
        const float s = Pow2Scale(amax, 448.0f);
        scales[static_cast<std::size_t>(rb * col_blocks + cb)] = static_cast<char>(E8M0Of(s));
        for (std::int64_t r = r0; r < r1; ++r)
          for (std::int64_t k = c0; k < c1; ++k)
            codes[static_cast<std::size_t>(r * cols + k)] = static_cast<char>(F32ToF8E4M3(v[static_cast<std::size_t>(r * cols + k)] / s));
      }
    }
  }

  // E2M1 pairs (the even value low) with an E8M0 scale per row and 32 inputs.
  static void Fp4(const std::vector<float>& v, std::int64_t rows, std::int64_t in, std::vector<char>& packed, std::vector<char>& scales) {
    packed.assign(static_cast<std::size_t>(rows * in / 2), 0);
    scales.resize(static_cast<std::size_t>(rows * ((in + 31) / 32)));
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t cb = 0; cb * 32 < in; ++cb) {
        float amax = 0.0f;
        for (std::int64_t k = cb * 32; k < std::min(in, cb * 32 + 32); ++k)
          amax = std::max(amax, std::fabs(v[static_cast<std::size_t>(r * in + k)]));
        const float s = Pow2Scale(amax, 6.0f);
        scales[static_cast<std::size_t>(r * ((in + 31) / 32) + cb)] = static_cast<char>(E8M0Of(s));
        for (std::int64_t k = cb * 32; k < std::min(in, cb * 32 + 32); ++k) {
          const std::uint8_t nibble = F32ToE2M1(v[static_cast<std::size_t>(r * in + k)] / s);
          auto& byte = reinterpret_cast<std::uint8_t&>(packed[static_cast<std::size_t>((r * in + k) / 2)]);
          byte = static_cast<std::uint8_t>(k % 2 == 0 ? (byte & 0xf0u) | nibble : (byte & 0x0fu) | (nibble << 4));
        }
      }
    }
  }

  std::uint64_t seed_;
  double residual_;
};

}  // namespace

bool IsV41Preset(const std::string& name) { return name == "v41-tiny" || name == "v41-small"; }

V41Config V41Preset(const std::string& name) {
  V41Config c;
  if (name == "v41-tiny") {
    c = Tiny();
  } else if (name == "v41-small") {
    c = Small();
  } else {
    throw ModelError(fmt::format("unknown DeepSeek V4.1 preset '{}' (v41-tiny, v41-small)", name));
  }
  c.engram_num_embeddings.clear();
  for (const EngramLayerLayout& l : EngramLayout(c)) c.engram_num_embeddings.push_back(l.rows);
  // The same checks a loaded config gets.
  return ParseV41Config(V41ConfigJson(c), "preset " + name);
}

V41SyntheticReport WriteV41SyntheticCheckpoint(const std::string& preset, std::uint64_t seed, const std::filesystem::path& out_dir) {
  return WriteV41SyntheticCheckpoint(preset, seed, out_dir, DefaultTokenizerSource());
}

V41SyntheticReport WriteV41SyntheticCheckpoint(const std::string& preset, std::uint64_t seed, const std::filesystem::path& out_dir,
                                               const std::filesystem::path& tokenizer_source) {
  V41SyntheticReport report;
  report.config = V41Preset(preset);
  const V41Config& c = report.config;
  std::filesystem::create_directories(out_dir / "inference");
  const std::string args = V41ConfigJson(c);
  WriteTextFile(out_dir / "inference" / "config.json", args + "\n");
  nlohmann::json config = {{"architectures", {"DeepseekV41ForCausalLM"}},
                           {"model_type", "deepseek_v41"},
                           {"text_config", nlohmann::json::parse(args)},
                           {"tandem_preset", preset}};
  WriteTextFile(out_dir / "config.json", config.dump(1) + "\n");
  const std::vector<V41Tensor> tensors = V41Tensors(c);
  SafetensorsWriter writer;
  for (const V41Tensor& t : tensors) writer.Add(t.name, t.dtype, t.shape);
  writer.SetMetadata("tandem_preset", preset);
  writer.SetMetadata("tandem_seed", std::to_string(seed));
  std::map<std::string, V41Tensor> by_name;
  for (const V41Tensor& t : tensors) by_name.emplace(t.name, t);
  Generator generator(c, seed);
  std::map<std::string, std::vector<char>> made;  // a weight and its scale, until both are written
  writer.Write(out_dir / "model.safetensors", [&](const std::string& name) -> std::span<const std::byte> {
    const V41Tensor& t = by_name.at(name);
    if (t.dtype == DType::kF8E8M0) {
      const std::string weight = name.substr(0, name.size() - std::string(".scale").size()) + ".weight";
      generator.Make(by_name.at(weight), made);
    } else {
      generator.Make(t, made);
    }
    const std::vector<char>& bytes = made.at(name);
    return {reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()};
  });
  report.weight_bytes = writer.DataBytes();
  report.tensors = tensors.size();
  // As many merges as leave the tokenizer exactly the model's vocabulary (bytes, merges,
  // then the named added tokens; BOS 0 and EOS 1 as in DeepSeek's).
  const SyntheticTokenizerFiles probe = DeriveSyntheticTokenizer(tokenizer_source, 1);
  const int merges = c.vocab_size - (probe.vocab_size - 1);
  const SyntheticTokenizerFiles tokenizer = merges >= 1 ? DeriveSyntheticTokenizer(tokenizer_source, merges) : probe;
  if (tokenizer.vocab_size > c.vocab_size) {
    throw ModelError(
        fmt::format("preset {}: a tokenizer of {} tokens does not fit the vocabulary of {}", preset, tokenizer.vocab_size, c.vocab_size));
  }
  WriteStubEngramConstants(out_dir, c);
  WriteTextFile(out_dir / "tokenizer.json", tokenizer.tokenizer_json);
  WriteTextFile(out_dir / "tokenizer_config.json", tokenizer.tokenizer_config_json);
  report.tokenizer = tokenizer.description;
  return report;
}

}  // namespace tandem::rt
