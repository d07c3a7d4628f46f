#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include <pthread.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "runtime/cli/commands.hpp"
#include "runtime/cli/layout_flags.hpp"
#include "runtime/draft/draft_options.hpp"
#include "runtime/draft/draft_policy.hpp"
#include "runtime/draft/drafter.hpp"
#include "runtime/draft/dspark_drafter.hpp"
#include "runtime/draft/ngram_drafter.hpp"
#include "runtime/engine/engine.hpp"
#include "runtime/engine/v41_engine.hpp"
#include "runtime/hybrid/local_workers.hpp"
#include "runtime/model/chat_template.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/model_revision.hpp"
#include "runtime/model/v41_checkpoint.hpp"
#include "runtime/serve/api_server.hpp"
#include "runtime/serve/prefill_budget.hpp"
#include "runtime/serve/scheduler.hpp"
#include "runtime/serve/startup_timeline.hpp"

namespace tandem::rt::cli {

namespace {

struct Options {
  std::string model;
  ApiServerOptions api;
  SchedulerOptions scheduler;
  int max_context = 0;
  int max_output_tokens = 0;
  double kv_budget_mb = 0;  // 0: half the memory available at start
  int queue_wait_ms = 30000;
  int drain_timeout_s = 30;
  int threads = 0;
  std::string api_key_file;
  int request_timeout_s = 30;
  int max_connections_per_client = 0;  // 0: concurrency + queue depth + 16
  LayoutFlags layout;
  DraftOptions draft;
  std::string draft_format = "int8";
};

// SIGTERM / SIGINT are blocked in every thread and collected here, so shutdown runs
// in ordinary code rather than in a signal handler.
sigset_t ShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

// The first line of a file holding a secret, trimmed; a missing or empty one is an error.
std::string ReadSecretFile(const std::string& path, const char* flag) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(fmt::format("{} {}: cannot read the file: {}", flag, path, std::strerror(errno)));
  std::string line;
  if (!std::getline(in, line)) throw std::invalid_argument(fmt::format("{} {}: the file is empty", flag, path));
  const auto first = line.find_first_not_of(" \t\r");
  const auto last = line.find_last_not_of(" \t\r");
  if (first == std::string::npos) throw std::invalid_argument(fmt::format("{} {}: the first line is empty", flag, path));
  return line.substr(first, last - first + 1);
}

// MemAvailable from /proc/meminfo (what the kernel can give without swapping), else the free pages.
std::uint64_t AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return static_cast<std::uint64_t>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

// The bytes every sequence's KV cache may hold together, and the context that follows
// from it: a request whose prompt and max_tokens would not fit is refused with 400
// before it starts, and one that runs out of room later (others grew too) fails alone.
// Mebibytes as a person reads them: 11520, 64.0, 0.0293.
std::string MiB(double bytes) {
  const double mib = bytes / (1024.0 * 1024.0);
  return mib >= 100 ? fmt::format("{:.0f}", mib) : fmt::format("{:.3g}", mib);
}

int ApplyKvBudget(const Options& opt, KvCachePool& kv, int max_context, std::string& described) {
  constexpr double kMiB = 1024.0 * 1024.0;
  const double available = static_cast<double>(AvailableMemoryBytes());
  const double bytes = opt.kv_budget_mb > 0 ? opt.kv_budget_mb * kMiB : available / 2;
  const auto per_position = static_cast<double>(kv.bytes_per_position());
  const double positions = std::floor(bytes / per_position);
  const std::string source = opt.kv_budget_mb > 0 ? "--kv-budget-mb" : fmt::format("half of the {} MiB available at start", MiB(available));
  if (positions < 16) {
    throw std::invalid_argument(
        fmt::format("a KV budget of {} MiB ({}) holds {:.0f} positions of {:.0f} bytes (this model's KV per token); give "
                    "--kv-budget-mb {} or more",
                    MiB(bytes), source, positions, per_position, MiB(16 * per_position)));
  }
  kv.SetBudget(static_cast<std::size_t>(bytes));
  const int context = static_cast<int>(std::min<double>(max_context, positions));
  described = fmt::format("KV budget {} MiB ({}): {:.0f} positions of {:.0f} bytes{}", MiB(bytes), source, positions, per_position,
                          context < max_context ? fmt::format("; the context is cut to {}", context) : "");
  return context;
}

void ServeV3(Options& opt, ApiServer& api, const sigset_t& signals, StartupTimeline& startup);
void ServeV41(Options& opt, ApiServer& api, const sigset_t& signals, StartupTimeline& startup);

void Serve(Options opt) {
  const sigset_t signals = ShutdownSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  if (opt.api.served_model.empty()) opt.api.served_model = std::filesystem::path(opt.model).filename().string();
  if (!opt.api_key_file.empty()) {
    opt.api.api_key = ReadSecretFile(opt.api_key_file, "--api-key-file");
  } else if (const char* env = std::getenv("TANDEM_API_KEY"); env != nullptr && opt.api.api_key.empty()) {
    // Set but empty is a mistake to report, not a reason to serve without a key.
    opt.api.api_key = env;
    const auto first = opt.api.api_key.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) throw std::invalid_argument("TANDEM_API_KEY is set but empty: unset it to serve without a key");
    opt.api.api_key = opt.api.api_key.substr(first, opt.api.api_key.find_last_not_of(" \t\r\n") - first + 1);
  }
  opt.api.http.request_read = std::chrono::seconds(opt.request_timeout_s);
  // Room for a whole concurrent batch and the queue from one client (a benchmark runs on one machine).
  opt.api.http.max_connections_per_client =
      opt.max_connections_per_client > 0 ? opt.max_connections_per_client : opt.scheduler.concurrency + opt.scheduler.queue_depth + 16;
  StartupTimeline startup;
  ApiServer api(opt.api);  // answers 503 "loading" from here on
  startup.Mark("listening");
  fmt::print("tandem-rt serve: listening on http://{}\n", api.address());
  std::fflush(stdout);

