#include "reports/report_commands.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/command_exit.hpp"
#include "common/input_error.hpp"
#include "reports/export.hpp"
#include "reports/gate.hpp"
#include "reports/markdown_report.hpp"
#include "reports/plots.hpp"
#include "store/campaign_record.hpp"
#include "store/store.hpp"

namespace tandem::reports {

using store::CampaignRecord;
using store::LoadCampaignRecord;

namespace {

namespace fs = std::filesystem;

// Readers never create or change a store: a mistyped path is an error, not an empty
// database, and another program's database is left as it is.
CampaignRecord Load(const std::string& db, std::int64_t campaign) {
  const store::Store store = store::Store::Open(db, store::OpenMode::kReadOnly);
  return LoadCampaignRecord(store, campaign > 0 ? std::optional<std::int64_t>(campaign) : std::nullopt);
}

// Written beside `file` and renamed into place, so a reader never sees half of it; a
// write that fails (a full disk) leaves nothing behind and names the file.
void WriteFile(const fs::path& file, const std::string& text) {
  std::error_code ec;
  if (file.has_parent_path()) fs::create_directories(file.parent_path(), ec);
  const fs::path partial = file.string() + ".partial";
  std::ofstream out(partial, std::ios::binary);
  if (!out) throw InputError(fmt::format("{}: cannot write: {}", file.string(), std::strerror(errno)));
  out << text;
  out.close();  // the last bytes reach the file here, and so does a full disk's error
  const int error = errno;
  if (!out) {
    fs::remove(partial, ec);
    throw InputError(fmt::format("{}: cannot write: {}", file.string(), error != 0 ? std::strerror(error) : "write failed"));
  }
  fs::rename(partial, file, ec);
  if (ec) {
    fs::remove(partial, ec);
    throw InputError(fmt::format("{}: cannot write: {}", file.string(), ec.message()));
  }
}

struct ReportFlags {
  std::string db, out, plots;
  std::int64_t campaign = 0;
};

struct GateFlags {
  std::string db, baseline, candidate, rule;
  std::vector<std::string> families;
  double max_regression = -1;
  std::int64_t campaign = 0;
  bool json = false;
};

struct ExportFlags {
  std::string db, format, table = "samples", out;
  std::int64_t campaign = 0;
};

// Every command reads one campaign of one store.
void AddStoreOptions(CLI::App* command, std::string& db, std::int64_t& campaign) {
  command->add_option("db", db, "Campaign store")->required();
  command->add_option("--campaign", campaign, "Campaign id in the store (default: the latest)")->check(CLI::PositiveNumber);
}

}  // namespace

void AddReportCommands(CLI::App& app) {
  auto rf = std::make_shared<ReportFlags>();
  CLI::App* report = app.add_subcommand("report", "Render a campaign's release report (markdown), recomputed from its raw samples");
  AddStoreOptions(report, rf->db, rf->campaign);
  report->add_option("--out", rf->out, "Write the markdown here (default: standard output)");
  report->add_option("--plots", rf->plots, "Draw SVG plots here with gnuplot (default with --out: FILE-plots/ beside it)");
  report->callback([rf] {
    const CampaignRecord record = Load(rf->db, rf->campaign);
    ReportOptions options;
    fs::path plots = rf->plots;
    if (plots.empty() && !rf->out.empty()) {
      const fs::path out(rf->out);
      plots = out.parent_path() / (out.stem().string() + "-plots");
    }
    bool plots_made = false;  // the folder is ours to remove when the report cannot be written
    if (!plots.empty()) {
      plots = fs::absolute(plots);
      plots_made = !fs::exists(plots);
      const char* program = std::getenv("TANDEM_GNUPLOT");
      options.plots = DrawPlots(record, plots, program != nullptr && *program != '\0' ? program : "gnuplot");
      options.plots_requested = true;
    }
    if (rf->out.empty()) {
      std::cout << RenderReport(record, options) << '\n';
      return;
    }
    options.markdown_dir = fs::absolute(rf->out).parent_path();
    try {
      WriteFile(rf->out, RenderReport(record, options) + "\n");
    } catch (...) {
      std::error_code ec;
      if (plots_made) fs::remove_all(plots, ec);
      throw;
    }
    fmt::print("report: {}\n", rf->out);
    if (!options.plots.note.empty()) fmt::print(stderr, "tandem report: {}\n", options.plots.note);
  });

  auto gf = std::make_shared<GateFlags>();
  CLI::App* gate = app.add_subcommand("gate", "Pass/fail a campaign for CI: exit 0 pass, 1 fail, 2 inconclusive or bad input");
  AddStoreOptions(gate, gf->db, gf->campaign);
  gate->add_option("--baseline", gf->baseline, "Baseline arm (default: the campaign's gate section, else the first arm)");
  gate->add_option("--candidate", gf->candidate, "Candidate arm (default: the campaign's gate section, else the second arm)");
  gate->add_option("--family", gf->families, "Gate only this family (repeatable; default: the campaign's, else every family)");
  gate->add_option("--max-regression", gf->max_regression, "Largest slowdown tolerated, e.g. 0.03 (default: the campaign's, else 0.03)")
      ->check(CLI::Range(0.0, 0.99));
  gate->add_option("--rule", gf->rule, "proven: fail when a regression is proven; noninferior: pass only when no regression is proven")
      ->check(CLI::IsMember({"proven", "noninferior"}));
  gate->add_flag("--json", gf->json, "One JSON object instead of text");
  gate->callback([gf] {
    const CampaignRecord record = Load(gf->db, gf->campaign);
    GateOptions options{gf->baseline, gf->candidate, gf->families, std::nullopt, std::nullopt};
    if (gf->max_regression >= 0) options.max_regression = gf->max_regression;
    if (!gf->rule.empty()) options.rule = gf->rule == "noninferior" ? GateRule::kNoninferior : GateRule::kProven;
    const GateResult result = EvaluateGate(record, options);
    std::cout << (gf->json ? result.Json().dump(1) + "\n" : result.Text());
    std::cout.flush();
    if (result.ExitCode() != 0) throw CommandExit{result.ExitCode()};
  });

  auto ef = std::make_shared<ExportFlags>();
  CLI::App* exp = app.add_subcommand("export", "Write a campaign's raw samples or session scores as CSV or JSON");
  AddStoreOptions(exp, ef->db, ef->campaign);
  exp->add_option("--format", ef->format, "csv or json")->required()->check(CLI::IsMember({"csv", "json"}));
  exp->add_option("--table", ef->table, "samples (every request) or scores (one row per session and family)")
      ->check(CLI::IsMember({"samples", "scores"}))
      ->capture_default_str();
  exp->add_option("--out", ef->out, "Write here (default: standard output)");
  exp->callback([ef] {
    const CampaignRecord record = Load(ef->db, ef->campaign);
    const ExportTable table = ef->table == "scores" ? ExportTable::kScores : ExportTable::kSamples;
    const ExportFormat format = ef->format == "json" ? ExportFormat::kJson : ExportFormat::kCsv;
    if (ef->out.empty()) {
      Export(record, table, format, std::cout);
      return;
    }
    std::ostringstream text;
    Export(record, table, format, text);
    WriteFile(ef->out, text.str());
  });
}

}  // namespace tandem::reports
