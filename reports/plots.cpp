#include "reports/plots.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include <boost/process.hpp>
#include <fmt/format.h>

#include "common/child_wait.hpp"
#include "stats/descriptive.hpp"
#include "store/comparison.hpp"

namespace tandem::reports {

using store::CampaignRecord;
using store::CompareArms;
using store::FamilyComparison;
using store::FamilyMetric;
using store::FamilyScores;
using store::LayoutRecord;

namespace {

namespace bp = boost::process;

// A title or label for gnuplot's double-quoted strings (noenhanced: no markup).
std::string Quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') continue;
    out += c;
  }
  return out + "\"";
}

std::string FileName(const std::string& prefix, const std::string& layout) {
  std::string out = prefix + "-";
  for (char c : layout) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  return out + ".svg";
}

// Runs gnuplot on `script`; returns an error message, empty on success.
std::string RunGnuplot(const std::string& program, const std::filesystem::path& script) {
  std::error_code ec;
  bp::ipstream err;
  bp::child child(bp::exe = program, bp::args = std::vector<std::string>{script.string()}, bp::std_in.close(), bp::std_out > bp::null,
                  bp::std_err > err, ec);
  if (ec) return fmt::format("cannot run {}: {}", program, ec.message());
  std::string messages, line;
  while (std::getline(err, line)) messages += line + "\n";
  if (!WaitForExit(child, std::chrono::seconds(60))) {
    KillAndReap(child);
    return fmt::format("{} ran past 60 s on {}", program, script.string());
  }
  if (child.exit_code() != 0) return fmt::format("{} failed on {}: {}", program, script.string(), messages.substr(0, 300));
  return "";
}

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

std::string Header(const std::filesystem::path& svg, int width, int height, const std::string& title) {
  return fmt::format(
      "set terminal svg size {},{} noenhanced font 'sans,11' background rgb 'white'\nset output {}\nset title {}\n"
      "set key inside top left box opaque\nset grid ytics lc rgb '#dddddd'\n",
      width, height, Quote(svg.string()), Quote(title));
}

// Which families one scores plot shows.
enum class ScoresPlot {
  kDecode,
  kLatency,  // log axis, lower is better
  kLaunch,   // startup and memory: log axis, lower is better
  kPrefill,  // log axis, higher is better
};

bool Shows(ScoresPlot plot, const FamilyScores& f) {
  switch (plot) {
    case ScoresPlot::kDecode:
      return store::IsDecodeRate(f.metric);
    case ScoresPlot::kLatency:
      return store::IsLatency(f.metric);
    case ScoresPlot::kLaunch:
      return f.metric == FamilyMetric::kStartup || f.metric == FamilyMetric::kMemory;
    case ScoresPlot::kPrefill:
      return store::IsPrefill(f.metric);
  }
  return false;
}