  startup.SetWeights(opt.model);
  if (IsV41Checkpoint(opt.model)) return ServeV41(opt, api, signals, startup);
  ServeV3(opt, api, signals, startup);
}

// The scheduler's context (the model's, or --max-context below it), queue wait and EOS.
void ApplyModelLimits(Options& opt, int max_position_embeddings, std::int64_t eos) {
  opt.scheduler.max_context = opt.max_context > 0 ? std::min(opt.max_context, max_position_embeddings) : max_position_embeddings;
  opt.scheduler.queue_wait = std::chrono::milliseconds(opt.queue_wait_ms);
  opt.scheduler.eos = static_cast<TokenId>(eos);
}

// What serving either architecture sets up alike: the checkpoint's tokenizer and chat
// template, the scheduler's limits, and the workers --spawn-workers asks for.
struct ServingSetup {
  Tokenizer tokenizer;
  ChatTemplate chat;
  LayoutFlags layout;
  std::unique_ptr<LocalWorkers> spawned;
};

ServingSetup SetUpServing(Options& opt, int max_position_embeddings, std::int64_t eos) {
  ServingSetup s{Tokenizer::Load(std::filesystem::path(opt.model) / "tokenizer.json"), ChatTemplate::Load(opt.model), opt.layout, nullptr};
  ApplyModelLimits(opt, max_position_embeddings, eos);
  s.layout.progress_out = stdout;  // where a launcher waiting for "listening on" sees loading advance
  s.spawned = SpawnRequestedWorkers(opt.model, s.layout);
  return s;
}

