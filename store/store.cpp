#include "store/store.hpp"

#include <algorithm>
#include <ctime>
#include <set>
#include <type_traits>
#include <utility>

#include <sqlite3.h>

#include <fmt/format.h>

#include "common/input_error.hpp"

namespace tandem::store {

namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS campaign (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  file TEXT NOT NULL,
  yaml TEXT NOT NULL,
  yaml_sha256 TEXT NOT NULL,
  model_path TEXT NOT NULL,
  model_revision TEXT NOT NULL,
  host_json TEXT NOT NULL,
  gate_json TEXT NOT NULL DEFAULT '{}',
  status TEXT NOT NULL DEFAULT 'running',
  created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS arm (
  id INTEGER PRIMARY KEY,
  campaign_id INTEGER NOT NULL REFERENCES campaign(id),
  position INTEGER NOT NULL,
  label TEXT NOT NULL,
  source_kind TEXT NOT NULL,
  runtime_revision TEXT NOT NULL,
  coordinator_image TEXT NOT NULL,
  worker_image TEXT NOT NULL,
  launch_json TEXT NOT NULL,
  model_id TEXT NOT NULL DEFAULT '',
  model_revision TEXT NOT NULL DEFAULT '',
  config_sha256 TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS arm_image (
  arm_id INTEGER NOT NULL REFERENCES arm(id),
  role TEXT NOT NULL,
  host TEXT NOT NULL,
  image_id TEXT NOT NULL,
  location TEXT NOT NULL,
  PRIMARY KEY (arm_id, role, host)
);
CREATE TABLE IF NOT EXISTS layout (
  id INTEGER PRIMARY KEY,
  campaign_id INTEGER NOT NULL REFERENCES campaign(id),
  position INTEGER NOT NULL,
  name TEXT NOT NULL,
  spec_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS session (
  id INTEGER PRIMARY KEY,
  campaign_id INTEGER NOT NULL REFERENCES campaign(id),
  order_index INTEGER NOT NULL,
  layout_id INTEGER NOT NULL REFERENCES layout(id),
  arm_id INTEGER NOT NULL REFERENCES arm(id),
  status TEXT NOT NULL DEFAULT 'planned',
  reason TEXT NOT NULL DEFAULT '',
  attempts INTEGER NOT NULL DEFAULT 0,
  started_at TEXT,
  finished_at TEXT,
  host_json TEXT NOT NULL DEFAULT '{}',
  served_json TEXT NOT NULL DEFAULT '{}',
  processes_json TEXT NOT NULL DEFAULT '[]',
  startup_json TEXT NOT NULL DEFAULT '{}',
  conditions_json TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS workload_run (
  id INTEGER PRIMARY KEY,
  session_id INTEGER NOT NULL REFERENCES session(id),
  name TEXT NOT NULL,
  kind TEXT NOT NULL,
  warmup INTEGER NOT NULL,
  spec_json TEXT NOT NULL,
  stats_before TEXT NOT NULL,
  stats_after TEXT,
  result_json TEXT,
  started_at TEXT NOT NULL,
  finished_at TEXT
);
CREATE TABLE IF NOT EXISTS sample (
  id INTEGER PRIMARY KEY,
  workload_run_id INTEGER NOT NULL REFERENCES workload_run(id),
  session_id INTEGER NOT NULL REFERENCES session(id),
  case_id TEXT NOT NULL,
  repeat INTEGER NOT NULL,
  level INTEGER NOT NULL,
  batch INTEGER NOT NULL,
  slot INTEGER NOT NULL,
  context INTEGER NOT NULL,
  new_tokens INTEGER NOT NULL DEFAULT 0,
  role TEXT NOT NULL,
  nonce TEXT NOT NULL,
  weight REAL NOT NULL,
  request_json TEXT NOT NULL,
  status INTEGER NOT NULL,
  error TEXT NOT NULL,
  t_start REAL NOT NULL,
  t_first_output REAL NOT NULL,
  t_first_content REAL NOT NULL,
  t_finish REAL NOT NULL,
  prompt_tokens INTEGER NOT NULL,
  completion_tokens INTEGER NOT NULL,
  cached_tokens INTEGER NOT NULL,
  chunks INTEGER NOT NULL,
  tokenizer_tokens INTEGER NOT NULL,
  content TEXT NOT NULL,
  reasoning TEXT NOT NULL,
  content_sha256 TEXT NOT NULL,
  finish_reason TEXT NOT NULL,
  checks_json TEXT NOT NULL,
  flags_json TEXT NOT NULL,
  draft_json TEXT NOT NULL,
  gaps_json TEXT NOT NULL DEFAULT '[]',
  valid INTEGER NOT NULL,
  passed INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sample_by_run ON sample(workload_run_id);
CREATE INDEX IF NOT EXISTS sample_by_session ON sample(session_id);
CREATE INDEX IF NOT EXISTS run_by_session ON workload_run(session_id);
)sql";

// The tables every Tandem store has; a file without one of them is not a store (the first
// one missing is named).
constexpr const char* kTables[] = {"session", "campaign", "arm", "layout", "workload_run", "sample"};

// Why the database is not a Tandem store: "" when it is one.
std::string NotAStore(sqlite3* db) {
  sqlite3_stmt* stmt = nullptr;
  std::set<std::string> tables;
  int rc = sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'table'", -1, &stmt, nullptr);
  if (rc == SQLITE_OK) {
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) tables.insert(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)));
  }
  const std::string error = rc == SQLITE_DONE ? "" : sqlite3_errmsg(db);
  sqlite3_finalize(stmt);
  if (!error.empty()) return rc == SQLITE_NOTADB ? "not an SQLite database" : fmt::format("unreadable: {}", error);
  for (const char* table : kTables) {
    if (!tables.contains(table)) return fmt::format("no '{}' table", table);
  }
  return "";
}

std::string Now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

}  // namespace

Statement::Statement(sqlite3* db, const std::string& sql) : db_(db) {
  if (sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &stmt_, nullptr) != SQLITE_OK) {
    throw InputError(fmt::format("store: cannot prepare '{}': {}", sql.substr(0, 60), sqlite3_errmsg(db)));
  }
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::Bind(int i, std::int64_t v) {
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}
Statement& Statement::Bind(int i, double v) {
  sqlite3_bind_double(stmt_, i, v);
  return *this;
}
Statement& Statement::Bind(int i, const std::string& v) {
  sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}

bool Statement::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw InputError(fmt::format("store: {}", sqlite3_errmsg(db_)));
}