// Session scores / baseline geometric mean, every family `plot` shows of one layout (all but
// decode on a log axis).
std::string ScoresScript(const CampaignRecord& r, const std::string& layout, const std::filesystem::path& svg, ScoresPlot plot) {
  const bool latency = plot != ScoresPlot::kDecode;
  const char* what = plot == ScoresPlot::kLatency   ? "latency "
                     : plot == ScoresPlot::kLaunch  ? "startup and memory "
                     : plot == ScoresPlot::kPrefill ? "prefill "
                                                    : "";
  const char* direction = plot == ScoresPlot::kPrefill ? ", higher is better" : latency ? ", lower is better" : "";
  std::vector<const FamilyScores*> families;
  for (const FamilyScores& f : r.families) {
    if (!Shows(plot, f)) continue;
    // A score of 0 (an idle GPU's memory, an instant load) has no ratio to the baseline: not drawn.
    const bool positive = std::all_of(f.by_arm.begin(), f.by_arm.end(), [](const auto& arm) {
      return std::all_of(arm.second.begin(), arm.second.end(), [](double v) { return v > 0; });
    });
    if (!positive) continue;
    if (f.layout == layout && f.by_arm.contains(r.arms[0].label) && f.by_arm.at(r.arms[0].label).size() >= 1) families.push_back(&f);
  }
  if (families.empty()) return "";
  const int width = std::max(900, 40 * static_cast<int>(families.size()) + 300);
  std::string s =
      Header(svg, width, 620,
             fmt::format("{}: {}session scores relative to the baseline's geometric mean ({}){}", r.name, what, layout, direction));
  s += "set ylabel 'session score / baseline geometric mean'\nset xtics rotate by -50 font ',9'\nset bmargin 14\n";
  if (latency) s += "set logscale y 2\n";
  const double right = static_cast<double>(families.size()) + 0.7;
  s += fmt::format("set xrange [0.3:{}]\nset arrow from 0.3,1 to {},1 nohead lc rgb '#888888' dt 2\n", right, right);
  std::string tics;
  for (std::size_t i = 0; i < families.size(); ++i) tics += fmt::format("{}{} {}", i ? ", " : "", Quote(families[i]->family), i + 1);
  s += "set xtics (" + tics + ")\n";
  std::vector<std::string> plots;
  const std::size_t arms = r.arms.size();
  for (std::size_t a = 0; a < arms; ++a) {
    const std::string& label = r.arms[a].label;
    const double offset = (static_cast<double>(a) - (static_cast<double>(arms) - 1) / 2) * 0.18;
    std::string data;
    for (std::size_t i = 0; i < families.size(); ++i) {
      const auto it = families[i]->by_arm.find(label);
      if (it == families[i]->by_arm.end()) continue;
      const double base = stats::GeometricMean(families[i]->by_arm.at(r.arms[0].label));
      for (double v : it->second) data += fmt::format("{} {}\n", static_cast<double>(i + 1) + offset, v / base);
    }
    s += fmt::format("$arm{} << EOD\n{}EOD\n", a, data);
    plots.push_back(fmt::format("$arm{} using 1:2 with points pt 7 ps 0.6 lc rgb '{}' title {}", a, kColors[a % 6],
                                Quote(a == 0 ? label + " (baseline)" : label)));
    if (a == 0) continue;
    std::string intervals;
    const auto comparisons = CompareArms(r.families, r.arms[0].label, label);
    for (std::size_t i = 0; i < families.size(); ++i) {
      for (const FamilyComparison& c : comparisons) {
        if (c.scores == families[i] && c.interval) {
          intervals +=
              fmt::format("{} {} {} {}\n", static_cast<double>(i + 1) + offset + 0.07, c.interval->ratio, c.interval->lo, c.interval->hi);
        }
      }
    }
    if (!intervals.empty()) {
      s += fmt::format("$ci{} << EOD\n{}EOD\n", a, intervals);
      plots.push_back(fmt::format("$ci{} using 1:2:3:4 with yerrorbars pt 6 lc rgb '{}' title {}", a, kColors[a % 6],
                                  Quote(label + ": ratio, 95% interval")));
    }
  }
  std::string joined;
  for (std::size_t i = 0; i < plots.size(); ++i) joined += (i ? ", \\\n     " : "") + plots[i];
  return s + "plot " + joined + "\n";
}