void ServeUntilStopped(const Options& opt, ApiServer& api, Scheduler& scheduler, LocalWorkers* spawned, const sigset_t& signals) {
  // Serves until SIGTERM or SIGINT, or until it can no longer serve: after an engine,
  // drafter or expert worker failure it exits with code 3 (a supervisor restarts it, and
  // the new process reconnects to the workers), saying which rank failed and why.
  // A worker it spawned that ends is reaped and stops it at once, not at the next request.
  int signal = 0;
  std::string failed, ended;
  while (signal <= 0 && failed.empty() && ended.empty()) {
    const timespec tick{0, 200'000'000};
    signal = sigtimedwait(&signals, nullptr, &tick);
    if (signal > 0) break;
    failed = scheduler.Failed();
    if (spawned) ended = spawned->Ended();
  }
  if (!failed.empty() || !ended.empty()) {
    const std::string reason = fmt::format("stopped serving: {}", failed.empty()  ? ended
                                                                  : ended.empty() ? failed
                                                                                  : fmt::format("{}; {}", failed, ended));
    fmt::print(stderr, "tandem-rt serve: {}\n", reason);
    api.SetDraining();
    scheduler.Drain(std::chrono::seconds(1), [] { return false; });  // every stream has already been told why
    api.Stop();
    throw CommandFailed(3, reason);
  }
  fmt::print(stderr, "tandem-rt serve: {} received; draining (up to {} s)\n", signal == SIGTERM ? "SIGTERM" : "SIGINT",
             opt.drain_timeout_s);
  api.SetDraining();
  // A second signal ends the drain at once (what an operator pressing Ctrl-C again means);
  // signals stay blocked, so a pending one is taken without waiting.
  scheduler.Drain(std::chrono::seconds(opt.drain_timeout_s), [&] {
    const timespec now{};
    const int again = sigtimedwait(&signals, nullptr, &now);
    if (again > 0) fmt::print(stderr, "tandem-rt serve: {} received again; stopping now\n", again == SIGTERM ? "SIGTERM" : "SIGINT");
    return again > 0;
  });  // every stream has ended, or says why it ends
  api.Stop();
}

// DeepSeek V2/V3: the Engine, its layout (local or hybrid) and drafter.
void ServeV3(Options& opt, ApiServer& api, const sigset_t& signals, StartupTimeline& startup) {
  const Checkpoint ckpt = Checkpoint::Open(opt.model, Placement(opt.layout));
  startup.Mark("checkpoint_opened");
  const ModelConfig& c = ckpt.config();
  ServingSetup setup = SetUpServing(opt, c.max_position_embeddings, c.eos_token_id);
  const Tokenizer& tokenizer = setup.tokenizer;
  ChatTemplate& chat = setup.chat;
  const LayoutFlags& layout = setup.layout;
  const std::unique_ptr<LocalWorkers>& spawned = setup.spawned;
  const std::string draft_mode = ResolveDraftMode(opt.draft, ckpt);
  const bool mtp = draft_mode == "mtp";
  Engine engine(
      ckpt, EngineOptions{.threads = opt.threads, .expert_input = ExpertInput(layout), .keep_hidden = mtp, .device = EngineDevice(layout)},
      MakeExpertExecutor(ckpt, layout, nullptr));
  startup.Mark("engine_loaded");  // the weights here, and every expert worker connected and loaded
  std::string kv_budget;
  opt.scheduler.max_context = ApplyKvBudget(opt, engine.kv(), opt.scheduler.max_context, kv_budget);
  fmt::print(stderr, "tandem-rt serve: {}\n", kv_budget);
  // The largest step the scheduler makes (the most prompt chunks a step takes beside
  // every decoding request's row and drafts: PrefillBudget), once before the first
  // request: its buffers are then mapped, and a worker that cannot answer fails the
  // start, not a request.
  const int drafts = draft_mode == "off" ? 0 : opt.draft.max_drafts;
  // (The budget is largest with every slot prefilling and none decoding.)
  const std::int64_t largest_step =
      PrefillBudget(opt.scheduler.prefill_chunk, static_cast<std::size_t>(std::max(1, opt.scheduler.concurrency)), 0) +
      static_cast<std::int64_t>(opt.scheduler.concurrency) * (1 + drafts);
  engine.WarmUp(static_cast<int>(std::min<std::int64_t>(opt.scheduler.max_context, largest_step)));
  startup.Mark("warmed_up");
  ServedModel served{ModelRevision(ckpt.dir()), opt.scheduler.max_context,
                     opt.max_output_tokens > 0 ? std::min(opt.max_output_tokens, opt.scheduler.max_context) : opt.scheduler.max_context,
                     c.vocab_size, static_cast<TokenId>(c.bos_token_id)};
  opt.draft.replica_format = opt.draft_format == "int4" ? QuantFormat::kInt4 : QuantFormat::kInt8;
  std::unique_ptr<Drafter> drafter = MakeDrafter(opt.draft, ckpt, &engine.pool());
  const std::string drafting = drafter ? fmt::format("drafts {} ({})", drafter->name(), opt.draft.policy) : "no drafts";
  Scheduler scheduler(engine, tokenizer, opt.scheduler, std::move(drafter), MakeDraftPolicy(opt.draft.policy, opt.draft.max_drafts));
  startup.Mark("ready");
  served.startup_json = startup.Json();
  api.Attach(&scheduler, &tokenizer, std::move(chat), served);
  fmt::print("tandem-rt serve: ready ({} as '{}', context {}, KV budget {} MiB, concurrency {}, {}{})\n", opt.model, opt.api.served_model,
             served.max_context, MiB(static_cast<double>(engine.kv().budget_bytes())), opt.scheduler.concurrency, drafting,
             opt.scheduler.debug_slowdown > 0
                 ? fmt::format("; DEBUG SLOWDOWN {:.0f}%: decode deliberately slowed", 100 * opt.scheduler.debug_slowdown)
                 : "");
  std::fflush(stdout);

  ServeUntilStopped(opt, api, scheduler, spawned.get(), signals);
}

