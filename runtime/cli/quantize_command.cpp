#include <memory>
#include <stdexcept>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/cli/commands.hpp"
#include "runtime/model/model_revision.hpp"
#include "runtime/model/quantize_checkpoint.hpp"

namespace tandem::rt::cli {

namespace {

constexpr const char* kFooter = R"(
The routed experts (model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight, the
MTP layer's included) are quantized, and with --experts all the shared experts
(model.layers.L.mlp.shared_experts.*) too. --layers all quantizes every linear layer:
the experts (routed and shared), attention's q_a/q_b (or q), kv_a, kv_b and o
projections, dense MLPs, the MTP layer's eh_proj and head, and lm_head; not the
router's gate (kept for routing precision); --embedding adds the token embeddings. A non-expert matrix whose rows are
not whole groups stays as stored (listed). Every other tensor is copied unchanged
(fp8 ones with their weight_scale_inv), and so are the other top-level files
(tokenizer.json, tokenizer_config.json, ...). A quantized W [rows x cols] stored as
X.weight becomes
  X.qweight  int8: I8 [rows, cols]; int4: U8 [rows, cols/2], two's-complement
             nibbles, the low nibble holds the even column
  X.qscales  F32 [rows, cols/group]
symmetric per group of `group` consecutive values of a row: w = q * scale with
q in [-127, 127] (int8) or [-7, 7] (int4), scale = max|w| / 127 (or / 7).
config.json gains "tandem_quantization": {"format", "group_size", "tensors":
"routed_experts", "experts" or "linear", and "embedding": true with --embedding}, so the
model revision changes. Sharded inputs give one output file per input file, with
model.safetensors.index.json rewritten. The output is written into a temporary
directory next to --out and renamed when complete.)";

}  // namespace

void AddQuantizeCommand(CLI::App& app) {
  struct Options {
    std::string in;
    std::string out;
    std::string format;
    int group = 32;
    std::string experts = "routed";
    std::string layers = "experts";
    bool embedding = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("quantize", "Write a copy of a checkpoint with its experts or every linear layer group-quantized (int8 or int4)");
  cmd->add_option("--in", opt->in, "Input checkpoint directory")->required();
  cmd->add_option("--out", opt->out, "Output checkpoint directory (must not exist, or be empty)")->required();
  cmd->add_option("--format", opt->format, "int8 or int4")->required()->check(CLI::IsMember({"int8", "int4"}));
  cmd->add_option("--group", opt->group, "Values per scale, along a row")->capture_default_str()->check(CLI::IsMember({32, 64, 128}));
  auto* experts = cmd->add_option("--experts", opt->experts, "routed: the routed experts; all: the shared experts too")
                      ->capture_default_str()
                      ->check(CLI::IsMember({"routed", "all"}));
  cmd->add_option("--layers", opt->layers, "experts: the experts only (as --experts says); all: every linear layer but the router")
      ->capture_default_str()
      ->check(CLI::IsMember({"experts", "all"}));
  cmd->add_flag("--embedding", opt->embedding, "Quantize the token embeddings too");
  cmd->footer(kFooter);
  cmd->callback([opt, experts] {
    if (opt->layers == "all" && experts->count() > 0 && opt->experts == "routed") {
      throw std::invalid_argument("--layers all quantizes the shared experts too; drop --experts routed");
    }
    CheckpointQuantization what;
    what.format = opt->format == "int4" ? QuantFormat::kInt4 : QuantFormat::kInt8;
    what.group_size = opt->group;
    what.tensors = opt->layers == "all"    ? QuantizedTensors::kLinear
                   : opt->experts == "all" ? QuantizedTensors::kExperts
                                           : QuantizedTensors::kRoutedExperts;
    what.embedding = opt->embedding;
    const QuantizeCheckpointReport r =
        QuantizeCheckpoint(opt->in, opt->out, what, [](const std::string& line) { fmt::print("{}\n", line); });
    fmt::print("wrote {}: {} matrices {} (group {}, tensors {}{}), {:.1f} MB -> {:.1f} MB; {} other tensors copied; {:.1f} MB of weights\n",
               opt->out, r.quantized_matrices, opt->format, opt->group, ToString(what.tensors), what.embedding ? " and embeddings" : "",
               static_cast<double>(r.quantized_bytes_in) / 1e6, static_cast<double>(r.quantized_bytes_out) / 1e6, r.copied_tensors,
               static_cast<double>(r.weight_bytes_out) / 1e6);
    if (!r.left_unquantized.empty()) fmt::print("left as stored (rows not whole groups): {}\n", fmt::join(r.left_unquantized, ", "));
    if (!r.copied_files.empty()) fmt::print("copied {}\n", fmt::join(r.copied_files, ", "));
    if (!r.skipped.empty()) fmt::print("not copied (directories): {}\n", fmt::join(r.skipped, ", "));
    fmt::print("revision {}\n", ModelRevision(opt->out));
  });
}

}  // namespace tandem::rt::cli
