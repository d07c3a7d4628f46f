#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "store/gpu_conditions.hpp"
#include "store/session_startup.hpp"
#include "store/stored_enums.hpp"

struct sqlite3;
struct sqlite3_stmt;

// The campaign database (SQLite, WAL). Every sample is kept raw; figures are always
// recomputed from samples. Schema: docs/store-schema.md.
namespace tandem::store {

// How a command opens a store.
enum class OpenMode {
  // `tandem run`: a new (or empty) file gets the schema; an existing file must be a Tandem
  // store, which is upgraded (columns added) if it is older.
  kCreate,
  // `tandem run --resume`: an existing Tandem store, upgraded if older; nothing is created.
  kExisting,
  // The reading commands: SQLITE_OPEN_READONLY, and nothing written — no schema, no journal
  // mode, no upgrade (readers take an older store as it is: see HasColumn).
  kReadOnly,
};

struct SessionRow {
  std::int64_t id = 0;
  int order_index = 0;
  std::int64_t layout_id = 0;
  std::int64_t arm_id = 0;
  std::string layout;
  std::string arm;
  SessionStatus status = SessionStatus::kPlanned;
  std::string reason;
  int attempts = 0;
};

struct SampleRow {
  std::string case_id;
  int repeat = 0;
  int level = 1;       // concurrency of the batch it ran in
  int batch = 0;       // which batch of the workload
  int slot = 0;        // position in its batch
  int context = 0;     // retained_context: the context size asked for; prefill: the cell's base
  int new_tokens = 0;  // prefill: the tokens the cell's child adds to its base
  // "" | probe | parent | child | control (retained context's fresh conversations) | retry (a
  // prefill try that missed its cache accounting and was sent again); retained context marks
  // a thinking conversation's with " thinking".
  std::string role;
  std::string nonce;
  double weight = 0;
  std::string request_json;
  int status = 0;
  std::string error;
  double t_start = 0, t_first_output = 0, t_first_content = 0, t_finish = 0;
  int prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  int chunks = 0;
  int tokenizer_tokens = 0;
  std::string content, reasoning, content_sha256, finish_reason;
  std::string checks_json;  // {"check": true|false, ...}
  std::string flags_json = "{}";
  std::string gaps_json = "[]";  // seconds between consecutive text deltas
  std::string draft_json =
      "{}";  // Δ of /v1/stats draft counters around the sample's batch  // disagreements worth a look that fail nothing, e.g. token counts
  bool valid = false;   // integrity: usable as a timing
  bool passed = false;  // every check passed
};

// An arm's stored identity (a resumed campaign must run the same images).
struct ArmRow {
  std::int64_t id = 0;
  std::string label, coordinator_image, worker_image;
};

// One session as `tandem show` prints it.
struct SessionDetail {
  int order_index = 0;
  int attempts = 0;
  std::string layout, arm, runtime_revision;
  SessionStatus status = SessionStatus::kPlanned;
  std::string reason, started_at, finished_at;
  std::string host_json, served_json, processes_json;
  SessionStartup startup;        // none in a store from before launches were timed
  SessionConditions conditions;  // none where no host had nvidia-smi
};

// One workload run of a session, with counts of its samples.
struct WorkloadSummary {
  std::string name;
  WorkloadKind kind = WorkloadKind::kBattery;
  bool warmup = false;
  std::int64_t samples = 0, valid = 0, passed = 0;
  std::int64_t flagged = 0;  // samples with flags (token counts disagree)
  std::string result_json;
};

class Store {
 public:
  // Throws InputError naming the file: "FILE: no such store" (kExisting, kReadOnly: nothing
  // is created), "FILE is not a Tandem store (no 'session' table)" for another program's
  // database, an empty file read, or a file that is not SQLite.
  static Store Open(const std::filesystem::path& file, OpenMode mode = OpenMode::kCreate);
  Store(Store&& other) noexcept;
  Store& operator=(Store&& other) noexcept;
  ~Store();

  // Campaigns.
  std::int64_t CreateCampaign(const std::string& name, const std::string& file, const std::string& yaml, const std::string& yaml_sha256,
                              const std::string& model_path, const std::string& model_revision, const std::string& host_json);
  std::optional<std::int64_t> LatestCampaign() const;
  std::string CampaignYaml(std::int64_t campaign) const;
  std::string CampaignField(std::int64_t campaign, const std::string& column) const;
  void SetCampaignStatus(std::int64_t campaign, const std::string& status);
  // The campaign's `gate:` defaults (JSON), for `tandem gate`.
  void SetCampaignGate(std::int64_t campaign, const std::string& gate_json);

