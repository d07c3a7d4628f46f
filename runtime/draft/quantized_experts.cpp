#include "runtime/draft/quantized_experts.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "runtime/kernels/ops.hpp"
#include "runtime/model/checkpoint.hpp"

namespace tandem::rt {

QuantizedExpertExecutor::QuantizedExpertExecutor(const Checkpoint& ckpt, QuantFormat format, int group, ThreadPool* pool)
    : pool_(pool), hidden_(ckpt.config().hidden_size), top_k_(ckpt.config().num_experts_per_tok) {
  const ModelConfig& c = ckpt.config();
  const auto load = [&](const std::string& prefix, std::int64_t inter) {
    // Read where mapped: only the quantized copies are kept.
    constexpr WeightPlacement kRead = WeightPlacement::kMapped;
    Mlp m{QuantizedMatrix::Quantize(ckpt.Matrix(prefix + ".gate_proj.weight", inter, c.hidden_size, kRead), format, group),
          QuantizedMatrix::Quantize(ckpt.Matrix(prefix + ".up_proj.weight", inter, c.hidden_size, kRead), format, group),
          QuantizedMatrix::Quantize(ckpt.Matrix(prefix + ".down_proj.weight", c.hidden_size, inter, kRead), format, group)};
    return m;
  };
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    if (!c.IsMoeLayer(l)) continue;
    Layer& layer = layers_[l];
    for (int e = 0; e < c.n_routed_experts; ++e) {
      layer.experts.push_back(load(fmt::format("model.layers.{}.mlp.experts.{}", l, e), c.moe_intermediate_size));
    }
    if (c.n_shared_experts > 0) {
      layer.shared = load(fmt::format("model.layers.{}.mlp.shared_experts", l),
                          static_cast<std::int64_t>(c.moe_intermediate_size) * c.n_shared_experts);
    }
  }
}

void QuantizedExpertExecutor::Start(int layer, std::span<const Row> rows, const float* x, std::span<const ExpertRoute> routes) {
  layer_ = layer;
  rows_ = static_cast<std::int64_t>(rows.size());
  x_ = x;
  routes_ = routes;
}

void QuantizedExpertExecutor::Forward(const Mlp& mlp, const float* x, std::int64_t rows, float* out) {
  const std::int64_t inter = mlp.gate.rows;
  act_.resize(static_cast<std::size_t>(rows * inter));
  up_.resize(static_cast<std::size_t>(rows * inter));
  MatMul(mlp.gate, x, rows, act_.data(), pool_);
  MatMul(mlp.up, x, rows, up_.data(), pool_);
  SwiGlu(act_.data(), up_.data(), rows * inter);
  MatMul(mlp.down, act_.data(), rows, out, pool_);
}

void QuantizedExpertExecutor::Finish(float* out) {
  const Layer& l = layers_.at(layer_);
  const auto h = static_cast<std::size_t>(hidden_);
  std::fill_n(out, static_cast<std::size_t>(rows_) * h, 0.0f);
  // Rows routed to the same expert go through it together.
  out_.assign(static_cast<std::size_t>(rows_ * top_k_) * h, 0.0f);
  for (std::size_t e = 0; e < l.experts.size(); ++e) {
    slots_.clear();
    for (std::int64_t s = 0; s < rows_ * top_k_; ++s) {
      if (routes_[static_cast<std::size_t>(s)].expert == static_cast<std::int32_t>(e)) slots_.push_back(s);
    }
    if (slots_.empty()) continue;
    const auto n = static_cast<std::int64_t>(slots_.size());
    gathered_.resize(static_cast<std::size_t>(n) * h);
    for (std::int64_t j = 0; j < n; ++j) std::copy_n(x_ + (slots_[j] / top_k_) * hidden_, h, gathered_.data() + j * hidden_);
    expert_out_.resize(static_cast<std::size_t>(n) * h);
    Forward(l.experts[e], gathered_.data(), n, expert_out_.data());
    for (std::int64_t j = 0; j < n; ++j) std::copy_n(expert_out_.data() + j * hidden_, h, out_.data() + slots_[j] * hidden_);
  }
  for (std::int64_t r = 0; r < rows_; ++r) {
    float* o = out + r * hidden_;
    for (int k = 0; k < top_k_; ++k) {
      const float weight = routes_[static_cast<std::size_t>(r * top_k_ + k)].weight;
      const float* v = out_.data() + (r * top_k_ + k) * hidden_;
      for (std::size_t i = 0; i < h; ++i) o[i] += weight * v[i];
    }
  }
  if (!l.shared.gate.values.empty()) {
    expert_out_.resize(static_cast<std::size_t>(rows_) * h);
    Forward(l.shared, x_, rows_, expert_out_.data());
    for (std::size_t i = 0; i < static_cast<std::size_t>(rows_) * h; ++i) out[i] += expert_out_[i];
  }
}

}  // namespace tandem::rt
