// A store written by an earlier Tandem (golden/earlier_store, made by its
// make_earlier_store.sh): this Tandem must read it and report and gate it exactly as the
// Tandem that wrote it did. The store is kept as `sqlite3 .dump` text and loaded here.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sqlite3.h>

#include <gtest/gtest.h>

#include "reports/markdown_report.hpp"
#include "store/campaign_record.hpp"
#include "store/store.hpp"
#include "tests/support/run_command.hpp"

namespace tandem::reports {
namespace {

namespace fs = std::filesystem;

const fs::path kDir = fs::path(TANDEM_REPORTS_GOLDEN_DIR) / "earlier_store";

std::string Read(const fs::path& file) {
  std::ifstream in(file);
  EXPECT_TRUE(in) << file;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string WithStore(std::string text, const std::string& path) {
  for (std::size_t at; (at = text.find(path)) != std::string::npos;) text.replace(at, path.size(), "STORE");
  return text;
}

class EarlierStore : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem-earlier-store-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "store.db").string();
    sqlite3* handle = nullptr;
    ASSERT_EQ(sqlite3_open(db_.c_str(), &handle), SQLITE_OK);
    char* error = nullptr;
    const int rc = sqlite3_exec(handle, Read(kDir / "store.sql").c_str(), nullptr, nullptr, &error);
    const std::string message = error ? error : "";
    sqlite3_free(error);
    sqlite3_close(handle);
    ASSERT_EQ(rc, SQLITE_OK) << message;
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string db_;
};

TEST_F(EarlierStore, ReportsByteForByteAsTheTandemThatWroteIt) {
  const store::Store store = store::Store::Open(db_, store::OpenMode::kReadOnly);
  const store::CampaignRecord record = store::LoadCampaignRecord(store, std::nullopt);
  EXPECT_EQ(WithStore(RenderReport(record, {}) + "\n", db_), Read(kDir / "report.md"));
}

TEST_F(EarlierStore, GatesAsTheTandemThatWroteIt) {
  const testing::CommandResult gate = testing::RunCommand(TANDEM_BIN, {"gate", db_});
  EXPECT_EQ(WithStore(gate.out + gate.err, db_) + "exit status " + std::to_string(gate.exit_code) + "\n", Read(kDir / "gate.txt"));
}

}  // namespace
}  // namespace tandem::reports