void Statement::Run() {
  while (Step()) {
  }
}

std::int64_t Statement::Int(int c) const { return sqlite3_column_int64(stmt_, c); }
double Statement::Double(int c) const { return sqlite3_column_double(stmt_, c); }
std::string Statement::Text(int c) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, c));
  return p == nullptr ? "" : std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, c)));
}
bool Statement::IsNull(int c) const { return sqlite3_column_type(stmt_, c) == SQLITE_NULL; }

Store Store::Open(const std::filesystem::path& file, OpenMode mode) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool exists = fs::exists(file, ec);
  if (!exists && mode != OpenMode::kCreate) throw InputError(fmt::format("{}: no such store", file.string()));
  if (exists && !fs::is_regular_file(file, ec)) throw InputError(fmt::format("{}: not a file, so not a store", file.string()));
  // A new file, or an empty one (SQLite's own view of a 0-byte file: a database without tables).
  const bool fresh = mode == OpenMode::kCreate && (!exists || fs::file_size(file, ec) == 0);
  if (mode == OpenMode::kCreate && file.has_parent_path()) fs::create_directories(file.parent_path(), ec);
  const bool had_wal_files = fs::exists(file.string() + "-wal", ec) || fs::exists(file.string() + "-shm", ec);
  const int flags = mode == OpenMode::kReadOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | (fresh ? SQLITE_OPEN_CREATE : 0);
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(file.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    const std::string message = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    throw InputError(fmt::format("{}: cannot open the store: {}", file.string(), message));
  }
  Store store(db, file);
  store.remove_wal_files_ = mode == OpenMode::kReadOnly && !had_wal_files;
  sqlite3_busy_timeout(db, 10000);
  if (mode == OpenMode::kReadOnly) store.Exec("PRAGMA query_only=ON");  // belt and braces: this connection writes nothing
  if (!fresh) {
    // Another program's database (or any file) is refused before anything is written to it.
    const std::string why = NotAStore(db);
    if (!why.empty()) throw InputError(fmt::format("{} is not a Tandem store ({})", file.string(), why));
  }
  if (mode == OpenMode::kReadOnly) return store;
  store.Exec("PRAGMA journal_mode=WAL");
  store.Exec("PRAGMA synchronous=NORMAL");
  store.Exec("PRAGMA foreign_keys=ON");
  // One transaction, so a reader opening the file meanwhile sees all the tables or none.
  store.Transaction([&] {
    store.Exec(kSchema);
    // Stores written before inter-token gaps were recorded: the column, empty for their samples.
    if (!store.HasColumn("sample", "gaps_json")) store.Exec("ALTER TABLE sample ADD COLUMN gaps_json TEXT NOT NULL DEFAULT '[]'");
    // Stores written before launches were timed: the column, nothing measured for their sessions.
    if (!store.HasColumn("session", "startup_json")) store.Exec("ALTER TABLE session ADD COLUMN startup_json TEXT NOT NULL DEFAULT '{}'");
    // Stores written before the prefill matrix: no sample adds tokens to a base.
    if (!store.HasColumn("sample", "new_tokens")) store.Exec("ALTER TABLE sample ADD COLUMN new_tokens INTEGER NOT NULL DEFAULT 0");
    // Stores written before GPU conditions were sampled: nothing sampled for their sessions.
    if (!store.HasColumn("session", "conditions_json")) {
      store.Exec("ALTER TABLE session ADD COLUMN conditions_json TEXT NOT NULL DEFAULT '{}'");
    }
  });
  return store;
}

