// The reading commands (`sessions`, `show`, `report`, `gate`, `export`) through the real
// `tandem`: they open a store read-only, so a file that is not a Tandem store (empty, or
// another program's SQLite database) is refused with exit code 2 and left exactly as it
// was (bytes, mtime, journal mode, no -wal/-shm/-journal beside it), a missing file is
// named and not created, and a real store, old or new, reads as before and is not touched.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <sqlite3.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/sha256.hpp"
#include "tests/support/fixture_store.hpp"
#include "tests/support/run_command.hpp"

namespace tandem::harness {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

// Every reading command of `tandem`, on `db`.
std::vector<std::vector<std::string>> ReadingCommands(const std::string& db) {
  return {{"sessions", db}, {"show", db, "1"}, {"report", db}, {"gate", db}, {"export", db, "--format", "csv"}};
}

// What must not change: the bytes, the mtime, and the files beside it.
struct FileState {
  std::string sha256;
  fs::file_time_type mtime;
  std::vector<std::string> siblings;
  bool operator==(const FileState&) const = default;
};

void PrintTo(const FileState& s, std::ostream* os) {
  *os << "sha256 " << s.sha256.substr(0, 12) << ", mtime " << s.mtime.time_since_epoch().count() << ", beside it:";
  for (const std::string& name : s.siblings) *os << " " << name;
}

FileState StateOf(const fs::path& file) {
  FileState s{FileSha256(file), fs::last_write_time(file), {}};
  for (const auto& e : fs::directory_iterator(file.parent_path())) s.siblings.push_back(e.path().filename().string());
  std::sort(s.siblings.begin(), s.siblings.end());
  return s;
}

// Runs SQL on a database with SQLite directly (not through the store), returning the
// first column of the first row.
std::string Sql(const fs::path& file, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK) {
    for (int rc; (rc = sqlite3_step(stmt)) == SQLITE_ROW;) {
      if (out.empty() && sqlite3_column_text(stmt, 0) != nullptr) out = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    }
  } else {
    ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

class ReadOnlyStore : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / fmt::format("tandem-readonly-{}-{}", info->name(), ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Backdates a file, so that a write in the same second would show in its mtime.
  static void Backdate(const fs::path& file) { fs::last_write_time(file, fs::last_write_time(file) - 1h); }

  // A store as `tandem run` leaves it: WAL mode, from the report's fixture.
  fs::path RealStore(const std::string& name = "real.db") const {
    std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/tests/reports/golden/report_fixture.json");
    const json fixture = json::parse(in);
    const fs::path db = dir_ / name;
    testing::WriteFixtureStore(fixture, db);
    Backdate(db);
    return db;
  }

  // Each reading command refuses `db` with exit code 2 and a message containing `says`,
  // and leaves it as it was.
  void ExpectRefusedUntouched(const fs::path& db, const std::string& says) {
    const FileState before = StateOf(db);
    for (const auto& args : ReadingCommands(db.string())) {
      const auto r = testing::RunCommand(TANDEM_BIN, args, 60s);
      EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.out << r.err;
      EXPECT_NE(r.err.find(says), std::string::npos) << args[0] << ": " << r.err;
      EXPECT_EQ(StateOf(db), before) << args[0] << " changed " << db;
    }
  }

  fs::path dir_;
};

TEST_F(ReadOnlyStore, AnEmptyFileIsNotAStoreAndStaysEmpty) {
  const fs::path db = dir_ / "empty.db";
  std::ofstream{db};
  Backdate(db);
  ExpectRefusedUntouched(db, fmt::format("{} is not a Tandem store (no 'session' table)", db.string()));
  EXPECT_EQ(fs::file_size(db), 0u);
}

TEST_F(ReadOnlyStore, AnotherProgramsDatabaseIsRefusedAndLeftAsItWas) {
  const fs::path db = dir_ / "notes.db";
  Sql(db, "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)");
  Sql(db, "INSERT INTO notes (text) VALUES ('mine')");
  Backdate(db);
  ASSERT_EQ(Sql(db, "PRAGMA journal_mode"), "delete");
  ExpectRefusedUntouched(db, fmt::format("{} is not a Tandem store (no 'session' table)", db.string()));
  EXPECT_EQ(Sql(db, "PRAGMA journal_mode"), "delete");
  EXPECT_EQ(Sql(db, "SELECT group_concat(name) FROM sqlite_master"), "notes");
  // Writing commands refuse it too, rather than adding their tables to it.
  const FileState before = StateOf(db);
  const auto resume = testing::RunCommand(TANDEM_BIN, {"run", "--resume", db.string(), "--quiet"}, 60s);
  EXPECT_EQ(resume.exit_code, 2) << resume.err;
  EXPECT_NE(resume.err.find(fmt::format("{} is not a Tandem store (no 'session' table)", db.string())), std::string::npos) << resume.err;
  EXPECT_EQ(StateOf(db), before);
}

TEST_F(ReadOnlyStore, AFileThatIsNotSqliteIsRefused) {
  const fs::path db = dir_ / "text.db";
  std::ofstream(db) << "not a database, just text that is long enough to hold an SQLite header and then some more bytes\n";
  Backdate(db);
  ExpectRefusedUntouched(db, fmt::format("{} is not a Tandem store", db.string()));
}

TEST_F(ReadOnlyStore, AMissingFileIsNamedAndNotCreated) {
  const fs::path db = dir_ / "missing.db";
  for (const auto& args : ReadingCommands(db.string())) {
    const auto r = testing::RunCommand(TANDEM_BIN, args, 60s);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find(fmt::format("{}: no such store", db.string())), std::string::npos) << args[0] << ": " << r.err;
    EXPECT_FALSE(fs::exists(db)) << args[0];
  }
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(ReadOnlyStore, ARealStoreReadsAsBeforeAndIsNotTouched) {
  const fs::path db = RealStore();
  ASSERT_EQ(Sql(db, "PRAGMA journal_mode"), "wal");
  const FileState before = StateOf(db);
  for (const auto& args : ReadingCommands(db.string())) {
    const auto r = testing::RunCommand(TANDEM_BIN, args, 120s);
    // The gate's verdict is its exit code (0, 1, 2 inconclusive); the others succeed.
    if (args[0] != "gate") {
      EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
    }
    EXPECT_EQ(r.err.find("error"), std::string::npos) << args[0] << ": " << r.err;
    EXPECT_FALSE(r.out.empty()) << args[0];
    // No -wal or -shm left beside it by a reader.
    EXPECT_EQ(StateOf(db), before) << args[0];
  }
  const auto report = testing::RunCommand(TANDEM_BIN, {"report", db.string()}, 120s);
  EXPECT_NE(report.out.find("# "), std::string::npos) << report.out;
}

TEST_F(ReadOnlyStore, AStoreFromBeforeInterTokenGapsReadsWithoutBeingUpgraded) {
  const fs::path db = RealStore("old.db");
  Sql(db, "ALTER TABLE sample DROP COLUMN gaps_json");
  Backdate(db);
  const FileState before = StateOf(db);
  for (const auto& args : ReadingCommands(db.string())) {
    const auto r = testing::RunCommand(TANDEM_BIN, args, 120s);
    if (args[0] != "gate") {
      EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
    }
    EXPECT_EQ(r.err.find("error"), std::string::npos) << args[0] << ": " << r.err;
    EXPECT_EQ(StateOf(db), before) << args[0];
  }
  EXPECT_EQ(Sql(db, "SELECT COUNT(*) FROM pragma_table_info('sample') WHERE name = 'gaps_json'"), "0");
}

}  // namespace
}  // namespace tandem::harness
