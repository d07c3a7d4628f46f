#include <chrono>
#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "runtime/cli/commands.hpp"
#include "runtime/cli/layout_flags.hpp"
#include "runtime/engine/engine.hpp"
#include "runtime/hybrid/local_workers.hpp"
#include "runtime/hybrid/remote_expert_executor.hpp"
#include "runtime/model/chat_template.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/incremental_detokenizer.hpp"
#include "runtime/sampling/sampler.hpp"

namespace tandem::rt::cli {

namespace {

struct Options {
  std::string model;
  std::string prompt;
  bool chat = false;
  int max_tokens = 128;
  SamplingParams sampling;
  int threads = 0;
  LayoutFlags layout;
  bool ignore_eos = false;
  bool warmup = false;
  bool stats = false;
};

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

void Generate(const Options& opt) {
  const Checkpoint ckpt = Checkpoint::Open(opt.model, Placement(opt.layout));
  const ModelConfig& c = ckpt.config();
  const Tokenizer tokenizer = Tokenizer::Load(std::filesystem::path(opt.model) / "tokenizer.json");
  std::vector<TokenId> prompt;
  if (opt.chat) {
    prompt = ChatTemplate::Load(opt.model).Encode(tokenizer, {{"user", opt.prompt}});
  } else {
    prompt.push_back(static_cast<TokenId>(c.bos_token_id));
    const std::vector<TokenId> text = tokenizer.Encode(opt.prompt);
    prompt.insert(prompt.end(), text.begin(), text.end());
  }
  const int capacity = static_cast<int>(prompt.size()) + opt.max_tokens;
  if (capacity > c.max_position_embeddings) {
    throw std::invalid_argument(fmt::format("generate: prompt ({} tokens) + max tokens ({}) exceeds the model's context {}", prompt.size(),
                                            opt.max_tokens, c.max_position_embeddings));
  }

  LayoutFlags layout = opt.layout;
  const std::unique_ptr<LocalWorkers> spawned = SpawnRequestedWorkers(opt.model, layout);
  std::shared_ptr<RemoteExpertExecutor> remote;
  Engine engine(ckpt, EngineOptions{.threads = opt.threads, .expert_input = ExpertInput(layout), .device = EngineDevice(layout)},
                MakeExpertExecutor(ckpt, layout, &remote));
  engine.kv().Open(1, capacity);
  IncrementalDetokenizer detok(tokenizer, /*skip_special=*/true);

  std::vector<Row> rows;
  for (std::size_t i = 0; i < prompt.size(); ++i) rows.push_back({1, static_cast<std::int32_t>(i), prompt[i], i + 1 == prompt.size()});
  ForwardOutput out;
  if (opt.warmup) {
    // The process's first prompt also maps and faults in the buffers a prompt of this
    // size needs; the timed one then runs at the rate a serving process keeps.
    engine.Forward(rows, out);
    engine.kv().Get(1).Truncate(0);
  }
  const auto t0 = Clock::now();
  engine.Forward(rows, out);
  const auto t1 = Clock::now();

  int position = static_cast<int>(prompt.size());
  int generated = 0;
  while (generated < opt.max_tokens) {
    const std::int64_t at = position;
    const TokenId next =
        engine.SampleRows(out, std::span<const SamplingParams>(&opt.sampling, 1), std::span<const std::int64_t>(&at, 1))[0];
    ++generated;
    std::fputs(detok.Push(next).c_str(), stdout);
    std::fflush(stdout);
    if (next == c.eos_token_id && !opt.ignore_eos) break;
    if (generated == opt.max_tokens) break;
    const Row row{1, position, next, true};
    engine.Forward(std::span<const Row>(&row, 1), out);
    ++position;
  }
  std::fputs(detok.Flush().c_str(), stdout);
  const auto t2 = Clock::now();
  const double prefill_s = Seconds(t1 - t0), decode_s = Seconds(t2 - t1);
  // The first sampled token comes from the prefill's logits; decode is the rest.
  fmt::print(stderr, "\n[prompt: {} tokens in {:.3f} s, {:.1f} tok/s | decode: {} tokens in {:.3f} s, {:.1f} tok/s]\n", prompt.size(),
             prefill_s, static_cast<double>(prompt.size()) / prefill_s, generated, decode_s,
             generated > 1 ? (generated - 1) / decode_s : 0.0);
  if (remote && opt.stats) fmt::print(stderr, "{}", FormatRankStats(*remote));
}

}  // namespace

void AddGenerateCommand(CLI::App& app) {
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("generate", "Stream a completion for one prompt, then print prompt/decode speed");
  cmd->add_option("--model", opt->model, "Checkpoint directory")->required();
  cmd->add_option("--prompt", opt->prompt, "Prompt text")->required();
  cmd->add_flag("--chat", opt->chat, "Wrap the prompt in the chat template as a user turn");
  cmd->add_option("--max-tokens", opt->max_tokens, "Tokens to generate at most")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_option("--temperature", opt->sampling.temperature, "0: greedy")->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-k", opt->sampling.top_k, "0: off")->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--top-p", opt->sampling.top_p, "1: off")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-p", opt->sampling.min_p, "0: off")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--seed", opt->sampling.seed, "Seed of the stateless (seed, position, token) draws");
  cmd->add_option("--threads", opt->threads, "Threads (0: all cores)")->check(CLI::Range(0, 1024));
  cmd->add_flag("--ignore-eos", opt->ignore_eos, "Keep generating past the end-of-sequence token");
  cmd->add_flag("--warmup", opt->warmup,
                "Process the prompt once, untimed, before the timed run (from an empty cache again): the printed prompt rate is then a "
                "warm process's, not its first prompt's");
  cmd->add_flag("--stats", opt->stats, "Print per-rank traffic and round-trip times at the end (hybrid layouts)");
  AddLayoutFlags(cmd, opt->layout);
  cmd->callback([opt] { Generate(*opt); });
}

}  // namespace tandem::rt::cli