Store::Store(Store&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      file_(std::move(other.file_)),
      remove_wal_files_(std::exchange(other.remove_wal_files_, false)) {}
Store& Store::operator=(Store&& other) noexcept {
  if (this != &other) {
    Close();
    db_ = std::exchange(other.db_, nullptr);
    file_ = std::move(other.file_);
    remove_wal_files_ = std::exchange(other.remove_wal_files_, false);
  }
  return *this;
}
Store::~Store() { Close(); }

void Store::Close() {
  if (db_ == nullptr) return;
  sqlite3_close(db_);
  db_ = nullptr;
  if (!std::exchange(remove_wal_files_, false)) return;
  std::error_code ec;
  if (!std::filesystem::exists(file_.string() + "-wal", ec) && !std::filesystem::exists(file_.string() + "-shm", ec)) return;
  // This read made them. A connection that may write but only reads removes them when it
  // closes as the last one (its checkpoint has nothing of ours to copy), and leaves them
  // when another connection (a running `tandem run`) still uses them, as SQLite must.
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(file_.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 1000);
    sqlite3_exec(db, "SELECT COUNT(*) FROM sqlite_master", nullptr, nullptr, nullptr);
  }
  sqlite3_close(db);
}

bool Store::HasColumn(const std::string& table, const std::string& column) const {
  Statement s(db_, "SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?");
  s.Bind(1, table).Bind(2, column);
  return s.Step() && s.Int(0) > 0;
}

void Store::Exec(const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string message = error != nullptr ? error : "unknown error";
    sqlite3_free(error);
    throw InputError(fmt::format("{}: store error: {}", file_.string(), message));
  }
}

std::int64_t Store::CreateCampaign(const std::string& name, const std::string& file, const std::string& yaml, const std::string& sha,
                                   const std::string& model_path, const std::string& model_revision, const std::string& host) {
  Statement s(db_,
              "INSERT INTO campaign (name, file, yaml, yaml_sha256, model_path, model_revision, host_json, created_at) "
              "VALUES (?,?,?,?,?,?,?,?)");
  s.Bind(1, name).Bind(2, file).Bind(3, yaml).Bind(4, sha).Bind(5, model_path).Bind(6, model_revision).Bind(7, host).Bind(8, Now()).Run();
  return sqlite3_last_insert_rowid(db_);
}

std::optional<std::int64_t> Store::LatestCampaign() const {
  Statement s(db_, "SELECT id FROM campaign ORDER BY id DESC LIMIT 1");
  if (!s.Step()) return std::nullopt;
  return s.Int(0);
}

std::string Store::CampaignYaml(std::int64_t campaign) const { return CampaignField(campaign, "yaml"); }

std::string Store::CampaignField(std::int64_t campaign, const std::string& column) const {
  static const std::vector<std::string> allowed = {"name",           "file",      "yaml",      "yaml_sha256", "model_path",
                                                   "model_revision", "host_json", "gate_json", "status",      "created_at"};
  if (std::find(allowed.begin(), allowed.end(), column) == allowed.end()) throw InputError("store: no campaign column " + column);
  Statement s(db_, "SELECT " + column + " FROM campaign WHERE id = ?");
  s.Bind(1, campaign);
  if (!s.Step()) throw InputError(fmt::format("{}: no campaign {}", file_.string(), campaign));
  return s.Text(0);
}

