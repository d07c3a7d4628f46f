#include "runtime/engine/v41_moe_slices.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "runtime/kernels/microscaled_matrix.hpp"
#include "runtime/model/v41_checkpoint.hpp"
#include "runtime/model/v41_config.hpp"
#include "runtime/numeric/dtype.hpp"
#include "runtime/numeric/rounded_math.hpp"

namespace tandem::rt {

void V41ExpertForward(const V41Expert& e, const float* x, const float* weights, std::int64_t count, float limit, float* out,
                      ThreadPool* pool) {
  const std::int64_t inter = e.w1.rows;
  std::vector<float> g(static_cast<std::size_t>(count * inter)), u(g.size());
  MatMul(e.w1, x, count, g.data(), pool);
  MatMul(e.w3, x, count, u.data(), pool);
  for (std::int64_t r = 0; r < count; ++r) {
    for (std::int64_t k = 0; k < inter; ++k) {
      const auto i = static_cast<std::size_t>(r * inter + k);
      float gv = g[i], uv = u[i];
      if (limit > 0.0f) {
        uv = std::clamp(uv, -limit, limit);
        gv = std::min(gv, limit);
      }
      float hv = gv / (1.0f + RoundedExp(-gv)) * uv;
      if (weights != nullptr) hv = weights[r] * hv;
      g[i] = Bf16ToF32(F32ToBf16(hv));
    }
  }
  MatMul(e.w2, g.data(), count, out, pool);
}

std::vector<LayerSlice> V41MoeSlices::Everything(const V41Config& c) {
  std::vector<LayerSlice> all;
  for (int l = 0; l < c.n_layers; ++l) {
    all.push_back({.layer = l,
                   .expert_begin = 0,
                   .expert_end = c.n_routed_experts,
                   .inter_begin = 0,
                   .inter_end = c.moe_inter_dim,
                   .shared_begin = 0,
                   .shared_end = c.moe_inter_dim * c.n_shared_experts});
  }
  return all;
}

V41MoeSlices::V41MoeSlices(const V41Checkpoint& ckpt, const std::vector<LayerSlice>& slices, ThreadPool* pool,
                           const LoadProgressFn& progress)
    : hidden_(ckpt.config().dim), limit_(static_cast<float>(ckpt.config().swiglu_limit)), pool_(pool) {
  const V41Config& c = ckpt.config();
  const int inter = c.moe_inter_dim;
  std::uint64_t total = 0;
  for (const LayerSlice& s : slices) {
    if (s.layer < 0 || s.layer >= c.n_layers) throw std::invalid_argument(fmt::format("layer {} is not a layer of the model", s.layer));
    if (s.HoldsRouted() && (s.inter_begin != 0 || s.inter_end != inter)) {
      throw std::invalid_argument(fmt::format(
          "layer {}: intermediate columns [{}, {}) of {}: DeepSeek V4.1's experts are held whole (its reference rounds each "
          "expert's output to bf16 before the sum), so a layout may split the experts among ranks (--expert-parallel ep), not an "
          "expert's columns (tp, or two coordinator ranks)",
          s.layer, s.inter_begin, s.inter_end, inter));
    }
    if (s.HoldsShared() && (s.shared_begin != 0 || s.shared_end != inter * c.n_shared_experts)) {
      throw std::invalid_argument(fmt::format("layer {}: shared intermediate columns [{}, {}): DeepSeek V4.1's shared expert is held whole",
                                              s.layer, s.shared_begin, s.shared_end));
    }
    if (s.HoldsRouted() && (s.expert_begin < 0 || s.expert_end > c.n_routed_experts)) {
      throw std::invalid_argument(
          fmt::format("layer {}: experts [{}, {}) outside the model's {}", s.layer, s.expert_begin, s.expert_end, c.n_routed_experts));
    }
    total += static_cast<std::uint64_t>((s.HoldsRouted() ? s.expert_end - s.expert_begin : 0) + (s.HoldsShared() ? 1 : 0));
  }
  std::uint64_t loaded = 0;
  const auto report = [&](const std::string& file) {
    if (progress) progress(LoadProgress{LoadProgress::Phase::kExperts, loaded, total, file});
  };
  report("");
  for (const LayerSlice& s : slices) {
    Layer& held = layers_[s.layer];
    held.slice = s;
    const std::string p = fmt::format("layers.{}.ffn.", s.layer);
    if (s.HoldsRouted()) {
      for (int e = s.expert_begin; e < s.expert_end; ++e) {
        held.experts.push_back(LoadV41Expert(ckpt, fmt::format("{}experts.{}.", p, e), /*fp4=*/true));
        ++loaded;
        report("");
      }
    }
    if (s.HoldsShared()) {
      held.shared = LoadV41Expert(ckpt, p + "shared_experts.", /*fp4=*/false);
      ++loaded;
      report("");
    }
  }
  for (const auto& [layer, held] : layers_) {
    for (const V41Expert& e : held.experts) weight_bytes_ += e.w1.bytes() + e.w2.bytes() + e.w3.bytes();
    if (held.shared) weight_bytes_ += held.shared->w1.bytes() + held.shared->w2.bytes() + held.shared->w3.bytes();
  }
}

void V41MoeSlices::Compute(int layer, const float* x, std::int64_t rows, std::span<const ExpertRoute> routes, int top_k, double* out) {
  std::fill(out, out + rows * hidden_, 0.0);
  const auto it = layers_.find(layer);
  if (it == layers_.end()) return;
  const Layer& held = it->second;
  const LayerSlice& s = held.slice;
  // The experts' bf16 outputs, summed in double: exact, so neither the order here nor the
  // split among ranks changes the sum.
  for (int e = s.expert_begin; s.HoldsRouted() && e < s.expert_end; ++e) {
    members_.clear();
    xs_.clear();
    weights_.clear();
    for (std::int64_t r = 0; r < rows; ++r) {
      for (int k = 0; k < top_k; ++k) {
        const ExpertRoute& route = routes[static_cast<std::size_t>(r * top_k + k)];
        if (route.expert != e) continue;
        members_.push_back(r);
        xs_.insert(xs_.end(), x + r * hidden_, x + (r + 1) * hidden_);
        weights_.push_back(route.weight);
      }
    }
    if (members_.empty()) continue;
    const auto count = static_cast<std::int64_t>(members_.size());
    outs_.resize(static_cast<std::size_t>(count * hidden_));
    V41ExpertForward(held.experts[static_cast<std::size_t>(e - s.expert_begin)], xs_.data(), weights_.data(), count, limit_, outs_.data(),
                     pool_);
    for (std::int64_t i = 0; i < count; ++i) {
      double* o = out + members_[static_cast<std::size_t>(i)] * hidden_;
      for (std::int64_t d = 0; d < hidden_; ++d) o[d] += outs_[static_cast<std::size_t>(i * hidden_ + d)];
    }
  }
  if (held.shared) {
    outs_.resize(static_cast<std::size_t>(rows * hidden_));
    V41ExpertForward(*held.shared, x, nullptr, rows, limit_, outs_.data(), pool_);
    for (std::int64_t i = 0; i < rows * hidden_; ++i) out[i] += outs_[static_cast<std::size_t>(i)];
  }
}

}  // namespace tandem::rt
