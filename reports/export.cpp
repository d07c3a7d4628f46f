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

// One sample with its session and workload (either may be missing from a damaged store).
struct SampleRow {
  const SampleRecord& x;
  const SessionRecord* s;
  const WorkloadRecord* w;
};

// An invalid sample, or one without a decode interval, has no rate.
json DecodeRateOf(const SampleRecord& x) {
  if (!x.valid) return nullptr;
  try {
    return stats::DecodeRate({x.completion_tokens, x.t_first_output, x.t_finish});
  } catch (const stats::StatsError&) {
    return nullptr;
  }
}

// Each column beside the value it holds: the CSV's and the JSON's order.
struct SampleColumn {
  const char* name;
  json (*value)(const SampleRow&);
};

const SampleColumn kSampleColumns[] = {
    {"sample_id", [](const SampleRow& r) -> json { return r.x.id; }},
    {"session_id", [](const SampleRow& r) -> json { return r.x.session; }},
    {"session_order", [](const SampleRow& r) -> json { return r.s ? json(r.s->order_index) : json(nullptr); }},
    {"layout", [](const SampleRow& r) -> json { return r.s ? json(r.s->layout) : json(nullptr); }},
    {"arm", [](const SampleRow& r) -> json { return r.s ? json(r.s->arm) : json(nullptr); }},
    {"workload", [](const SampleRow& r) -> json { return r.x.workload; }},
    {"kind", [](const SampleRow& r) -> json { return r.w ? json(std::string(ToString(r.w->kind))) : json(nullptr); }},
    {"warmup", [](const SampleRow& r) -> json { return r.w ? json(r.w->warmup) : json(nullptr); }},
    {"case", [](const SampleRow& r) -> json { return r.x.case_id; }},
    {"weight", [](const SampleRow& r) -> json { return r.x.weight; }},
    {"repeat", [](const SampleRow& r) -> json { return r.x.repeat; }},
    {"level", [](const SampleRow& r) -> json { return r.x.level; }},
    {"batch", [](const SampleRow& r) -> json { return r.x.batch; }},
    {"slot", [](const SampleRow& r) -> json { return r.x.slot; }},
    {"context", [](const SampleRow& r) -> json { return r.x.context; }},
    {"role", [](const SampleRow& r) -> json { return r.x.role; }},
    {"nonce", [](const SampleRow& r) -> json { return r.x.nonce; }},
    {"status", [](const SampleRow& r) -> json { return r.x.status; }},
    {"error", [](const SampleRow& r) -> json { return r.x.error; }},
    {"t_start", [](const SampleRow& r) -> json { return r.x.t_start; }},
    {"t_first_output", [](const SampleRow& r) -> json { return r.x.t_first_output; }},
    {"t_first_content", [](const SampleRow& r) -> json { return r.x.t_first_content; }},
    {"t_finish", [](const SampleRow& r) -> json { return r.x.t_finish; }},
    {"prompt_tokens", [](const SampleRow& r) -> json { return r.x.prompt_tokens; }},
    {"completion_tokens", [](const SampleRow& r) -> json { return r.x.completion_tokens; }},
    {"cached_tokens", [](const SampleRow& r) -> json { return r.x.cached_tokens; }},
    {"chunks", [](const SampleRow& r) -> json { return r.x.chunks; }},
    {"tokenizer_tokens", [](const SampleRow& r) -> json { return r.x.tokenizer_tokens; }},
    {"decode_rate", [](const SampleRow& r) -> json { return DecodeRateOf(r.x); }},
    {"finish_reason", [](const SampleRow& r) -> json { return r.x.finish_reason; }},
    {"content_sha256", [](const SampleRow& r) -> json { return r.x.content_sha256; }},
    {"valid", [](const SampleRow& r) -> json { return r.x.valid; }},
    {"passed", [](const SampleRow& r) -> json { return r.x.passed; }},
    {"checks", [](const SampleRow& r) -> json { return store::ChecksJson(r.x); }},
    {"flags", [](const SampleRow& r) -> json { return store::FlagsJson(r.x); }},
    {"draft", [](const SampleRow& r) -> json { return store::DraftJson(r.x.draft); }},
    {"content", [](const SampleRow& r) -> json { return r.x.content; }},
};

Table Samples(const CampaignRecord& r) {
  Table t;
  for (const SampleColumn& c : kSampleColumns) t.columns.emplace_back(c.name);
  for (const SampleRecord& x : r.samples) {
    const SampleRow row{x, r.Session(x.session), r.Workload(x.run)};
    std::vector<json>& values = t.rows.emplace_back();
    for (const SampleColumn& c : kSampleColumns) values.push_back(c.value(row));
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