void Store::SetCampaignGate(std::int64_t campaign, const std::string& gate_json) {
  Statement(db_, "UPDATE campaign SET gate_json = ? WHERE id = ?").Bind(1, gate_json).Bind(2, campaign).Run();
}

void Store::SetCampaignStatus(std::int64_t campaign, const std::string& status) {
  Statement(db_, "UPDATE campaign SET status = ? WHERE id = ?").Bind(1, status).Bind(2, campaign).Run();
}

std::int64_t Store::AddArm(std::int64_t campaign, int position, const std::string& label, ArmKind kind, const std::string& revision,
                           const std::string& coordinator_image, const std::string& worker_image, const std::string& launch_json) {
  Statement s(db_,
              "INSERT INTO arm (campaign_id, position, label, source_kind, runtime_revision, coordinator_image, worker_image, "
              "launch_json) VALUES (?,?,?,?,?,?,?,?)");
  s.Bind(1, campaign).Bind(2, static_cast<std::int64_t>(position)).Bind(3, label).Bind(4, std::string(ToString(kind))).Bind(5, revision);
  s.Bind(6, coordinator_image).Bind(7, worker_image).Bind(8, launch_json).Run();
  return sqlite3_last_insert_rowid(db_);
}

void Store::SetArmModel(std::int64_t arm, const std::string& model_id, const std::string& model_revision,
                        const std::string& config_sha256) {
  Statement(db_,
            "UPDATE arm SET model_id = CASE WHEN model_id = '' THEN ? ELSE model_id END, "
            "model_revision = CASE WHEN model_revision = '' THEN ? ELSE model_revision END, "
            "config_sha256 = CASE WHEN config_sha256 = '' THEN ? ELSE config_sha256 END WHERE id = ?")
      .Bind(1, model_id)
      .Bind(2, model_revision)
      .Bind(3, config_sha256)
      .Bind(4, arm)
      .Run();
}

void Store::AddArmImage(std::int64_t arm, const std::string& role, const std::string& host, const std::string& image_id,
                        const std::string& location) {
  Statement(db_, "INSERT OR REPLACE INTO arm_image (arm_id, role, host, image_id, location) VALUES (?,?,?,?,?)")
      .Bind(1, arm)
      .Bind(2, role)
      .Bind(3, host)
      .Bind(4, image_id)
      .Bind(5, location)
      .Run();
}

std::vector<ArmRow> Store::Arms(std::int64_t campaign) const {
  Statement s(db_, "SELECT id, label, coordinator_image, worker_image FROM arm WHERE campaign_id = ? ORDER BY position");
  s.Bind(1, campaign);
  std::vector<ArmRow> rows;
  while (s.Step()) rows.push_back({s.Int(0), s.Text(1), s.Text(2), s.Text(3)});
  return rows;
}

std::int64_t Store::AddLayout(std::int64_t campaign, int position, const std::string& name, const std::string& spec_json) {
  Statement s(db_, "INSERT INTO layout (campaign_id, position, name, spec_json) VALUES (?,?,?,?)");
  s.Bind(1, campaign).Bind(2, static_cast<std::int64_t>(position)).Bind(3, name).Bind(4, spec_json).Run();
  return sqlite3_last_insert_rowid(db_);
}

std::int64_t Store::AddSession(std::int64_t campaign, int order_index, std::int64_t layout, std::int64_t arm) {
  Statement s(db_, "INSERT INTO session (campaign_id, order_index, layout_id, arm_id) VALUES (?,?,?,?)");
  s.Bind(1, campaign).Bind(2, static_cast<std::int64_t>(order_index)).Bind(3, layout).Bind(4, arm).Run();
  return sqlite3_last_insert_rowid(db_);
}

std::vector<SessionRow> Store::Sessions(std::int64_t campaign) const {
  Statement s(db_,
              "SELECT s.id, s.order_index, s.layout_id, s.arm_id, l.name, a.label, s.status, s.reason, s.attempts "
              "FROM session s JOIN layout l ON l.id = s.layout_id JOIN arm a ON a.id = s.arm_id "
              "WHERE s.campaign_id = ? ORDER BY s.order_index");
  s.Bind(1, campaign);
  std::vector<SessionRow> rows;
  while (s.Step()) {
    rows.push_back({s.Int(0), static_cast<int>(s.Int(1)), s.Int(2), s.Int(3), s.Text(4), s.Text(5),
                    ParseSessionStatus(s.Text(6), fmt::format("{}: session {}: status", file_.string(), s.Int(0))), s.Text(7),
                    static_cast<int>(s.Int(8))});
  }
  return rows;
}

