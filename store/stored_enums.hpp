#pragma once

#include <string>
#include <string_view>

// The enumerations a store keeps as words. Only the SQL layer converts: code above it
// compares values, never text. A stored word this Tandem does not know is an InputError
// naming `where` (the store, table and row) and the word.
namespace tandem::store {

enum class SessionStatus {
  kPlanned,   // not run yet
  kRunning,   // started; a harness that died leaves it so (resume runs it again)
  kComplete,  // every workload ran
  kFailed,    // ended early; `reason` says why
  kSkipped,   // never run: its layout was decided first (sequential stopping)
};

enum class WorkloadKind { kBattery, kConcurrency, kMixed, kRetainedContext, kPrefill };

// Where an arm's images come from.
enum class ArmKind { kBinary, kGit, kCommand, kExternal, kContainer, kMixed };

std::string_view ToString(SessionStatus status);
std::string_view ToString(WorkloadKind kind);
std::string_view ToString(ArmKind kind);

SessionStatus ParseSessionStatus(std::string_view word, const std::string& where);
WorkloadKind ParseWorkloadKind(std::string_view word, const std::string& where);
ArmKind ParseArmKind(std::string_view word, const std::string& where);

}  // namespace tandem::store
