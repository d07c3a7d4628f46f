#include "runtime/hybrid/placement_plan.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tandem::rt {

namespace {

// [begin, end) of part i of n equal parts of `total` (the first total % n parts are one longer).
std::pair<int, int> Part(int total, int n, int i) {
  const int base = total / n, extra = total % n;
  const int begin = i * base + std::min(i, extra);
  return {begin, begin + base + (i < extra ? 1 : 0)};
}

}  // namespace

std::string_view ToString(ExpertParallel p) { return p == ExpertParallel::kTensor ? "tp" : "ep"; }
std::string_view ToString(WireDtype d) { return d == WireDtype::kBf16 ? "bf16" : "fp8"; }
std::string_view ToString(PartialDtype d) { return d == PartialDtype::kF64 ? "f64" : d == PartialDtype::kF32 ? "f32" : "bf16"; }

ExpertCuts ExpertCuts::V41() { return {.column_multiple = 32, .column_unit = "DeepSeek V4.1's FP4 scale blocks", .shared_whole = true}; }

PlacementPlan PlacementPlan::Compute(const ModelConfig& c, const Layout& layout, const ExpertCuts& cuts) {
  if (layout.coordinator_ranks != 1 && layout.coordinator_ranks != 2) {
    throw std::invalid_argument(fmt::format("--coordinator-ranks must be 1 or 2, got {}", layout.coordinator_ranks));
  }
  if (layout.coordinator_ranks == 2 && layout.peer.empty()) {
    throw std::invalid_argument("--coordinator-ranks 2 needs --peer HOST:PORT (a `tandem-rt expert --role peer`)");
  }
  if (layout.coordinator_ranks == 1 && !layout.peer.empty()) {
    throw std::invalid_argument("--peer is only used with --coordinator-ranks 2");
  }
  if (layout.local_expert_layers < 0) throw std::invalid_argument("--local-expert-layers must be >= 0");
  const auto workers = static_cast<int>(layout.workers.size());
  const int inter = c.moe_intermediate_size;
  const int shared = c.moe_intermediate_size * c.n_shared_experts;
  const int multiple = std::max(1, cuts.column_multiple);
  if (workers > 0 && layout.parallel == ExpertParallel::kTensor && workers > inter / multiple) {
    throw std::invalid_argument(
        fmt::format("tp over {} workers needs moe_intermediate_size >= {}, the model has {}", workers, workers * multiple, inter));
  }
  if (workers > 0 && layout.parallel == ExpertParallel::kExpert && workers > c.n_routed_experts) {
    throw std::invalid_argument(
        fmt::format("ep over {} workers needs at least {} routed experts, the model has {}", workers, workers, c.n_routed_experts));
  }
  int moe_layers = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) moe_layers += c.IsMoeLayer(l) ? 1 : 0;
  const bool tp_workers = workers > 0 && layout.parallel == ExpertParallel::kTensor && layout.local_expert_layers < moe_layers;
  const bool split_locals = layout.coordinator_ranks == 2 && (workers == 0 || layout.local_expert_layers > 0);

  // A routed expert's intermediate columns are cut only at multiples of a group-quantized
  // checkpoint's group, or of what the model's format needs.
  // `unit` names the granule in the error ("the checkpoint's quantization group 32 (int4)").
  const auto check_cuts = [&](int parts, const std::string& what, int granule, const std::string& unit, const std::string& instead) {
    for (int i = 1; i < parts; ++i) {
      const int cut = Part(inter, parts, i).first;
      if (cut % granule != 0) {
        throw std::invalid_argument(
            fmt::format("{} splits each routed expert's moe_intermediate_size {} at column {}, which is not a "
                        "multiple of {}; {}",
                        what, inter, cut, unit, instead));
      }
    }
  };
  if (multiple > 1) {
    const std::string instead = "use --expert-parallel ep or a split into whole blocks";
    const std::string unit = fmt::format("{} ({})", multiple, cuts.column_unit);
    if (tp_workers) check_cuts(workers, fmt::format("tp over {} workers", workers), multiple, unit, instead);
    if (split_locals) check_cuts(2, "--coordinator-ranks 2", multiple, unit, instead);
  }
  if (c.quantization) {
    const int group = c.quantization->group_size;
    const std::string unit = fmt::format("the checkpoint's quantization group {} ({})", group, ToString(c.quantization->format));
    const std::string instead =
        fmt::format("use --expert-parallel ep, a tp split into multiples of {}, or a checkpoint quantized with a smaller --group", group);
    if (tp_workers) check_cuts(workers, fmt::format("tp over {} workers", workers), group, unit, instead);
    // Two coordinator ranks split the routed experts of the layers they keep.
    if (split_locals) check_cuts(2, "--coordinator-ranks 2", group, unit, instead);
    // Quantized shared experts are split between coordinator ranks the same way.
    if (c.quantization->shared_experts() && layout.coordinator_ranks == 2 && !cuts.shared_whole) {
      const int cut = Part(shared, 2, 1).first;
      if (cut % group != 0) {
        throw std::invalid_argument(
            fmt::format("--coordinator-ranks 2 splits the shared experts' intermediate size {} at column {}, which is not a multiple of "
                        "the checkpoint's quantization group {}; use one coordinator rank or a checkpoint quantized with a smaller --group",
                        shared, cut, group));
      }
    }
  }

  PlacementPlan plan;
  plan.ranks.push_back({0, "coordinator", "", {}});
  if (layout.coordinator_ranks == 2) plan.ranks.push_back({1, "peer", layout.peer, {}});
  const int first_worker = static_cast<int>(plan.ranks.size());
  for (int w = 0; w < workers; ++w) plan.ranks.push_back({first_worker + w, "worker", layout.workers[w], {}});

  int moe_index = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    if (!c.IsMoeLayer(l)) continue;
    const bool local = moe_index++ < layout.local_expert_layers || workers == 0;
    // Coordinator ranks: shared experts always; routed experts of local layers.
    for (int r = 0; r < layout.coordinator_ranks; ++r) {
      LayerSlice s{.layer = l};
      if (cuts.shared_whole) {
        s.shared_end = r == 0 ? shared : 0;
      } else {
        std::tie(s.shared_begin, s.shared_end) = Part(shared, layout.coordinator_ranks, r);
      }
      if (local) {
        s.expert_begin = 0;
        s.expert_end = c.n_routed_experts;
        std::tie(s.inter_begin, s.inter_end) = Part(inter, layout.coordinator_ranks, r);
      }
      if (s.HoldsRouted() || s.HoldsShared()) plan.ranks[static_cast<std::size_t>(r)].slices.push_back(s);
    }
    if (local) continue;
    for (int w = 0; w < workers; ++w) {
      LayerSlice s{.layer = l};
      if (layout.parallel == ExpertParallel::kTensor) {
        s.expert_begin = 0;
        s.expert_end = c.n_routed_experts;
        std::tie(s.inter_begin, s.inter_end) = Part(inter, workers, w);
      } else {
        std::tie(s.expert_begin, s.expert_end) = Part(c.n_routed_experts, workers, w);
        s.inter_begin = 0;
        s.inter_end = inter;
      }
      plan.ranks[static_cast<std::size_t>(first_worker + w)].slices.push_back(s);
    }
  }
  return plan;
}