std::optional<SessionDetail> Store::Session(std::int64_t session) const {
  // A store from before launches were timed or GPUs sampled, opened read-only, lacks the columns.
  const std::string startup = HasColumn("session", "startup_json") ? "se.startup_json" : "'{}'";
  const std::string conditions = HasColumn("session", "conditions_json") ? "se.conditions_json" : "'{}'";
  Statement s(db_,
              "SELECT se.order_index, l.name, a.label, a.runtime_revision, se.status, se.reason, se.started_at, se.finished_at, "
              "se.host_json, se.served_json, se.processes_json, se.attempts, " +
                  startup + ", " + conditions +
                  " FROM session se JOIN layout l ON l.id = se.layout_id "
                  "JOIN arm a ON a.id = se.arm_id WHERE se.id = ?");
  s.Bind(1, session);
  if (!s.Step()) return std::nullopt;
  return SessionDetail{static_cast<int>(s.Int(0)),
                       static_cast<int>(s.Int(11)),
                       s.Text(1),
                       s.Text(2),
                       s.Text(3),
                       ParseSessionStatus(s.Text(4), fmt::format("{}: session {}: status", file_.string(), session)),
                       s.Text(5),
                       s.Text(6),
                       s.Text(7),
                       s.Text(8),
                       s.Text(9),
                       s.Text(10),
                       SessionStartup::FromJson(s.Text(12), fmt::format("{}: session {}: startup_json", file_.string(), session)),
                       SessionConditions::FromJson(s.Text(13), fmt::format("{}: session {}: conditions_json", file_.string(), session))};
}

std::vector<WorkloadSummary> Store::WorkloadSummaries(std::int64_t session) const {
  Statement s(db_,
              "SELECT w.name, w.kind, w.warmup, COUNT(x.id), SUM(x.valid), SUM(x.passed), w.result_json, SUM(x.flags_json <> '{}') "
              "FROM workload_run w LEFT JOIN sample x ON x.workload_run_id = w.id WHERE w.session_id = ? GROUP BY w.id ORDER BY w.id");
  s.Bind(1, session);
  std::vector<WorkloadSummary> rows;
  while (s.Step()) {
    rows.push_back({s.Text(0), ParseWorkloadKind(s.Text(1), fmt::format("{}: session {}: workload_run kind", file_.string(), session)),
                    s.Int(2) != 0, s.Int(3), s.Int(4), s.Int(5), s.Int(7), s.Text(6)});
  }
  return rows;
}

int Store::StartSession(std::int64_t session, const std::string& host_json) {
  Statement(db_,
            "UPDATE session SET status = 'running', attempts = attempts + 1, started_at = ?, finished_at = NULL, "
            "reason = '', host_json = ? WHERE id = ?")
      .Bind(1, Now())
      .Bind(2, host_json)
      .Bind(3, session)
      .Run();
  Statement s(db_, "SELECT attempts FROM session WHERE id = ?");
  s.Bind(1, session);
  return s.Step() ? static_cast<int>(s.Int(0)) : 1;
}

void Store::FinishSession(std::int64_t session, SessionStatus status, const std::string& reason, const std::string& served,
                          const std::string& processes) {
  Statement(db_, "UPDATE session SET status = ?, reason = ?, finished_at = ?, served_json = ?, processes_json = ? WHERE id = ?")
      .Bind(1, std::string(ToString(status)))
      .Bind(2, reason)
      .Bind(3, Now())
      .Bind(4, served)
      .Bind(5, processes)
      .Bind(6, session)
      .Run();
}

void Store::SetSessionStartup(std::int64_t session, const SessionStartup& startup) {
  Statement(db_, "UPDATE session SET startup_json = ? WHERE id = ?").Bind(1, startup.ToJson()).Bind(2, session).Run();
}

void Store::SetSessionConditions(std::int64_t session, const SessionConditions& conditions) {
  Statement(db_, "UPDATE session SET conditions_json = ? WHERE id = ?").Bind(1, conditions.ToJson()).Bind(2, session).Run();
}

