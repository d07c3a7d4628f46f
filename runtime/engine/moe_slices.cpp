#include "runtime/engine/moe_slices.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "runtime/model/checkpoint.hpp"

namespace tandem::rt {

namespace {

// Columns [begin, end) of `m` as a new contiguous matrix of the same type.
WeightMatrix ColumnSlice(const WeightMatrix& m, std::int64_t begin, std::int64_t end) {
  if (begin == 0 && end == m.cols) return m;
  const std::int64_t cols = end - begin;
  const std::size_t elem = m.element_size();
  auto copy = std::shared_ptr<std::byte[]>(new std::byte[static_cast<std::size_t>(m.rows * cols) * elem]);
  const auto* src = static_cast<const std::byte*>(m.data);
  for (std::int64_t r = 0; r < m.rows; ++r) {
    std::memcpy(copy.get() + static_cast<std::size_t>(r * cols) * elem, src + static_cast<std::size_t>(r * m.cols + begin) * elem,
                static_cast<std::size_t>(cols) * elem);
  }
  WeightMatrix out = m;
  out.cols = cols;
  out.data = copy.get();
  out.owner = std::move(copy);
  return out;
}

MlpWeights LoadSlice(const Checkpoint& ckpt, const std::string& prefix, std::int64_t hidden, std::int64_t intermediate,
                     std::int64_t begin, std::int64_t end) {
  const MlpWeights full = MlpWeights::Load(ckpt, prefix, hidden, intermediate);
  return {full.gate.RowSlice(begin, end - begin), full.up.RowSlice(begin, end - begin), ColumnSlice(full.down, begin, end)};
}

std::uint64_t Bytes(const MlpWeights& m) { return m.gate.bytes() + m.up.bytes() + m.down.bytes(); }

}  // namespace

MoeSlices::MoeSlices(const Checkpoint& ckpt, const std::vector<LayerSlice>& slices, ThreadPool* pool, bool exact)
    : hidden_(ckpt.config().hidden_size), pool_(pool), exact_(exact), slices_(slices) {
  const ModelConfig& c = ckpt.config();
  const std::int64_t shared_inter = static_cast<std::int64_t>(c.moe_intermediate_size) * c.n_shared_experts;
  for (const LayerSlice& s : slices) {
    if (!c.IsMoeLayer(s.layer)) throw std::invalid_argument(fmt::format("expert slices: layer {} is not a MoE layer", s.layer));
    if (s.expert_begin < 0 || s.expert_end > c.n_routed_experts || s.expert_begin > s.expert_end || s.inter_begin < 0 ||
        s.inter_end > c.moe_intermediate_size || s.inter_begin > s.inter_end || s.shared_begin < 0 ||
        s.shared_end > shared_inter || s.shared_begin > s.shared_end) {
      throw std::invalid_argument(fmt::format("expert slices: layer {}: experts [{}, {}) intermediate [{}, {}) shared [{}, {}) "
                                              "do not fit the model", s.layer, s.expert_begin, s.expert_end, s.inter_begin,
                                              s.inter_end, s.shared_begin, s.shared_end));
    }
    if (layers_.contains(s.layer)) throw std::invalid_argument(fmt::format("expert slices: layer {} given twice", s.layer));
    Layer& layer = layers_[s.layer];
    layer.slice = s;
    if (s.HoldsRouted()) {
      for (int e = s.expert_begin; e < s.expert_end; ++e) {
        layer.experts.push_back(LoadSlice(ckpt, fmt::format("model.layers.{}.mlp.experts.{}", s.layer, e), c.hidden_size,
                                          c.moe_intermediate_size, s.inter_begin, s.inter_end));
        weight_bytes_ += Bytes(layer.experts.back());
      }
    }
    if (s.HoldsShared()) {
      layer.shared = LoadSlice(ckpt, fmt::format("model.layers.{}.mlp.shared_experts", s.layer), c.hidden_size, shared_inter,
                               s.shared_begin, s.shared_end);
      weight_bytes_ += Bytes(*layer.shared);
    }
  }
}

void MoeSlices::Mlp(const MlpWeights& w, const float* x, std::int64_t rows, double* out) {
  if (exact_) {
    MlpForwardF64(w, x, rows, out, scratch_, pool_);
    return;
  }
  expert_out_f32_.resize(static_cast<std::size_t>(rows * hidden_));
  MlpForward(w, x, rows, expert_out_f32_.data(), scratch_, pool_);
  std::copy(expert_out_f32_.begin(), expert_out_f32_.end(), out);
}

std::vector<LayerSlice> MoeSlices::Everything(const ModelConfig& c) {
  std::vector<LayerSlice> slices;
  const int shared = c.moe_intermediate_size * c.n_shared_experts;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    if (c.IsMoeLayer(l)) slices.push_back({l, 0, c.n_routed_experts, 0, c.moe_intermediate_size, 0, shared});
  }
  return slices;
}

void MoeSlices::Compute(int layer, const float* x, std::int64_t rows, std::span<const ExpertRoute> routes, int top_k,
                        double* out) {
  const auto it = layers_.find(layer);
  if (it == layers_.end()) throw std::invalid_argument(fmt::format("expert slices: layer {} is not held here", layer));
  Layer& l = it->second;
  const auto h = static_cast<std::size_t>(hidden_);
  std::fill_n(out, static_cast<std::size_t>(rows) * h, 0.0);

  if (!l.experts.empty()) {
    // results_[r, k] = this slice's share of expert_{routes[r, k]}(x[r]), filled expert by expert.
    results_.assign(static_cast<std::size_t>(rows * top_k) * h, 0.0);
    for (std::size_t i = 0; i < l.experts.size(); ++i) {
      const int expert = l.slice.expert_begin + static_cast<int>(i);
      slots_.clear();
      for (std::int64_t s = 0; s < rows * top_k; ++s) {
        if (routes[static_cast<std::size_t>(s)].expert == expert) slots_.push_back(s);
      }
      if (slots_.empty()) continue;
      const auto n = static_cast<std::int64_t>(slots_.size());
      gathered_.resize(static_cast<std::size_t>(n) * h);
      for (std::int64_t j = 0; j < n; ++j) std::copy_n(x + (slots_[j] / top_k) * hidden_, h, gathered_.data() + j * hidden_);
      expert_out_.resize(static_cast<std::size_t>(n) * h);
      Mlp(l.experts[i], gathered_.data(), n, expert_out_.data());
      for (std::int64_t j = 0; j < n; ++j) std::copy_n(expert_out_.data() + j * hidden_, h, results_.data() + slots_[j] * hidden_);
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      double* o = out + r * hidden_;
      for (int k = 0; k < top_k; ++k) {
        const ExpertRoute& route = routes[static_cast<std::size_t>(r * top_k + k)];
        if (route.expert < l.slice.expert_begin || route.expert >= l.slice.expert_end) continue;
        const double* v = results_.data() + (r * top_k + k) * hidden_;
        for (std::size_t i = 0; i < h; ++i) o[i] += static_cast<double>(route.weight) * v[i];
      }
    }
  }
  if (l.shared) {
    expert_out_.resize(static_cast<std::size_t>(rows) * h);
    Mlp(*l.shared, x, rows, expert_out_.data());
    for (std::size_t i = 0; i < static_cast<std::size_t>(rows) * h; ++i) out[i] += expert_out_[i];
  }
}

}  // namespace tandem::rt
