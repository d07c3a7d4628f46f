#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/cli/commands.hpp"
#include "runtime/model/gguf_export.hpp"

namespace tandem::rt::cli {

namespace {

constexpr const char* kFooter = R"(
Writes the checkpoint as one GGUF file (version 3) that llama.cpp-family runtimes load:
architecture `deepseek2`, their tensor names (token_embd, blk.N.attn_q_a, attn_kv_a_mqa,
attn_kv_b, ffn_*_exps stacked per layer, ffn_*_shexp, exp_probs_b.bias, output, ...),
the hyperparameters (MLA ranks, expert counts and gating, YaRN) and the BPE tokenizer
(tokenizer.json; chat template and add_bos_token from tokenizer_config.json).

--type sets the weight matrices' type; the router gate (ffn_gate_inp) and the 1-D
tensors (norms, correction biases) are F32 in every type, and a matrix whose rows are
not whole 32-value blocks is F32 under q8_0/q4_0. Q8_0 and Q4_0 blocks are encoded as
ggml's reference quantizers encode them. Inputs may be bf16, f16, f32, fp8 with block
scales or a `tandem-rt quantize` output (its values are dequantized, then encoded).
The MTP layers are not written (llama.cpp's converter leaves them out too). Runtimes
of that family route with plain top-k over all experts: a model with n_group > 1 gets
expert_group_count / expert_group_used_count, which only runtimes that read them apply.
The file is written as OUT.partial and renamed when complete.)";

}  // namespace

void AddExportCommand(CLI::App& app) {
  struct Options {
    std::string format;
    std::string in;
    std::string out;
    std::string type = "bf16";
    std::string pre = "deepseek-v3";
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("export", "Write a checkpoint in another runtime's format (GGUF, for llama.cpp-family runtimes)");
  cmd->add_option("--format", opt->format, "Output format")->required()->check(CLI::IsMember({"gguf"}));
  cmd->add_option("--in", opt->in, "Input checkpoint directory")->required();
  cmd->add_option("--out", opt->out, "Output file (must not exist)")->required();
  cmd->add_option("--type", opt->type, "Weight matrices as f32, f16, bf16, q8_0 or q4_0")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0"}));
  cmd->add_option("--tokenizer-pre", opt->pre, "tokenizer.ggml.pre: the pre-tokenizer the reading runtime applies")->capture_default_str();
  cmd->footer(kFooter);
  cmd->callback([opt] {
    GgufExportOptions options;
    options.matrix_type = GgmlTypeFromName(opt->type);
    options.tokenizer_pre = opt->pre;
    const GgufExportReport r = ExportGguf(opt->in, opt->out, options, [](const std::string& line) { fmt::print("{}\n", line); });
    fmt::print("wrote {}: {} tensors, {:.1f} MB of data, weight matrices {}\n", opt->out, r.tensors,
               static_cast<double>(r.data_bytes) / 1e6, opt->type);
    if (!r.skipped.empty()) fmt::print("not written: {}\n", fmt::join(r.skipped, ", "));
  });
}

}  // namespace tandem::rt::cli
