#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/campaign/campaign.hpp"
#include "harness/campaign/corpus.hpp"
#include "harness/campaign/nonce.hpp"
#include "store/store.hpp"

namespace tandem::harness {

// Everything a workload needs from its session.
struct WorkloadContext {
  std::string base_url;
  double request_timeout_s = 600;
  const Corpus* corpus = nullptr;
  const NonceBook* nonces = nullptr;
  int workload_index = 0;  // its range of nonce markers
  // 0 for a relaunched server. A server that is not relaunched (an external arm) keeps
  // its prefix cache between sessions, so its n-th session takes the n-th block of the
  // workload's nonce positions: markers it has not seen.
  int nonce_round = 0;
  const rt::Tokenizer* tokenizer = nullptr;
  int cache_bound = 4;
  std::function<void(int done, int total)> progress;  // may be empty
  std::string model = "tandem";                       // the model id the server lists first in /v1/models
  std::string api_key;                                // sent as `Authorization: Bearer` on every request; may be empty
};

struct WorkloadOutcome {
  std::vector<store::SampleRow> samples;
  nlohmann::json result;  // the workload's figures, recomputed later from the samples anyway
};

// Requests a workload sends per session (for nonce budgets and progress).
int CountRequests(const WorkloadSpec& workload, const Corpus& corpus);

// Runs one workload against a running server:
//   battery          — each repeat sends every weighted case (and the counting
//                      diagnostic) one at a time; weighted decode per repeat;
//   concurrency      — for each case and level C, C identical requests at once per
//                      repeat; aggregate throughput per batch;
//   mixed            — at each level, C requests rotating code/fable/topic at once;
//   retained_context — per context size, a parent turn whose prompt fills the prefix
//                      to about that many tokens, then `children` follow-up turns that
//                      must reuse it (cache-hit accounting checked).
WorkloadOutcome RunWorkload(const WorkloadSpec& workload, const WorkloadContext& context);

}  // namespace tandem::harness