// DeepSeek V4.1: on the CPU, its experts here or on workers (--parallel ep), no drafter yet.
void ServeV41(Options& opt, ApiServer& api, const sigset_t& signals, StartupTimeline& startup) {
  const V41Checkpoint ckpt = V41Checkpoint::Open(opt.model);
  startup.Mark("checkpoint_opened");
  const V41Config& c = ckpt.config();
  const bool has_dspark = c.dspark_block_size > 0 && c.n_mtp_layers > 0;
  const std::string draft = opt.draft.mode == "auto" ? (has_dspark ? "dspark" : "off") : opt.draft.mode;
  if (draft == "replica" || draft == "mtp" || (draft == "dspark" && !has_dspark)) {
    throw std::invalid_argument(
        fmt::format("serve: --draft {}: a DeepSeek V4.1 checkpoint drafts with dspark (its mtp.* stages{}), "
                    "ngram or off",
                    draft, has_dspark ? "" : ", which this one lacks"));
  }
  ServingSetup setup = SetUpServing(opt, c.max_position_embeddings, c.eos_token_id);
  const Tokenizer& tokenizer = setup.tokenizer;
  ChatTemplate& chat = setup.chat;
  const LayoutFlags& layout = setup.layout;
  const std::unique_ptr<LocalWorkers>& spawned = setup.spawned;
  V41Engine engine(ckpt, V41EngineOptions{.threads = opt.threads, .expert_input = ExpertInput(layout), .keep_hidden = draft == "dspark"},
                   MakeV41ExpertExecutor(ckpt, layout));
  startup.Mark("engine_loaded");
  std::string kv_budget;
  opt.scheduler.max_context = ApplyKvBudget(opt, engine.kv(), opt.scheduler.max_context, kv_budget);
  fmt::print(stderr, "tandem-rt serve: {}\n", kv_budget);
  const std::int64_t largest_step =
      PrefillBudget(opt.scheduler.prefill_chunk, static_cast<std::size_t>(std::max(1, opt.scheduler.concurrency)), 0) +
      static_cast<std::int64_t>(opt.scheduler.concurrency) * (1 + (draft == "off" ? 0 : opt.draft.max_drafts));
  engine.WarmUp(static_cast<int>(std::min<std::int64_t>(opt.scheduler.max_context, largest_step)));
  startup.Mark("warmed_up");
  ServedModel served{ModelRevision(ckpt.dir()), opt.scheduler.max_context,
                     opt.max_output_tokens > 0 ? std::min(opt.max_output_tokens, opt.scheduler.max_context) : opt.scheduler.max_context,
                     c.vocab_size, static_cast<TokenId>(c.bos_token_id)};
  std::unique_ptr<Drafter> drafter;
  if (draft == "dspark") drafter = std::make_unique<DSparkDrafter>(engine, &engine.pool());
  if (draft == "ngram") drafter = std::make_unique<NgramDrafter>(opt.draft.ngram_min, opt.draft.ngram_max);
  const std::string drafting = drafter ? fmt::format("drafts {} ({})", drafter->name(), opt.draft.policy) : "no drafts";
  Scheduler scheduler(engine, tokenizer, opt.scheduler, std::move(drafter), MakeDraftPolicy(opt.draft.policy, opt.draft.max_drafts));
  startup.Mark("ready");
  served.startup_json = startup.Json();
  api.Attach(&scheduler, &tokenizer, std::move(chat), served);
  fmt::print("tandem-rt serve: ready ({} as '{}', DeepSeek V4.1, context {}, KV budget {} MiB, concurrency {}, {})\n", opt.model,
             opt.api.served_model, served.max_context, MiB(static_cast<double>(engine.kv().budget_bytes())), opt.scheduler.concurrency,
             drafting);
  std::fflush(stdout);
  ServeUntilStopped(opt, api, scheduler, spawned.get(), signals);
}

}  // namespace