// Median aggregate tok/s per level, per (workload, case) series and arm, one layout.
std::string ScalingScript(const CampaignRecord& r, const std::string& layout, const std::filesystem::path& svg) {
  std::map<std::string, std::map<std::string, std::map<int, std::vector<double>>>> series;  // series → arm → level → values
  std::vector<std::string> order;
  for (const FamilyScores& f : r.families) {
    if (f.layout != layout || f.metric != FamilyMetric::kAggregate) continue;
    const std::string name = f.workload + ": " + f.case_id;
    if (!series.contains(name)) order.push_back(name);
    for (const auto& [arm, sessions] : f.values_by_arm) {
      for (const auto& values : sessions) {
        auto& all = series[name][arm][f.level];
        all.insert(all.end(), values.begin(), values.end());
      }
    }
  }
  bool any_levels = false;
  for (const auto& [name, arms] : series) {
    for (const auto& [arm, levels] : arms) any_levels = any_levels || levels.size() > 1;
  }
  if (!any_levels) return "";
  std::string s = Header(svg, 900, 560, fmt::format("{}: concurrency scaling ({})", r.name, layout));
  s += "set xlabel 'concurrent requests'\nset ylabel 'aggregate tok/s (median over batches)'\nset logscale x 2\nset yrange [0:*]\n";
  std::vector<std::string> plots;
  int n = 0;
  for (const std::string& name : order) {
    for (std::size_t a = 0; a < r.arms.size(); ++a) {
      const auto it = series[name].find(r.arms[a].label);
      if (it == series[name].end()) continue;
      std::string data;
      for (const auto& [level, values] : it->second) data += fmt::format("{} {}\n", level, stats::Median(values));
      s += fmt::format("$s{} << EOD\n{}EOD\n", n, data);
      plots.push_back(fmt::format("$s{} using 1:2 with linespoints lw 2 pt 7 lc rgb '{}' dt {} title {}", n, kColors[a % 6],
                                  1 + static_cast<int>(std::find(order.begin(), order.end(), name) - order.begin()) % 5,
                                  Quote(name + " · " + r.arms[a].label)));
      ++n;
    }
  }
  std::string joined;
  for (std::size_t i = 0; i < plots.size(); ++i) joined += (i ? ", \\\n     " : "") + plots[i];
  return s + "plot " + joined + "\n";
}

}  // namespace

PlotSet DrawPlots(const CampaignRecord& r, const std::filesystem::path& dir, const std::string& gnuplot) {
  PlotSet out;
  const std::string program = gnuplot.find('/') == std::string::npos ? bp::search_path(gnuplot).string() : gnuplot;
  if (program.empty() || !std::filesystem::exists(program)) {
    out.note = fmt::format("plots skipped: {} is not installed (Debian: apt install gnuplot-nox)", gnuplot);
    return out;
  }
  if (r.arms.empty()) return out;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    out.note = fmt::format("plots skipped: cannot create {}: {}", dir.string(), ec.message());
    return out;
  }
  std::vector<std::string> problems;
  for (const LayoutRecord& l : r.layouts) {
    const std::vector<std::tuple<std::string, std::string, ScoresPlot>> kinds = {
        {"scores", "session scores", ScoresPlot::kDecode},
        {"scaling", "concurrency scaling", ScoresPlot::kDecode},
        {"latency", "latency session scores", ScoresPlot::kLatency},
        {"startup", "startup and memory session scores", ScoresPlot::kLaunch},
        {"prefill", "prefill session scores", ScoresPlot::kPrefill}};
    for (const auto& kind : kinds) {
      const std::string& prefix = std::get<0>(kind);
      const std::string& title = std::get<1>(kind);
      const std::filesystem::path svg = dir / FileName(prefix, l.name);
      const std::string script = prefix == "scaling" ? ScalingScript(r, l.name, svg) : ScoresScript(r, l.name, svg, std::get<2>(kind));
      if (script.empty()) continue;
      std::filesystem::path gp = svg;
      gp.replace_extension(".gp");
      std::ofstream(gp) << script;
      const std::string problem = RunGnuplot(program, gp);
      if (problem.empty() && std::filesystem::exists(svg)) {
        out.plots.push_back({fmt::format("{}: {}", l.name, title), svg});
      } else {
        problems.push_back(problem.empty() ? fmt::format("{} wrote no {}", gnuplot, svg.string()) : problem);
      }
    }
  }
  if (!problems.empty()) out.note = "some plots failed: " + problems.front();
  return out;
}

}  // namespace tandem::reports
