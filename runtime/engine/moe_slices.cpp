#include "runtime/engine/moe_slices.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "runtime/kernels/ops.hpp"
#include "runtime/kernels/quantized_matrix.hpp"
#include "runtime/kernels/thread_pool.hpp"
#include "runtime/kernels/weight_memory.hpp"
#include "runtime/model/checkpoint.hpp"

namespace tandem::rt {

namespace {

// Row-by-row work (gathering experts' inputs, combining their outputs) goes to the pool
// in shares of at least this many rows: a decode step's few stay on the caller.
constexpr std::int64_t kRowsPerShare = 8;

// Columns [begin, end) of `m` (tensor `name`) as a new contiguous matrix of the same
// type. A group-quantized matrix can only be cut at whole groups.
WeightMatrix ColumnSlice(const WeightMatrix& m, std::int64_t begin, std::int64_t end, const std::string& name) {
  if (begin == 0 && end == m.cols) return m;
  const std::int64_t cols = end - begin;
  WeightMatrix out = m;
  out.cols = cols;
  if (m.type == WeightMatrix::Type::kQuantized) {
    const int group = m.quantized->group;
    if (begin % group != 0 || end % group != 0) {
      throw std::invalid_argument(
          fmt::format("expert slices: {}: intermediate columns [{}, {}) are not whole quantization groups of {} ({} checkpoint); split "
                      "the experts at multiples of {} (fewer tp ranks, or --expert-parallel ep) or quantize with a smaller --group",
                      name, begin, end, group, ToString(m.quantized->format), group));
    }
    out.quantized = std::make_shared<const QuantizedMatrix>(m.quantized->Columns(begin, end));
    return out;
  }
  const std::size_t elem = m.element_size();
  std::shared_ptr<void> copy = NewWeightMemory(static_cast<std::size_t>(m.rows * cols) * elem);
  auto* dst = static_cast<std::byte*>(copy.get());
  const auto* src = static_cast<const std::byte*>(m.data);
  for (std::int64_t r = 0; r < m.rows; ++r) {
    std::memcpy(dst + static_cast<std::size_t>(r * cols) * elem, src + static_cast<std::size_t>(r * m.cols + begin) * elem,
                static_cast<std::size_t>(cols) * elem);
  }
  out.quantized.reset();  // a slice reads the full-precision columns
  out.data = copy.get();
  out.owner = std::move(copy);
  if (m.type == WeightMatrix::Type::kF8E4M3) out.block_origin_col += begin;  // still on the full matrix's scale grid
  return out;
}

// Rows [begin, end) of `m` in storage of their own, so that a slice does not keep
// the whole matrix (a tp rank holds a part of every expert's gate and up).
WeightMatrix RowSlice(const WeightMatrix& m, std::int64_t begin, std::int64_t end) {
  WeightMatrix out = m.RowSlice(begin, end - begin);
  if ((begin == 0 && end == m.rows) || m.type == WeightMatrix::Type::kQuantized) return out;  // whole, or copied already
  out.owner = CopyToWeightMemory(out.data, static_cast<std::size_t>(out.rows * out.cols) * out.element_size());
  out.data = out.owner.get();
  return out;
}

MlpWeights LoadSlice(const Checkpoint& ckpt, const std::string& prefix, std::int64_t hidden, std::int64_t intermediate, std::int64_t begin,
                     std::int64_t end) {
  // A part of each expert (tp) is copied by the slicing below: read the whole where
  // it is mapped rather than copying it first.
  const bool whole = begin == 0 && end == intermediate;
  const MlpWeights full = MlpWeights::Load(ckpt, prefix, hidden, intermediate, whole ? ckpt.placement() : WeightPlacement::kMapped);
  return {RowSlice(full.gate, begin, end), RowSlice(full.up, begin, end), ColumnSlice(full.down, begin, end, prefix + ".down_proj")};
}

std::uint64_t Bytes(const MlpWeights& m) { return m.gate.bytes() + m.up.bytes() + m.gate_up.bytes() + m.down.bytes(); }

// A quantized expert's gate and up as one matrix (MlpWeights::gate_up).
void FuseGateUp(MlpWeights& m) {
  if (m.gate.type != WeightMatrix::Type::kQuantized || m.up.type != WeightMatrix::Type::kQuantized) return;
  m.gate_up =
      WeightMatrix::FromQuantized(std::make_shared<const QuantizedMatrix>(QuantizedMatrix::StackRows(*m.gate.quantized, *m.up.quantized)));
  m.gate = WeightMatrix{};
  m.up = WeightMatrix{};
}

// The stored bytes of an MLP's tensors (weights, fp8 scales or quantized values and
// scales), and the file its gate is stored in: what loading it reads.
struct StoredMlp {
  std::uint64_t bytes = 0;
  std::string file;
};

StoredMlp Stored(const Checkpoint& ckpt, const std::string& prefix) {
  StoredMlp out;
  for (const char* projection : {".gate_proj", ".up_proj", ".down_proj"}) {
    for (const char* suffix : {".weight", ".weight_scale_inv", ".qweight", ".qscales"}) {
      const std::string name = prefix + projection + suffix;
      if (!ckpt.Has(name)) continue;
      const TensorInfo& info = ckpt.Info(name);
      out.bytes += info.end - info.begin;
      if (out.file.empty()) out.file = ckpt.FileOf(name);
    }
  }
  return out;
}

}  // namespace

MoeSlices::MoeSlices(const Checkpoint& ckpt, const std::vector<LayerSlice>& slices, ThreadPool* pool, bool exact, bool fuse_gate_up,
                     const LoadProgressFn& progress)
    : hidden_(ckpt.config().hidden_size), pool_(pool), exact_(exact), slices_(slices) {
  const ModelConfig& c = ckpt.config();
  const std::int64_t shared_inter = static_cast<std::int64_t>(c.moe_intermediate_size) * c.n_shared_experts;
  // What will be read, in order, for the progress reports.
  std::vector<StoredMlp> plan;
  LoadProgress report{LoadProgress::Phase::kExperts, 0, 0, {}};
  if (progress) {
    for (const LayerSlice& s : slices) {
      if (!c.IsMoeLayer(s.layer)) continue;  // refused below
      if (s.HoldsRouted()) {
        for (int e = std::max(s.expert_begin, 0); e < std::min(s.expert_end, c.n_routed_experts); ++e) {
          plan.push_back(Stored(ckpt, fmt::format("model.layers.{}.mlp.experts.{}", s.layer, e)));
        }
      }
      if (s.HoldsShared()) plan.push_back(Stored(ckpt, fmt::format("model.layers.{}.mlp.shared_experts", s.layer)));
    }
    for (const StoredMlp& m : plan) report.bytes_total += m.bytes;
    if (!plan.empty()) report.file = plan.front().file;
    progress(report);
  }
  std::size_t loaded = 0;
  auto advance = [&] {
    if (!progress || loaded >= plan.size()) return;
    report.bytes_done += plan[loaded].bytes;
    ++loaded;
    report.file = loaded < plan.size() ? plan[loaded].file : plan.back().file;
    progress(report);
  };
  for (const LayerSlice& s : slices) {
    if (!c.IsMoeLayer(s.layer)) throw std::invalid_argument(fmt::format("expert slices: layer {} is not a MoE layer", s.layer));
    if (s.expert_begin < 0 || s.expert_end > c.n_routed_experts || s.expert_begin > s.expert_end || s.inter_begin < 0 ||
        s.inter_end > c.moe_intermediate_size || s.inter_begin > s.inter_end || s.shared_begin < 0 || s.shared_end > shared_inter ||
        s.shared_begin > s.shared_end) {
      throw std::invalid_argument(
          fmt::format("expert slices: layer {}: experts [{}, {}) intermediate [{}, {}) shared [{}, {}) "
                      "do not fit the model",
                      s.layer, s.expert_begin, s.expert_end, s.inter_begin, s.inter_end, s.shared_begin, s.shared_end));
    }
    if (layers_.contains(s.layer)) throw std::invalid_argument(fmt::format("expert slices: layer {} given twice", s.layer));
    Layer& layer = layers_[s.layer];
    layer.slice = s;
    if (s.HoldsRouted()) {
      for (int e = s.expert_begin; e < s.expert_end; ++e) {
        layer.experts.push_back(LoadSlice(ckpt, fmt::format("model.layers.{}.mlp.experts.{}", s.layer, e), c.hidden_size,
                                          c.moe_intermediate_size, s.inter_begin, s.inter_end));
        if (fuse_gate_up) FuseGateUp(layer.experts.back());
        weight_bytes_ += Bytes(layer.experts.back());
        advance();
      }
    }
    if (s.HoldsShared()) {
      layer.shared = LoadSlice(ckpt, fmt::format("model.layers.{}.mlp.shared_experts", s.layer), c.hidden_size, shared_inter,
                               s.shared_begin, s.shared_end);
      if (fuse_gate_up) FuseGateUp(*layer.shared);
      weight_bytes_ += Bytes(*layer.shared);
      advance();
    }
  }
}

std::vector<LayerSlice> MoeSlices::Everything(const ModelConfig& c) {
  std::vector<LayerSlice> slices;
  const int shared = c.moe_intermediate_size * c.n_shared_experts;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    if (c.IsMoeLayer(l)) slices.push_back({l, 0, c.n_routed_experts, 0, c.moe_intermediate_size, 0, shared});
  }
  return slices;
}

