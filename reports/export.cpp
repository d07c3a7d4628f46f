#include "reports/export.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "stats/decode_metrics.hpp"
#include "stats/stats_error.hpp"
#include "store/record_fields.hpp"

namespace tandem::reports {

using store::CampaignRecord;
using store::FamilyMetric;
using store::FamilyScores;
using store::SampleRecord;
using store::SessionRecord;
using store::WorkloadRecord;

namespace {

using nlohmann::json;

// Rows as JSON objects with a fixed key order (the CSV columns).
struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<json>> rows;
};

Table Samples(const CampaignRecord& r) {
  Table t;
  t.columns = {"sample_id",
               "session_id",
               "session_order",
               "layout",
               "arm",
               "workload",
               "kind",
               "warmup",
               "case",
               "weight",
               "repeat",
               "level",
               "batch",
               "slot",
               "context",
               "role",
               "nonce",
               "status",
               "error",
               "t_start",
               "t_first_output",
               "t_first_content",
               "t_finish",
               "prompt_tokens",
               "completion_tokens",
               "cached_tokens",
               "chunks",
               "tokenizer_tokens",
               "decode_rate",
               "finish_reason",
               "content_sha256",
               "valid",
               "passed",
               "checks",
               "flags",
               "draft",
               "content"};
  for (const SampleRecord& x : r.samples) {
    const SessionRecord* s = r.Session(x.session);
    const WorkloadRecord* w = r.Workload(x.run);
    json rate = nullptr;  // an invalid sample, or one without a decode interval, has none
    if (x.valid) {
      try {
        rate = stats::DecodeRate({x.completion_tokens, x.t_first_output, x.t_finish});
      } catch (const stats::StatsError&) {
      }
    }
    t.rows.push_back({x.id,
                      x.session,
                      s ? json(s->order_index) : json(nullptr),
                      s ? json(s->layout) : json(nullptr),
                      s ? json(s->arm) : json(nullptr),
                      x.workload,
                      w ? json(std::string(ToString(w->kind))) : json(nullptr),
                      w ? json(w->warmup) : json(nullptr),
                      x.case_id,
                      x.weight,
                      x.repeat,
                      x.level,
                      x.batch,
                      x.slot,
                      x.context,
                      x.role,
                      x.nonce,
                      x.status,
                      x.error,
                      x.t_start,
                      x.t_first_output,
                      x.t_first_content,
                      x.t_finish,
                      x.prompt_tokens,
                      x.completion_tokens,
                      x.cached_tokens,
                      x.chunks,
                      x.tokenizer_tokens,
                      rate,
                      x.finish_reason,
                      x.content_sha256,
                      x.valid,
                      x.passed,
                      store::ChecksJson(x),
                      store::FlagsJson(x),
                      store::DraftJson(x.draft),
                      x.content});
  }
  return t;
}

Table Scores(const CampaignRecord& r) {
  Table t;
  t.columns = {"layout",  "family", "workload",   "metric",        "greedy", "case",  "level",
               "context", "arm",    "session_id", "session_order", "score",  "values"};
  for (const FamilyScores& f : r.families) {
    for (const auto& [arm, scores] : f.by_arm) {
      for (std::size_t i = 0; i < scores.size(); ++i) {
        const std::int64_t session = f.sessions_by_arm.at(arm)[i];
        const SessionRecord* s = r.Session(session);
        t.rows.push_back({f.layout, f.family, f.workload, ToString(f.metric), f.greedy, f.case_id, f.level, f.context, arm, session,
                          s ? json(s->order_index) : json(nullptr), scores[i], f.values_by_arm.at(arm)[i]});
      }
    }
  }
  return t;
}

std::string CsvField(const json& v) {
  std::string text;
  if (v.is_null()) return "";
  if (v.is_string()) {
    text = v.get<std::string>();
  } else if (v.is_boolean()) {
    return v.get<bool>() ? "1" : "0";
  } else if (v.is_number_float()) {
    return fmt::format("{:.17g}", v.get<double>());
  } else if (v.is_array() && std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number(); })) {
    std::vector<std::string> parts;
    for (const json& x : v) parts.push_back(fmt::format("{:.17g}", x.get<double>()));
    text = fmt::format("{}", fmt::join(parts, ";"));
  } else {
    text = v.dump();
  }
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

}  // namespace

void Export(const CampaignRecord& r, ExportTable which, ExportFormat format, std::ostream& out) {
  const Table t = which == ExportTable::kSamples ? Samples(r) : Scores(r);
  if (format == ExportFormat::kJson) {
    // Objects written by hand to keep the column order (json objects sort their keys).
    out << "[";
    for (std::size_t r_i = 0; r_i < t.rows.size(); ++r_i) {
      out << (r_i == 0 ? "\n {" : ",\n {");
      for (std::size_t i = 0; i < t.columns.size(); ++i)
        out << (i == 0 ? "" : ", ") << json(t.columns[i]).dump() << ": " << t.rows[r_i][i].dump();
      out << "}";
    }
    out << (t.rows.empty() ? "]\n" : "\n]\n");
    return;
  }
  out << fmt::format("{}\r\n", fmt::join(t.columns, ","));
  for (const auto& row : t.rows) {
    std::vector<std::string> fields;
    for (const json& v : row) fields.push_back(CsvField(v));
    out << fmt::format("{}\r\n", fmt::join(fields, ","));
  }
}

}  // namespace tandem::reports
