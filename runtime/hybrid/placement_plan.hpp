#pragma once

#include <string>
#include <vector>

#include "runtime/engine/moe_slices.hpp"
#include "runtime/model/model_config.hpp"

namespace tandem::rt {

enum class ExpertParallel { kTensor, kExpert };  // "tp" | "ep"
enum class WireDtype { kBf16, kFp8 };            // hidden rows on the wire
enum class PartialDtype { kF64, kF32, kBf16 };   // partial rows coming back

// How a coordinator lays the experts out over processes (the `--experts`,
// `--expert-parallel`, `--local-expert-layers`, `--coordinator-ranks`, `--peer`
// flags).
struct Layout {
  std::vector<std::string> workers;  // host:port of each expert worker, in rank order
  ExpertParallel parallel = ExpertParallel::kTensor;
  int local_expert_layers = 0;  // the first K MoE layers keep their experts on the coordinator ranks
  int coordinator_ranks = 1;    // 2: a peer process holds a TP2 half of the coordinator's experts
  std::string peer;             // host:port of that peer when coordinator_ranks == 2
  WireDtype wire = WireDtype::kBf16;
  PartialDtype partial = PartialDtype::kF64;

  bool distributed() const { return !workers.empty() || coordinator_ranks == 2; }
};

// One process of the layout and everything it holds.
struct RankPlan {
  int rank = 0;
  std::string role;     // "coordinator" | "peer" | "worker"
  std::string address;  // empty for the coordinator itself
  std::vector<LayerSlice> slices;
};

// What a model's experts allow a layout to cut.
struct ExpertCuts {
  int column_multiple = 1;    // routed experts' intermediate columns are cut at multiples of this
  std::string column_unit;    // what the multiple is, for the error
  bool shared_whole = false;  // the shared experts stay whole, on rank 0

  // DeepSeek V4.1: FP4 down projections cut at whole 32-column scale blocks; the shared
  // expert (which rounds its output as the reference's) whole.
  static ExpertCuts V41();
};

// Which rank owns which (expert range, intermediate slice) of every MoE layer,
// and which ranks answer for each layer. Rank 0 is the coordinator, rank 1 the
// peer when there are two coordinator ranks, then the workers in --experts order.
//
//  - the first `local_expert_layers` MoE layers stay on the coordinator ranks:
//    all of each expert on rank 0, or an intermediate half each on ranks 0 and 1;
//  - every other MoE layer goes to the workers: `tp` gives each worker a 1/N
//    slice of every expert's intermediate dimension, `ep` gives each worker a
//    contiguous 1/N of the experts, whole;
//  - shared experts stay on the coordinator ranks (halved between 0 and 1 with
//    two ranks, unless `ExpertCuts::shared_whole`);
//  - with no workers, every layer is local.
struct PlacementPlan {
  std::vector<RankPlan> ranks;

  static PlacementPlan Compute(const ModelConfig& config, const Layout& layout,
                               const ExpertCuts& cuts = {});  // throws std::invalid_argument

  // The ranks holding part of `layer`, ascending: the order partials are summed in.
  std::vector<int> OwnersOf(int layer) const;
  std::string ToJson() const;
  std::string Summary() const;  // a few lines for the log
};

std::string_view ToString(ExpertParallel p);
std::string_view ToString(WireDtype d);
std::string_view ToString(PartialDtype d);

}  // namespace tandem::rt