void AddServeCommand(CLI::App& app) {
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server with continuous batching");
  cmd->add_option("--model", opt->model, "Checkpoint directory")->required();
  cmd->add_option("--listen", opt->api.listen, "HOST:PORT; port 0 picks a free one (printed on stdout)")->capture_default_str();
  cmd->add_option("--served-model-name", opt->api.served_model, "The model id clients use (default: the directory's name)");
  CLI::Option* key = cmd->add_option("--api-key", opt->api.api_key,
                                     "Require 'Authorization: Bearer KEY' on /v1/* (visible to local users in the process list: "
                                     "prefer --api-key-file or the environment variable TANDEM_API_KEY)");
  cmd->add_option("--api-key-file", opt->api_key_file, "Read the API key from the first line of this file")
      ->check(CLI::ExistingFile)
      ->excludes(key);
  cmd->add_option("--allow-origin", opt->api.allow_origins,
                  "A browser origin (scheme://host[:port], or *) whose pages may call the API (CORS); repeatable. Default: none");
  cmd->add_option("--allow-host", opt->api.allow_hosts,
                  "A host name clients may address a loopback-bound server by, beyond localhost and 127.0.0.1 (DNS rebinding "
                  "protection); repeatable");
  cmd->add_option("--request-timeout-s", opt->request_timeout_s, "A request's headers and body must arrive within this time")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--max-connections", opt->api.http.max_connections, "Open HTTP connections in all (a thread each); beyond: 503")
      ->check(CLI::Range(1, 16384))
      ->capture_default_str();
  cmd->add_option("--max-connections-per-client", opt->max_connections_per_client,
                  "Open HTTP connections from one client address; beyond: 503 (default: concurrency + queue depth + 16)")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--concurrency", opt->scheduler.concurrency, "Sequences decoding at once")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--max-context", opt->max_context, "Prompt + output tokens per request (default: the model's)")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--max-output-tokens", opt->max_output_tokens, "Output tokens per request (default: the context)")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--kv-budget-mb", opt->kv_budget_mb,
                  "MiB the KV caches of all sequences may hold together (caches grow with their sequences; the prefix cache gives "
                  "way first); it also bounds the context. Default: half the memory available at start")
      ->check(CLI::Range(0.001, 1e9));
  cmd->add_option("--queue-depth", opt->scheduler.queue_depth, "Requests waiting for a slot; beyond: 429")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--queue-wait-ms", opt->queue_wait_ms, "Longest wait for a slot; then 429")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  cmd->add_option("--prefix-cache-entries", opt->scheduler.prefix_cache_entries, "Finished sequences kept for prefix reuse")
      ->capture_default_str();
  cmd->add_option("--prefill-chunk", opt->scheduler.prefill_chunk,
                  "Prompt tokens per step over all requests, times the prompts waiting per decoding request (at most 8 times)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option_function<double>(
         "--burst-window-ms",
         [opt](double ms) { opt->scheduler.burst_window = std::chrono::microseconds(static_cast<std::int64_t>(ms * 1000)); },
         "An idle server's first step waits up to this long for requests arriving together, so their prompts go in one step "
         "(0: admit at once; default 10)")
      ->check(CLI::Range(0.0, 1000.0));
  cmd->add_option_function<double>(
         "--burst-quiet-ms",
         [opt](double ms) { opt->scheduler.burst_quiet = std::chrono::microseconds(static_cast<std::int64_t>(ms * 1000)); },
         "While gathering a burst (--burst-window-ms), admit once no request has arrived for this long (default 2; 0: at once)")
      ->check(CLI::Range(0.0, 1000.0));
  cmd->add_option("--drain-timeout-s", opt->drain_timeout_s, "On SIGTERM, how long in-flight requests may finish")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  cmd->add_option("--debug-slowdown", opt->scheduler.debug_slowdown,
                  "Test aid: make decode this fraction slower (0.15: throughput × 0.85) by padding each step")
      ->check(CLI::Range(0.0, 0.9));
  cmd->add_option("--threads", opt->threads, "Engine threads (0: all cores)")->check(CLI::Range(0, 1024));
  cmd->add_option("--draft", opt->draft.mode,
                  "Speculative drafter: replica (quantized local copy of the target), mtp (the checkpoint's MTP layer), "
                  "dspark (a DeepSeek V4.1 checkpoint's own DSpark stages), ngram (prompt lookup), off; auto: dspark for a "
                  "V4.1 checkpoint that has them, replica for other synthetic checkpoints, else mtp when the checkpoint has "
                  "an MTP layer, else off")
      ->check(CLI::IsMember({"auto", "replica", "mtp", "dspark", "ngram", "off"}))
      ->capture_default_str();
  cmd->add_option("--draft-policy", opt->draft.policy, "Drafts per request and step: fixed:K or adaptive")
      ->check(CLI::Validator(
          [](std::string& spec) -> std::string {
            try {
              MakeDraftPolicy(spec);
              return "";
            } catch (const std::invalid_argument& e) {
              return e.what();
            }
          },
          "fixed:K|adaptive"))
      ->capture_default_str();
  cmd->add_option("--draft-max", opt->draft.max_drafts, "The adaptive policy's most drafts per request and step")
      ->check(CLI::Range(1, 32))
      ->capture_default_str();
  cmd->add_option("--draft-format", opt->draft_format, "The replica's expert weights")
      ->check(CLI::IsMember({"int8", "int4"}))
      ->capture_default_str();
  cmd->add_option("--draft-group", opt->draft.replica_group, "Values per quantization scale in the replica")
      ->check(CLI::IsMember({32, 64, 128}))
      ->capture_default_str();
  cmd->add_option("--ngram-min", opt->draft.ngram_min, "Shortest n-gram the ngram drafter matches")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--ngram-max", opt->draft.ngram_max, "Longest n-gram the ngram drafter matches")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  AddLayoutFlags(cmd, opt->layout);
  cmd->callback([opt] { Serve(*opt); });
}

}  // namespace tandem::rt::cli
