#include "harness/run_command.hpp"

#include <filesystem>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness/campaign.hpp"
#include "harness/campaign_runner.hpp"
#include "harness/input_error.hpp"
#include "harness/store.hpp"

namespace tandem::harness {

namespace {

struct RunFlags {
  std::string campaign;
  std::string resume;
  std::string db;
  bool dry_run = false;
  bool quiet = false;
};

// The readers never create a store: a mistyped path is an error, not an empty database.
Store OpenExisting(const std::string& db) {
  if (!std::filesystem::is_regular_file(db)) throw InputError(fmt::format("{}: no such store", db));
  return Store::Open(db);
}

void Sessions(const std::string& db) {
  Store store = OpenExisting(db);
  const auto id = store.LatestCampaign();
  if (!id) throw InputError(fmt::format("{}: holds no campaign", db));
  fmt::print("campaign {} '{}' ({})\n", *id, store.CampaignField(*id, "name"), store.CampaignField(*id, "status"));
  fmt::print("{:>4}  {:>5}  {:<16} {:<8} {:<9} {:>8}  {}\n", "id", "order", "layout", "arm", "status", "attempts", "reason");
  for (const SessionRow& s : store.Sessions(*id)) {
    fmt::print("{:>4}  {:>5}  {:<16} {:<8} {:<9} {:>8}  {}\n", s.id, s.order_index + 1, s.layout, s.arm, s.status, s.attempts, s.reason);
  }
}

void Show(const std::string& db, std::int64_t session) {
  Store store = OpenExisting(db);
  Statement s(store.handle(),
              "SELECT se.order_index, l.name, a.label, a.runtime_revision, se.status, se.reason, se.started_at, se.finished_at, "
              "se.host_json, se.served_json, se.processes_json FROM session se JOIN layout l ON l.id = se.layout_id "
              "JOIN arm a ON a.id = se.arm_id WHERE se.id = ?");
  s.Bind(1, session);
  if (!s.Step()) throw InputError(fmt::format("{}: no session {}", db, session));
  fmt::print("session {} (order {}): layout {}, arm {} (revision {})\n", session, s.Int(0) + 1, s.Text(1), s.Text(2), s.Text(3));
  fmt::print("status   {}{}\n", s.Text(4), s.Text(5).empty() ? "" : ": " + s.Text(5));
  fmt::print("time     {} → {}\n", s.Text(6), s.Text(7));
  const auto host = nlohmann::json::parse(s.Text(8), nullptr, false);
  if (host.is_object() && host.contains("cpu_model")) {
    fmt::print("host     {} · {} CPUs · {} · {} · load {} · {:.0f}% busy before{}\n", host.value("cpu_model", "?"),
               host.value("logical_cpus", 0), host.value("memory", "?"), host.value("kernel", "?"), host["load_average"].dump(),
               100 * host.value("busy_fraction", 0.0), host.value("load_warning", false) ? " (other load: timings suspect)" : "");
  }
  fmt::print("served   {}\n", s.Text(9));
  const auto processes = nlohmann::json::parse(s.Text(10), nullptr, false);
  if (processes.is_array()) {
    for (const auto& p : processes) {
      fmt::print("process  {:<12} pid {:<8} {:.2f} s CPU  log {}\n", p.value("role", "?"), p.value("pid", 0), p.value("cpu_seconds", 0.0),
                 p.value("log", ""));
    }
  }
  Statement w(store.handle(),
              "SELECT w.name, w.kind, w.warmup, COUNT(x.id), SUM(x.valid), SUM(x.passed), w.result_json, SUM(x.flags_json <> '{}') "
              "FROM workload_run w "
              "LEFT JOIN sample x ON x.workload_run_id = w.id WHERE w.session_id = ? GROUP BY w.id ORDER BY w.id");
  w.Bind(1, session);
  fmt::print("workloads\n");
  while (w.Step()) {
    fmt::print("  {:<32} {:<16} {} samples, {} valid, {} passed every check{}\n", (w.Int(2) ? "[warmup] " : "") + w.Text(0), w.Text(1),
               w.Int(3), w.Int(4), w.Int(5), w.Int(7) > 0 ? fmt::format(", {} flagged (token counts disagree)", w.Int(7)) : "");
    const auto result = nlohmann::json::parse(w.Text(6), nullptr, false);
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
  run->add_option("--db", flags->db, "Store to write (default: the campaign's `store`)");
  run->add_flag("--dry-run", flags->dry_run, "Print the resolved plan (arms, revisions, images, sessions, workloads) and stop");
  run->add_flag("--quiet", flags->quiet, "No progress line (for CI logs)");
  run->callback([flags] {
    RunOptions options{.dry_run = flags->dry_run, .quiet = flags->quiet};
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
