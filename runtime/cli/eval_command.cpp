#include <algorithm>
#include <fstream>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/cli/commands.hpp"
#include "runtime/cli/layout_flags.hpp"
#include "runtime/engine/engine.hpp"
#include "runtime/engine/v41_engine.hpp"
#include "runtime/hybrid/local_workers.hpp"
#include "runtime/hybrid/remote_expert_executor.hpp"
#include "runtime/kernels/ops.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/model_revision.hpp"
#include "runtime/model/v41_checkpoint.hpp"
#include "runtime/sampling/sampler.hpp"

namespace tandem::rt::cli {

namespace {

struct Options {
  std::string model;
  std::vector<TokenId> tokens;
  int decode = 0;
  std::string logits_out;
  std::string routes_out;
  std::string mtp_logits_out;
  int threads = 0;
  LayoutFlags layout;
};

// The MTP layer over the whole sequence: its row at target position q (q ≥ 1) reads
// token q and the target's hidden state at q − 1 after the final norm, and predicts
// token q + 1; MTP positions start at 0 (attention is relative). Logits of rows
// 1 … T − 1 go to the file, in order.
void WriteMtpLogits(const Checkpoint& ckpt, const std::vector<TokenId>& tokens, const std::vector<float>& hidden, const Options& opt) {
  const ModelConfig& c = ckpt.config();
  const auto h = static_cast<std::int64_t>(c.hidden_size);
  const auto n = static_cast<std::int64_t>(tokens.size()) - 1;
  if (n < 1) throw std::invalid_argument("eval: --mtp-logits-out needs at least two positions");
  Engine mtp(ckpt, EngineOptions{.threads = opt.threads, .mtp = true});
  mtp.kv().Open(1, static_cast<int>(n));
  const std::vector<float> norm = ckpt.Vector("model.norm.weight", h);
  std::vector<float> hidden_in(static_cast<std::size_t>(n * h));
  std::vector<Row> rows;
  for (std::int64_t q = 1; q <= n; ++q) {
    RmsNorm(hidden.data() + (q - 1) * h, norm.data(), 1, h, static_cast<float>(c.rms_norm_eps), hidden_in.data() + (q - 1) * h);
    rows.push_back({1, static_cast<std::int32_t>(q - 1), tokens[static_cast<std::size_t>(q)], true});
  }
  ForwardOutput out;
  mtp.Forward(rows, out, hidden_in.data());
  std::ofstream file(opt.mtp_logits_out, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char*>(out.logits.data()), static_cast<std::streamsize>(out.logits.size() * sizeof(float)));
  if (!file) throw std::runtime_error(fmt::format("{}: write failed", opt.mtp_logits_out));
}

// What eval prints on stdout: one JSON line.
void PrintSummary(const Options& opt, int positions, int vocab, const std::vector<TokenId>& tokens, const std::filesystem::path& dir) {
  fmt::print("{}\n", nlohmann::json{{"positions", positions},
                                    {"vocab", vocab},
                                    {"prompt_tokens", opt.tokens.size()},
                                    {"tokens", tokens},
                                    {"logits_file", opt.logits_out},
                                    {"model_revision", ModelRevision(dir)}}
                         .dump());
}

void WriteLogits(std::ofstream& file, const ForwardOutput& out) {
  file.write(reinterpret_cast<const char*>(out.logits.data()), static_cast<std::streamsize>(out.logits.size() * sizeof(float)));
}

// DeepSeek V4.1 (its experts here or on workers): the prompt in one forward, then
// `decode` greedy steps.
void EvalV41(const Options& opt) {
  if (!opt.routes_out.empty() || !opt.mtp_logits_out.empty()) {
    throw std::invalid_argument("eval: --routes-out and --mtp-logits-out read DeepSeek-V3-family checkpoints only");
  }
  const V41Checkpoint ckpt = V41Checkpoint::Open(opt.model);
  const V41Config& c = ckpt.config();
  for (TokenId t : opt.tokens) {
    if (t < 0 || t >= c.vocab_size) throw std::invalid_argument(fmt::format("eval: token {} is outside [0, {})", t, c.vocab_size));
  }
  LayoutFlags layout = opt.layout;
  const std::unique_ptr<LocalWorkers> spawned = SpawnRequestedWorkers(opt.model, layout);
  V41Engine engine(ckpt, V41EngineOptions{.threads = opt.threads, .expert_input = ExpertInput(layout)},
                   MakeV41ExpertExecutor(ckpt, layout));
  const int total = static_cast<int>(opt.tokens.size()) + opt.decode;
  engine.kv().Open(1, total);
  std::ofstream logits(opt.logits_out, std::ios::binary | std::ios::trunc);
  if (!logits) throw std::invalid_argument(fmt::format("{}: cannot write", opt.logits_out));
  std::vector<TokenId> tokens = opt.tokens;
  std::vector<Row> rows;
  for (std::size_t i = 0; i < tokens.size(); ++i) rows.push_back({1, static_cast<std::int32_t>(i), tokens[i], true});
  ForwardOutput out;
  engine.Forward(rows, out);
  WriteLogits(logits, out);
  for (int step = 0; step < opt.decode; ++step) {
    const TokenId next = ArgMax(out.LogitsOf(out.logit_rows.size() - 1, c.vocab_size));
    tokens.push_back(next);
    const Row row{1, static_cast<std::int32_t>(tokens.size() - 1), next, true};
    engine.Forward(std::span<const Row>(&row, 1), out);
    WriteLogits(logits, out);
  }
  logits.close();
  if (!logits) throw std::runtime_error(fmt::format("{}: write failed", opt.logits_out));
  PrintSummary(opt, total, c.vocab_size, tokens, ckpt.dir());
}

// The prompt in one forward (logits at every position), then `decode` greedy steps
// through the KV cache; every logits row goes to the file, in position order.
void Eval(const Options& opt) {
  if (opt.tokens.empty()) throw std::invalid_argument("eval: --tokens is empty");
  if (IsV41Checkpoint(opt.model)) return EvalV41(opt);
  const Checkpoint ckpt = Checkpoint::Open(opt.model, Placement(opt.layout));
  const ModelConfig& c = ckpt.config();
  for (TokenId t : opt.tokens) {
    if (t < 0 || t >= c.vocab_size) throw std::invalid_argument(fmt::format("eval: token {} is outside [0, {})", t, c.vocab_size));
  }
  LayoutFlags layout = opt.layout;
  const std::unique_ptr<LocalWorkers> spawned = SpawnRequestedWorkers(opt.model, layout);
  Engine engine(ckpt,
                EngineOptions{.threads = opt.threads,
                              .record_routes = !opt.routes_out.empty(),
                              .expert_input = ExpertInput(layout),
                              .keep_hidden = !opt.mtp_logits_out.empty(),
                              .device = EngineDevice(layout)},
                MakeExpertExecutor(ckpt, layout));
  std::vector<float> hidden;  // every position's final hidden state, for --mtp-logits-out
  const int total = static_cast<int>(opt.tokens.size()) + opt.decode;
  engine.kv().Open(1, total);

  std::ofstream logits(opt.logits_out, std::ios::binary | std::ios::trunc);
  if (!logits) throw std::invalid_argument(fmt::format("{}: cannot write", opt.logits_out));
  std::vector<TokenId> tokens = opt.tokens;
  // routes[moe layer][position] = expert ids, ascending
  std::vector<std::vector<std::vector<int>>> routes;
  auto record = [&](const ForwardOutput& out, std::size_t rows) {
    if (opt.routes_out.empty()) return;
    routes.resize(out.routes.size());
    const std::size_t k = static_cast<std::size_t>(c.num_experts_per_tok);
    for (std::size_t l = 0; l < out.routes.size(); ++l) {
      for (std::size_t r = 0; r < rows; ++r) {
        std::vector<int> experts;
        for (std::size_t i = 0; i < k; ++i) experts.push_back(out.routes[l][r * k + i].expert);
        std::sort(experts.begin(), experts.end());
        routes[l].push_back(std::move(experts));
      }
    }
  };

  std::vector<Row> rows;
  for (std::size_t i = 0; i < tokens.size(); ++i) rows.push_back({1, static_cast<std::int32_t>(i), tokens[i], true});
  ForwardOutput out;
  engine.Forward(rows, out);
  logits.write(reinterpret_cast<const char*>(out.logits.data()), static_cast<std::streamsize>(out.logits.size() * sizeof(float)));
  record(out, rows.size());
  hidden.insert(hidden.end(), out.hidden.begin(), out.hidden.end());
  for (int step = 0; step < opt.decode; ++step) {
    const TokenId next = ArgMax(out.LogitsOf(out.logit_rows.size() - 1, c.vocab_size));
    tokens.push_back(next);
    const Row row{1, static_cast<std::int32_t>(tokens.size() - 1), next, true};
    engine.Forward(std::span<const Row>(&row, 1), out);
    logits.write(reinterpret_cast<const char*>(out.logits.data()), static_cast<std::streamsize>(out.logits.size() * sizeof(float)));
    record(out, 1);
    hidden.insert(hidden.end(), out.hidden.begin(), out.hidden.end());
  }
  if (!opt.mtp_logits_out.empty()) WriteMtpLogits(ckpt, tokens, hidden, opt);
  logits.close();
  if (!logits) throw std::runtime_error(fmt::format("{}: write failed", opt.logits_out));

  if (!opt.routes_out.empty()) {
    nlohmann::json layers = nlohmann::json::array();
    std::size_t moe = 0;
    for (int l = 0; l < c.num_hidden_layers; ++l) {
      if (c.IsMoeLayer(l)) layers.push_back({{"layer", l}, {"experts", routes[moe++]}});
    }
    std::ofstream r(opt.routes_out);
    r << nlohmann::json{{"layers", layers}}.dump() << "\n";
    if (!r) throw std::runtime_error(fmt::format("{}: write failed", opt.routes_out));
  }
  PrintSummary(opt, total, c.vocab_size, tokens, ckpt.dir());
}

}  // namespace

void AddEvalCommand(CLI::App& app) {
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("eval", "Run token ids through the model and write fp32 logits of every position");
  cmd->add_option("--model", opt->model, "Checkpoint directory")->required();
  cmd->add_option("--tokens", opt->tokens, "Prompt token ids, comma-separated")->required()->delimiter(',');
  cmd->add_option("--decode", opt->decode, "Greedy decode steps after the prompt (through the KV cache)")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--logits-out", opt->logits_out, "Raw little-endian fp32 [positions × vocab]")->required();
  cmd->add_option("--routes-out", opt->routes_out, "JSON: per MoE layer, the experts chosen at each position");
  cmd->add_option("--mtp-logits-out", opt->mtp_logits_out,
                  "Also run the checkpoint's MTP layer over the sequence: raw fp32 [(positions − 1) × vocab], the "
                  "prediction of token q + 1 from token q and the target's hidden state at q − 1");
  cmd->add_option("--threads", opt->threads, "Threads (0: all cores)")->check(CLI::Range(0, 1024));
  AddLayoutFlags(cmd, opt->layout);
  cmd->callback([opt] { Eval(*opt); });
}

}  // namespace tandem::rt::cli