void MoeSlices::Compute(int layer, const float* x, std::int64_t rows, std::span<const ExpertRoute> routes, int top_k, double* out) {
  const auto it = layers_.find(layer);
  if (it == layers_.end()) throw std::invalid_argument(fmt::format("expert slices: layer {} is not held here", layer));
  Layer& l = it->second;
  const auto h = static_cast<std::size_t>(hidden_);

  // Gather, expert by expert, the rows routed to each held expert (slots_ lists
  // their (row, k) slots in that order, by a counting sort over the routes);
  // `gathered_` holds the rows of experts given more than one.
  task_experts_.clear();
  task_rows_.clear();
  const auto held = static_cast<std::int64_t>(l.experts.size());
  const std::int64_t n_routes = rows * top_k;
  std::vector<std::int64_t>& first = expert_first_;  // per held expert, where its slots start
  first.assign(static_cast<std::size_t>(held + 1), 0);
  for (std::int64_t s = 0; s < n_routes; ++s) {
    const std::int64_t e = routes[static_cast<std::size_t>(s)].expert - l.slice.expert_begin;
    if (e >= 0 && e < held) ++first[static_cast<std::size_t>(e + 1)];
  }
  for (std::int64_t e = 0; e < held; ++e) {
    const std::int64_t count = first[static_cast<std::size_t>(e + 1)];
    if (count > 0) {
      task_experts_.push_back(static_cast<std::size_t>(e));
      task_rows_.push_back(count);
    }
    first[static_cast<std::size_t>(e + 1)] += first[static_cast<std::size_t>(e)];
  }
  slots_.resize(static_cast<std::size_t>(first.back()));
  for (std::int64_t s = 0; s < n_routes; ++s) {
    const std::int64_t e = routes[static_cast<std::size_t>(s)].expert - l.slice.expert_begin;
    if (e >= 0 && e < held) slots_[static_cast<std::size_t>(first[static_cast<std::size_t>(e)]++)] = s;
  }
  const auto gathered_rows = static_cast<std::int64_t>(slots_.size());
  gathered_.resize(static_cast<std::size_t>(gathered_rows) * h);

  // Every active expert and the shared slice in one MlpForwardMany: outputs row by
  // row in slot order, then the shared slice's rows.
  const std::int64_t out_rows = gathered_rows + (l.shared ? rows : 0);
  if (exact_) {
    expert_out_.resize(static_cast<std::size_t>(out_rows) * h);
  } else {
    expert_out_f32_.resize(static_cast<std::size_t>(out_rows) * h);
  }
  tasks_.clear();
  gather_.clear();
  std::int64_t row = 0;
  for (std::size_t t = 0; t < task_experts_.size(); ++t) {
    const std::size_t at = static_cast<std::size_t>(row) * h;
    // An expert with one row reads it where it is (in decode, every expert of a
    // token shares that row, and MatMulMany prepares a shared input once).
    const float* input = x + (slots_[static_cast<std::size_t>(row)] / top_k) * hidden_;
    if (task_rows_[t] > 1) {
      for (std::int64_t j = row; j < row + task_rows_[t]; ++j) gather_.push_back(j);
      input = gathered_.data() + at;
    }
    tasks_.push_back({&l.experts[task_experts_[t]], input, task_rows_[t], exact_ ? nullptr : expert_out_f32_.data() + at,
                      exact_ ? expert_out_.data() + at : nullptr});
    row += task_rows_[t];
  }
  if (l.shared) {
    const std::size_t at = static_cast<std::size_t>(row) * h;
    tasks_.push_back({&*l.shared, x, rows, exact_ ? nullptr : expert_out_f32_.data() + at, exact_ ? expert_out_.data() + at : nullptr});
  }
  // The rows of experts given several, copied together (a prompt's are most of them).
  ForShares(pool_, static_cast<std::int64_t>(gather_.size()), kRowsPerShare, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t j = gather_[static_cast<std::size_t>(i)];
      std::copy_n(x + (slots_[static_cast<std::size_t>(j)] / top_k) * hidden_, h, gathered_.data() + j * hidden_);
    }
  });
  MlpForwardMany(tasks_, scratch_, pool_);
  if (exact_) {
    Combine(expert_out_.data(), rows, routes, top_k, gathered_rows, l.shared.has_value(), out);
  } else {
    Combine(expert_out_f32_.data(), rows, routes, top_k, gathered_rows, l.shared.has_value(), out);
  }
}

// out[r] = Σ_k weight · expert_k(x[r]) in k order, then the shared slice (values
// widened to double exactly, from whichever precision the experts wrote).
template <typename T>
void MoeSlices::Combine(const T* expert_out, std::int64_t rows, std::span<const ExpertRoute> routes, int top_k, std::int64_t gathered_rows,
                        bool shared, double* out) {
  results_.assign(static_cast<std::size_t>(rows * top_k), -1);
  for (std::int64_t j = 0; j < gathered_rows; ++j) results_[static_cast<std::size_t>(slots_[j])] = j;
  // Row by row (each row's sums in the same order on any thread).
  ForShares(pool_, rows, kRowsPerShare, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      double* o = out + r * hidden_;
      std::fill_n(o, hidden_, 0.0);
      for (int k = 0; k < top_k; ++k) {
        const std::int64_t j = results_[static_cast<std::size_t>(r * top_k + k)];
        if (j < 0) continue;
        AddScaled(o, expert_out + j * hidden_, routes[static_cast<std::size_t>(r * top_k + k)].weight, hidden_);
      }
      if (shared) AddScaled(o, expert_out + (gathered_rows + r) * hidden_, 1.0, hidden_);
    }
  });
}

}  // namespace tandem::rt
