#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/traffic/checks.hpp"
#include "harness/traffic/sse_client.hpp"
#include "harness/traffic/workload_runner.hpp"

// Internal to harness/traffic: the runner every workload kind sends its requests through,
// one kind's sequence per member function (each kind in a file of its own where it is long).
namespace tandem::harness {

// One request to send, and where its sample goes.
struct Planned {
  const CorpusCase* c = nullptr;
  nlohmann::ordered_json body;  // ordered: a response_format schema keeps its key order
  store::SampleRow sample;
  CheckContext check;
};

// Template tokens the server adds around a conversation's text, read from its usage: the
// prefill matrix and retained context fit their prompts to the token with them.
struct TemplateOverhead {
  int first = 0;  // a one-message conversation's prompt tokens beyond its text's
  int turn = 0;   // a following turn's (the fixed answer, then the next user message) beyond the new text's
};

class ContextSource;

// The answer a prefill parent and a probe's first turn are given in the conversation that follows.
inline constexpr const char* kFixedAnswer = "OK.";

// One try of a prefill cell in one round (-1: the discarded warmup round), with its nonce
// position and its parent's batch (the child's is the next): fixed by (cell, round, try), so
// a retry in one session does not shift what the next requests are called in another (the
// greedy comparison across sessions pairs requests by them).
struct PrefillCell {
  int base = 0, add = 0, round = 0;
  std::uint64_t position = 0;
  int batch = 0;
};

// The requests a retained-context or prefill workload sends at most per session (a prefill
// cell's tries all counted).
int CountRetainedContextRequests(const WorkloadSpec& w, const Corpus& corpus);
int CountPrefillRequests(const WorkloadSpec& w);

class Runner {
 public:
  Runner(const WorkloadSpec& w, const WorkloadContext& ctx) : w_(w), ctx_(ctx), total_(CountRequests(w, *ctx.corpus)) {}

  WorkloadOutcome Run();

 private:
  // A request for `c`, its prompt starting with the nonce at `position` (unless the case
  // opts out or `nonced` is false).
  Planned Make(const CorpusCase& c, std::uint64_t position, bool nonced = true);
  // Sends `batch` at once (one thread each) and records the samples.
  void Send(std::vector<Planned>& batch);
  // Sends one request; its sample is out_.samples.back(), its response last_.back().
  store::SampleRow& SendOne(Planned& p);
  // Measures the template overhead with one or two short requests (role "probe"); with
  // `thinking`, of a conversation that thinks. Throws std::runtime_error when the server's
  // usage is missing.
  TemplateOverhead Probe(bool thinking, bool with_turn);
  // The nonce position for the next request.
  std::uint64_t NextPosition() { return position_++; }

  // One try of a prefill cell's parent and child; false when the child missed its cache
  // accounting and another try is due (it is then recorded as role "retry").
  bool PrefillTry(const ContextSource& source, const TemplateOverhead& overhead, const PrefillCell& cell, bool last_try);
  // Retained context: every case as a fresh conversation (the control and the 0 row), and
  // one context size's parent and its children.
  void FreshConversations(const std::vector<const CorpusCase*>& cases, const std::string& role, bool thinking);
  void RetainedParentAndChildren(const ContextSource& source, const TemplateOverhead& overhead, int size, bool thinking,
                                 const std::vector<const CorpusCase*>& cases);

  void Battery();
  void Concurrency(const std::vector<std::string>& cases, bool mixed);
  void RetainedContext();
  void Prefill();

  const WorkloadSpec& w_;
  const WorkloadContext& ctx_;
  int total_;
  int done_ = 0;
  int batch_ = 0;
  std::uint64_t position_ = 0;
  std::vector<StreamedCompletion> last_;
  WorkloadOutcome out_;
};

}  // namespace tandem::harness