void Store::SetSessionProcesses(std::int64_t session, const std::string& processes_json) {
  Statement(db_, "UPDATE session SET processes_json = ? WHERE id = ?").Bind(1, processes_json).Bind(2, session).Run();
}

std::string Store::SessionProcesses(std::int64_t session) const {
  Statement s(db_, "SELECT processes_json FROM session WHERE id = ?");
  s.Bind(1, session);
  return s.Step() ? s.Text(0) : "[]";
}

void Store::ResetSession(std::int64_t session) {
  Transaction([&] {
    Statement(db_, "DELETE FROM sample WHERE session_id = ?").Bind(1, session).Run();
    Statement(db_, "DELETE FROM workload_run WHERE session_id = ?").Bind(1, session).Run();
    Statement(db_, "UPDATE session SET status = 'planned', started_at = NULL, finished_at = NULL WHERE id = ?").Bind(1, session).Run();
  });
}

std::int64_t Store::StartWorkloadRun(std::int64_t session, const std::string& name, WorkloadKind kind, bool warmup,
                                     const std::string& spec_json, const std::string& stats_before) {
  Statement s(db_, "INSERT INTO workload_run (session_id, name, kind, warmup, spec_json, stats_before, started_at) VALUES (?,?,?,?,?,?,?)");
  s.Bind(1, session)
      .Bind(2, name)
      .Bind(3, std::string(ToString(kind)))
      .Bind(4, static_cast<std::int64_t>(warmup))
      .Bind(5, spec_json)
      .Bind(6, stats_before);
  s.Bind(7, Now()).Run();
  return sqlite3_last_insert_rowid(db_);
}

void Store::FinishWorkloadRun(std::int64_t run, const std::string& stats_after, const std::string& result_json) {
  Statement(db_, "UPDATE workload_run SET stats_after = ?, result_json = ?, finished_at = ? WHERE id = ?")
      .Bind(1, stats_after)
      .Bind(2, result_json)
      .Bind(3, Now())
      .Bind(4, run)
      .Run();
}

void Store::AddSample(std::int64_t run, std::int64_t session, const SampleRow& r) {
  Statement s(db_,
              "INSERT INTO sample (workload_run_id, session_id, case_id, repeat, level, batch, slot, context, role, nonce, "
              "weight, request_json, status, error, t_start, t_first_output, t_first_content, t_finish, prompt_tokens, "
              "completion_tokens, cached_tokens, chunks, tokenizer_tokens, content, reasoning, content_sha256, finish_reason, "
              "checks_json, flags_json, draft_json, gaps_json, valid, passed, new_tokens) VALUES "
              "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  int i = 0;
  auto add = [&](auto value) {
    if constexpr (std::is_same_v<decltype(value), int> || std::is_same_v<decltype(value), bool>) {
      s.Bind(++i, static_cast<std::int64_t>(value));
    } else {
      s.Bind(++i, value);
    }
  };
  add(run), add(session), add(r.case_id), add(r.repeat), add(r.level), add(r.batch), add(r.slot), add(r.context), add(r.role);
  add(r.nonce), add(r.weight), add(r.request_json), add(r.status), add(r.error), add(r.t_start), add(r.t_first_output);
  add(r.t_first_content), add(r.t_finish), add(r.prompt_tokens), add(r.completion_tokens), add(r.cached_tokens), add(r.chunks);
  add(r.tokenizer_tokens), add(r.content), add(r.reasoning), add(r.content_sha256), add(r.finish_reason), add(r.checks_json);
  add(r.flags_json), add(r.draft_json), add(r.gaps_json);
  add(r.valid), add(r.passed), add(r.new_tokens);
  s.Run();
}

void Store::SetSampleCheck(std::int64_t sample, const std::string& check, bool passed) {
  // `passed` is recomputed from every check, so marking a check again (a resumed
  // campaign re-marks greedy_match over more sessions) can also clear a failure.
  Statement(db_, "UPDATE sample SET checks_json = json_set(checks_json, '$.' || ?, json(?)) WHERE id = ?")
      .Bind(1, check)
      .Bind(2, std::string(passed ? "true" : "false"))
      .Bind(3, sample)
      .Run();
  Statement(db_,
            "UPDATE sample SET passed = NOT EXISTS (SELECT 1 FROM json_each(sample.checks_json) WHERE json_each.type = 'false') "
            "WHERE id = ?")
      .Bind(1, sample)
      .Run();
}

}  // namespace tandem::store