std::vector<int> PlacementPlan::OwnersOf(int layer) const {
  std::vector<int> owners;
  for (const RankPlan& r : ranks) {
    for (const LayerSlice& s : r.slices) {
      if (s.layer == layer) owners.push_back(r.rank);
    }
  }
  return owners;
}

std::string PlacementPlan::ToJson() const {
  nlohmann::json out = nlohmann::json::array();
  for (const RankPlan& r : ranks) {
    nlohmann::json slices = nlohmann::json::array();
    for (const LayerSlice& s : r.slices) {
      slices.push_back({{"layer", s.layer},
                        {"experts", {s.expert_begin, s.expert_end}},
                        {"intermediate", {s.inter_begin, s.inter_end}},
                        {"shared_intermediate", {s.shared_begin, s.shared_end}}});
    }
    out.push_back({{"rank", r.rank}, {"role", r.role}, {"address", r.address}, {"slices", slices}});
  }
  return nlohmann::json{{"ranks", out}}.dump(1) + "\n";
}

std::string PlacementPlan::Summary() const {
  std::string text;
  for (const RankPlan& r : ranks) {
    int routed = 0, shared = 0;
    for (const LayerSlice& s : r.slices) {
      routed += s.HoldsRouted() ? 1 : 0;
      shared += s.HoldsShared() ? 1 : 0;
    }
    std::string example;
    for (const LayerSlice& s : r.slices) {
      if (!s.HoldsRouted()) continue;
      example = fmt::format(", e.g. layer {}: experts [{}, {}) intermediate [{}, {})", s.layer, s.expert_begin, s.expert_end, s.inter_begin,
                            s.inter_end);
      break;
    }
    text += fmt::format("rank {} {}{}: routed experts of {} MoE layers{}, shared-expert slices of {}\n", r.rank, r.role,
                        r.address.empty() ? "" : " " + r.address, routed, example, shared);
  }
  return text;
}

}  // namespace tandem::rt
