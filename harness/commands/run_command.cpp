#include "harness/commands/run_command.hpp"

#include <filesystem>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "common/input_error.hpp"
#include "harness/campaign/campaign.hpp"
#include "harness/commands/campaign_runner.hpp"
#include "harness/commands/session_logs.hpp"
#include "store/store.hpp"

namespace tandem::harness {

namespace {

struct RunFlags {
  std::string campaign;
  std::string resume;
  std::string db;
  bool dry_run = false;
  bool check_hosts = false;
  bool quiet = false;
  int extend = 0;
};

// The readers never create or change a store: a mistyped path is an error, not an empty
// database, and another program's database is left as it is.
store::Store OpenExisting(const std::string& db) { return store::Store::Open(db, store::OpenMode::kReadOnly); }

void Sessions(const std::string& db) {
  store::Store store = OpenExisting(db);
  const auto id = store.LatestCampaign();
  if (!id) throw InputError(fmt::format("{}: holds no campaign", db));
  fmt::print("campaign {} '{}' ({})\n", *id, store.CampaignField(*id, "name"), store.CampaignField(*id, "status"));
  fmt::print("{:>4}  {:>5}  {:<16} {:<8} {:<9} {:>8}  {}\n", "id", "order", "layout", "arm", "status", "attempts", "reason");
  for (const store::SessionRow& s : store.Sessions(*id)) {
    fmt::print("{:>4}  {:>5}  {:<16} {:<8} {:<9} {:>8}  {}\n", s.id, s.order_index + 1, s.layout, s.arm, ToString(s.status), s.attempts,
               s.reason);
  }
}

// "role 1.23 s, role 4.56 s"
std::string Phases(const std::vector<std::pair<std::string, double>>& phases) {
  std::vector<std::string> parts;
  for (const auto& [name, seconds] : phases) parts.push_back(fmt::format("{} {:.3f} s", name, seconds));
  return fmt::format("{}", fmt::join(parts, ", "));
}

// The launch as the harness timed it, the server's own account, memory and the GPUs.
void ShowLaunch(const store::SessionStartup& s, const store::SessionConditions& c) {
  if (s.ready_s) {
    std::string line = fmt::format("launch   ready {:.3f} s", *s.ready_s);
    if (!s.listening.empty()) line += " · listening: " + Phases(s.listening);
    if (s.first_output_s) line += fmt::format(" · first output {:.3f} s", *s.first_output_s);
    std::vector<std::string> rss;
    for (const auto& [role, bytes] : s.resident_bytes) {
      rss.push_back(fmt::format("{} {:.0f} MiB", role, static_cast<double>(bytes) / (1 << 20)));
    }
    if (!rss.empty()) line += fmt::format(" · RSS {}", fmt::join(rss, ", "));
    if (s.discarded) line += " · discarded (one of its arm's first launches in the layout)";
    fmt::print("{}\n", line);
  }
  if (!s.server_phases.empty()) {
    const std::string weights =
        s.weight_bytes ? fmt::format(" · weights {:.1f} MiB", static_cast<double>(*s.weight_bytes) / (1 << 20)) : std::string();
    fmt::print("server   {}{}\n", Phases(s.server_phases), weights);
  }
  if (!s.worker_loads.empty()) fmt::print("workers  own load: {}\n", Phases(s.worker_loads));
  for (const store::GpuMemory& g : s.gpus) {
    fmt::print("gpu      host {} GPU {} ({}): {:.0f} of {:.0f} MiB used once ready\n", g.host, g.index, g.uuid, g.used_mib, g.total_mib);
  }
  if (!c.samples.empty() || !c.breaches.empty()) {
    const std::string verdict = c.breaches.empty() ? "; within the campaign's conditions"
                                                   : fmt::format("; outside the campaign's conditions: {}", fmt::join(c.breaches, "; "));
    fmt::print("gpus     {} samples through the session{}\n", c.samples.size(), verdict);
  }
}

void Show(const std::string& db, std::int64_t session) {
  const store::Store store = OpenExisting(db);
  const std::optional<store::SessionDetail> s = store.Session(session);
  if (!s) throw InputError(fmt::format("{}: no session {}", db, session));
  fmt::print("session {} (order {}): layout {}, arm {} (revision {})\n", session, s->order_index + 1, s->layout, s->arm,
             s->runtime_revision);
  fmt::print("status   {}{}\n", ToString(s->status), s->reason.empty() ? "" : ": " + s->reason);
  fmt::print("time     {} → {}\n", s->started_at, s->finished_at);
  const auto host = nlohmann::json::parse(s->host_json, nullptr, false);
  if (host.is_object() && host.contains("cpu_model")) {
    fmt::print("host     {}{} · {} CPUs · {} · {} · load {} · {:.0f}% busy before{}\n", host.value("cpu_model", "?"),
               host.contains("cpu_family")
                   ? fmt::format(" ({} family {} model {} stepping {})", host.value("cpu_vendor", "?"), host.value("cpu_family", "?"),
                                 host.value("cpu_model_number", "?"), host.value("cpu_stepping", "?"))
                   : std::string(),
               host.value("logical_cpus", 0), host.value("memory", "?"), host.value("kernel", "?"), host["load_average"].dump(),
               100 * host.value("busy_fraction", 0.0), host.value("load_warning", false) ? " (other load: timings suspect)" : "");
  }
  fmt::print("served   {}\n", s->served_json);
  ShowLaunch(s->startup, s->conditions);
  const auto processes = nlohmann::json::parse(s->processes_json, nullptr, false);
  if (processes.is_array()) {
    for (const auto& p : processes) {
      // A launch that failed recorded its processes as they started, without their CPU time.
      const std::string cpu = p.contains("cpu_seconds") ? fmt::format("{:.2f} s CPU", p.value("cpu_seconds", 0.0)) : "CPU not read";
      fmt::print("process  {:<12} pid {:<8} {}  log {}\n", p.value("role", "?"), p.value("pid", 0), cpu, p.value("log", ""));
    }
  }
  // Every attempt's logs are kept in a directory of their own; an earlier attempt's failure
  // is known from the file the harness left there.
  for (int attempt = 1; attempt <= s->attempts; ++attempt) {
    const std::filesystem::path dir = AttemptLogDir(db, s->order_index, attempt);
    std::string outcome;
    if (attempt == s->attempts) {
      outcome = std::string(ToString(s->status)) + (s->reason.empty() ? "" : ": " + s->reason);
    } else if (const std::string failure = ReadAttemptFailure(dir); !failure.empty()) {
      outcome = "failed: " + failure;
    } else {
      outcome = "failed (no reason recorded)";
    }
    fmt::print("attempt {} {}: {}{}\n", attempt, dir.string(), outcome, std::filesystem::exists(dir) ? "" : " (logs not found)");
  }
  fmt::print("workloads\n");
  for (const store::WorkloadSummary& w : store.WorkloadSummaries(session)) {
    fmt::print("  {:<32} {:<16} {} samples, {} valid, {} passed every check{}\n", (w.warmup ? "[warmup] " : "") + w.name, ToString(w.kind),
               w.samples, w.valid, w.passed, w.flagged > 0 ? fmt::format(", {} flagged (token counts disagree)", w.flagged) : "");
    const auto result = nlohmann::json::parse(w.result_json, nullptr, false);
    if (!result.is_discarded() && result.contains("weighted_decode_median")) {
      fmt::print("    weighted decode, median of repeats: {:.2f} tok/s\n", result["weighted_decode_median"].get<double>());
    }
  }
}

}  // namespace

void AddRunCommands(CLI::App& app) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* run = app.add_subcommand("run", "Run a campaign: interleaved sessions of relaunched arms, every sample stored");
  auto* file = run->add_option("campaign", flags->campaign, "Campaign YAML");
  auto* resume = run->add_option("--resume", flags->resume, "Continue the campaign in this store at its first incomplete session");
  file->excludes(resume);
  run->add_option("--extend", flags->extend, "With --resume: first add this many sessions per layout (whole blocks of the order)")
      ->check(CLI::Range(1, 10000));
  run->add_option("--db", flags->db, "Store to write (default: the campaign's `store`)");
  run->add_flag("--dry-run", flags->dry_run, "Print the resolved plan (arms, revisions, images, sessions, workloads) and stop");
  run->add_flag("--check-hosts", flags->check_hosts,
                "With --dry-run: connect to every host and check that the model and each arm's images are there (or can be put there)");
  run->add_flag("--quiet", flags->quiet, "No progress line (for CI logs)");
  run->callback([flags] {
    if (flags->check_hosts && !flags->dry_run)
      throw InputError("tandem run: --check-hosts goes with --dry-run (a run always checks the hosts)");
    if (flags->extend > 0 && flags->resume.empty()) throw InputError("tandem run: --extend goes with --resume DB");
    RunOptions options{.dry_run = flags->dry_run, .check_hosts = flags->check_hosts, .quiet = flags->quiet, .extend = flags->extend};
    if (!flags->db.empty()) options.db = flags->db;
    int code = 0;
    if (!flags->resume.empty()) {
      code = ResumeCampaign(flags->resume, options);
    } else if (!flags->campaign.empty()) {
      code = RunCampaign(LoadCampaign(flags->campaign), options);
    } else {
      throw InputError("tandem run: give a campaign YAML or --resume DB");
    }
    if (code != 0) throw CommandExit{code};
  });

  auto db = std::make_shared<std::string>();
  CLI::App* sessions = app.add_subcommand("sessions", "List a store's sessions with their status");
  sessions->add_option("db", *db, "Campaign store")->required();
  sessions->callback([db] { Sessions(*db); });

  auto show_db = std::make_shared<std::string>();
  auto show_id = std::make_shared<std::int64_t>(0);
  CLI::App* show = app.add_subcommand("show", "Print one session: conditions, processes, workloads");
  show->add_option("db", *show_db, "Campaign store")->required();
  show->add_option("session", *show_id, "Session id (see tandem sessions)")->required();
  show->callback([show_db, show_id] { Show(*show_db, *show_id); });
}

}  // namespace tandem::harness
