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

namespace {

// bf16(weight · silu(min(w1·x, L)) · clamp(w3·x, ±L)): the down projection's input [count × inter].
std::vector<float> ExpertHidden(const V41Expert& e, const float* x, const float* weights, std::int64_t count, float limit,
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
  return g;
}

}  // namespace

void V41ExpertForward(const V41Expert& e, const float* x, const float* weights, std::int64_t count, float limit, float* out,
                      ThreadPool* pool) {
  const std::vector<float> h = ExpertHidden(e, x, weights, count, limit, pool);
  MatMul(e.w2, h.data(), count, out, pool);
}

double V41ExpertRounding(double unrounded) { return Bf16ToF32(F32ToBf16(static_cast<float>(unrounded))); }

void V41ExpertShare(const V41Expert& e, const float* x, const float* weights, std::int64_t count, float limit, double* out,
                    ThreadPool* pool) {
  const std::vector<float> h = ExpertHidden(e, x, weights, count, limit, pool);
  MatMulF64(e.w2, h.data(), count, out, pool);
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
    : hidden_(ckpt.config().dim), inter_(ckpt.config().moe_inter_dim), limit_(static_cast<float>(ckpt.config().swiglu_limit)), pool_(pool) {
  const V41Config& c = ckpt.config();
  const int inter = c.moe_inter_dim;
  std::uint64_t total = 0;
  for (const LayerSlice& s : slices) {
    if (s.layer < 0 || s.layer >= c.n_layers) throw std::invalid_argument(fmt::format("layer {} is not a layer of the model", s.layer));
    if (s.HoldsRouted() && (s.inter_begin < 0 || s.inter_end > inter || s.inter_begin % MicroscaledMatrix::kBlock != 0 ||
                            s.inter_end % MicroscaledMatrix::kBlock != 0)) {
      throw std::invalid_argument(fmt::format(
          "layer {}: intermediate columns [{}, {}) of {}: a slice of a DeepSeek V4.1 expert must be whole blocks of 32 columns (the "
          "FP4 scale blocks of its down projection)",
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
        V41Expert expert = LoadV41Expert(ckpt, fmt::format("{}experts.{}.", p, e), /*fp4=*/true);
        if (s.inter_begin != 0 || s.inter_end != inter) {  // keep only this rank's columns
          expert = {expert.w1.Rows(s.inter_begin, s.inter_end), expert.w3.Rows(s.inter_begin, s.inter_end),
                    expert.w2.Columns(s.inter_begin, s.inter_end)};
        }
        held.experts.push_back(std::move(expert));
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

std::int64_t V41MoeSlices::PartialWidthOf(const LayerSlice& held, int top_k) const {
  const bool split = held.HoldsRouted() && (held.inter_begin != 0 || held.inter_end != inter_);
  return split ? (1 + top_k) * hidden_ : hidden_;
}

std::int64_t V41MoeSlices::PartialWidth(int layer, int top_k) const {
  const auto it = layers_.find(layer);
  return it == layers_.end() ? hidden_ : PartialWidthOf(it->second.slice, top_k);
}

void V41MoeSlices::Compute(int layer, const float* x, std::int64_t rows, std::span<const ExpertRoute> routes, int top_k, double* out) {
  const std::int64_t width = PartialWidth(layer, top_k);
  std::fill(out, out + rows * width, 0.0);
  const auto it = layers_.find(layer);
  if (it == layers_.end()) return;
  const Layer& held = it->second;
  const LayerSlice& s = held.slice;
  const bool split = width != hidden_;
  // A whole expert's output is its exact down projection rounded to fp32, then bf16 (the
  // reference's fp32 block sum, rounded to bf16); a column slice's part of it is sent
  // unrounded in its route's place, for Reduce to round once all parts are summed. Either
  // way the terms are added in double, exactly, so no order or split changes the sum.
  for (int e = s.expert_begin; s.HoldsRouted() && e < s.expert_end; ++e) {
    members_.clear();
    xs_.clear();
    weights_.clear();
    for (std::int64_t r = 0; r < rows; ++r) {
      for (int k = 0; k < top_k; ++k) {
        const ExpertRoute& route = routes[static_cast<std::size_t>(r * top_k + k)];
        if (route.expert != e) continue;
        members_.push_back(r * width + (split ? (1 + k) * hidden_ : 0));  // where its output goes
        xs_.insert(xs_.end(), x + r * hidden_, x + (r + 1) * hidden_);
        weights_.push_back(route.weight);
      }
    }
    if (members_.empty()) continue;
    const auto count = static_cast<std::int64_t>(members_.size());
    shares_.resize(static_cast<std::size_t>(count * hidden_));
    V41ExpertShare(held.experts[static_cast<std::size_t>(e - s.expert_begin)], xs_.data(), weights_.data(), count, limit_, shares_.data(),
                   pool_);
    for (std::int64_t i = 0; i < count; ++i) {
      double* o = out + members_[static_cast<std::size_t>(i)];
      const double* share = shares_.data() + i * hidden_;
      for (std::int64_t d = 0; d < hidden_; ++d) o[d] += split ? share[d] : V41ExpertRounding(share[d]);
    }
  }
  if (held.shared) {
    outs_.resize(static_cast<std::size_t>(rows * hidden_));
    V41ExpertForward(*held.shared, x, nullptr, rows, limit_, outs_.data(), pool_);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t d = 0; d < hidden_; ++d) out[r * width + d] += outs_[static_cast<std::size_t>(r * hidden_ + d)];
    }
  }
}

void V41MoeSlices::Reduce(const double* sums, std::int64_t rows, std::int64_t width, float* out) const {
  const std::int64_t routes = width / hidden_ - 1;
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* row = sums + r * width;
    for (std::int64_t d = 0; d < hidden_; ++d) {
      double v = row[d];
      for (std::int64_t k = 0; k < routes; ++k) v += V41ExpertRounding(row[(1 + k) * hidden_ + d]);
      out[r * hidden_ + d] = static_cast<float>(v);
    }
  }
}

}  // namespace tandem::rt