  std::int64_t AddArm(std::int64_t campaign, int position, const std::string& label, ArmKind kind, const std::string& revision,
                      const std::string& coordinator_image, const std::string& worker_image, const std::string& launch_json);
  // The model an arm serves, as first seen (fields already set are kept): its id and
  // revision from /v1/models, and the SHA-256 of the checkpoint's config.json.
  void SetArmModel(std::int64_t arm, const std::string& model_id, const std::string& model_revision, const std::string& config_sha256);
  std::vector<ArmRow> Arms(std::int64_t campaign) const;  // by position
  // Where a role (coordinator | worker) of an arm runs on a host, and its identity read
  // there: the executable's sha256 computed on the host, or the container image's ID.
  void AddArmImage(std::int64_t arm, const std::string& role, const std::string& host, const std::string& image_id,
                   const std::string& location);
  std::int64_t AddLayout(std::int64_t campaign, int position, const std::string& name, const std::string& spec_json);
  std::int64_t AddSession(std::int64_t campaign, int order_index, std::int64_t layout, std::int64_t arm);

  // Sessions.
  std::vector<SessionRow> Sessions(std::int64_t campaign) const;
  std::optional<SessionDetail> Session(std::int64_t session) const;
  std::vector<WorkloadSummary> WorkloadSummaries(std::int64_t session) const;  // in run order
  // Marks it running; returns which attempt this is (1 for the first; retries and resumes
  // count on), whose logs go to their own directory.
  int StartSession(std::int64_t session, const std::string& host_json);
  void FinishSession(std::int64_t session, SessionStatus status, const std::string& reason, const std::string& served_json,
                     const std::string& processes_json);
  // The processes a running session launched (pid = process group, start ticks), kept
  // so that a resume can kill what a dead harness left behind.
  void SetSessionProcesses(std::int64_t session, const std::string& processes_json);
  // How the session's launch went (the startup and memory families' source).
  void SetSessionStartup(std::int64_t session, const SessionStartup& startup);
  // The GPUs' conditions through the session, and what breached the campaign's controls.
  void SetSessionConditions(std::int64_t session, const SessionConditions& conditions);
  std::string SessionProcesses(std::int64_t session) const;
  // Forgets everything a session recorded (a killed run): it becomes planned again.
  void ResetSession(std::int64_t session);

  // Workloads and samples.
  std::int64_t StartWorkloadRun(std::int64_t session, const std::string& name, WorkloadKind kind, bool warmup, const std::string& spec_json,
                                const std::string& stats_before);
  void FinishWorkloadRun(std::int64_t run, const std::string& stats_after, const std::string& result_json);
  void AddSample(std::int64_t run, std::int64_t session, const SampleRow& sample);
  void SetSampleCheck(std::int64_t sample, const std::string& check, bool passed);

  // Runs `fn` inside one transaction (all or nothing).
  template <typename Fn>
  void Transaction(Fn fn) {
    Exec("BEGIN IMMEDIATE");
    try {
      fn();
      Exec("COMMIT");
    } catch (...) {
      Exec("ROLLBACK");
      throw;
    }
  }
  void Exec(const std::string& sql);
  // Whether a table has a column: stores written before a column was added lack it until
  // a writing command opens them.
  bool HasColumn(const std::string& table, const std::string& column) const;
  sqlite3* handle() const { return db_; }
  const std::filesystem::path& file() const { return file_; }

 private:
  Store(sqlite3* db, std::filesystem::path file) : db_(db), file_(std::move(file)) {}
  void Close();
  sqlite3* db_ = nullptr;
  std::filesystem::path file_;
  // A reader of a WAL store makes its -wal and -shm files when none are there; it cannot
  // remove them itself (read-only), so Close() leaves that to SQLite on a connection that
  // only reads, as the last one out would.
  bool remove_wal_files_ = false;
};

// A prepared statement with typed binds and reads, for the store and its readers.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(int index, std::int64_t value);
  Statement& Bind(int index, double value);
  Statement& Bind(int index, const std::string& value);
  bool Step();  // true while a row is available
  void Run();   // executes to completion
  std::int64_t Int(int column) const;
  double Double(int column) const;
  std::string Text(int column) const;
  bool IsNull(int column) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace tandem::store
