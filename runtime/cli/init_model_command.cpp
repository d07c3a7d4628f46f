#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "runtime/cli/commands.hpp"
#include "runtime/model/synthetic_checkpoint.hpp"
#include "runtime/model/synthetic_tokenizer.hpp"
#include "runtime/model/v41_synthetic.hpp"

namespace tandem::rt::cli {

void AddInitModelCommand(CLI::App& app) {
  struct Options {
    std::string preset;
    std::uint64_t seed = 0;
    std::string out;
    std::string tokenizer_source = DefaultTokenizerSource().string();
    int tokenizer_merges = 0;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("init-model", "Write a synthetic HF-layout checkpoint, bit-identical for a seed");
  cmd->add_option("--preset", opt->preset,
                  "tiny (tests) or small (demo); v41-tiny or v41-small: DeepSeek V4.1 in its official layout, with its Engram "
                  "constants (engram.json)")
      ->required()
      ->check(CLI::IsMember({"tiny", "small", "v41-tiny", "v41-small"}));
  cmd->add_option("--seed", opt->seed, "Weight seed")->required();
  cmd->add_option("--out", opt->out, "Output directory")->required();
  cmd->add_option("--tokenizer-source", opt->tokenizer_source, "Directory with the DeepSeek-V3 tokenizer.json")->capture_default_str();
  cmd->add_option("--tokenizer-merges", opt->tokenizer_merges,
                  "Keep this many DeepSeek-V3 merges instead of the preset's (tiny 2000, small 16000): the vocabulary of a "
                  "trained model (models/mini) is derived this way")
      ->check(CLI::Range(1, 1 << 20));
  cmd->callback([opt] {
    if (IsV41Preset(opt->preset)) {
      const V41SyntheticReport r = WriteV41SyntheticCheckpoint(opt->preset, opt->seed, opt->out, opt->tokenizer_source);
      fmt::print(
          "wrote {} ({} preset, seed {}): DeepSeek V4.1, {} layers + {} DSpark stages, dim {}, {} routed experts, vocab {}, {} "
          "tensors, {:.1f} MB of weights\n",
          opt->out, opt->preset, opt->seed, r.config.n_layers, r.config.n_mtp_layers, r.config.dim, r.config.n_routed_experts,
          r.config.vocab_size, r.tensors, static_cast<double>(r.weight_bytes) / 1e6);
      fmt::print("tokenizer: {}\n", r.tokenizer);
      return;
    }
    SyntheticPreset preset = FindPreset(opt->preset);
    if (opt->tokenizer_merges > 0) preset.tokenizer_merges = opt->tokenizer_merges;
    const SyntheticCheckpointReport r = WriteSyntheticCheckpoint(preset, opt->seed, opt->out, opt->tokenizer_source);
    fmt::print("wrote {} ({} preset, seed {}): {} layers, hidden {}, {} routed experts, vocab {}, {:.1f} MB of weights\n", opt->out,
               opt->preset, opt->seed, r.config.num_hidden_layers, r.config.hidden_size, r.config.n_routed_experts, r.config.vocab_size,
               static_cast<double>(r.weight_bytes) / 1e6);
    fmt::print("tokenizer: {}\n", r.tokenizer);
  });
}

}  // namespace tandem::rt::cli
