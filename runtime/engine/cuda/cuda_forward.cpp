#include "runtime/engine/cuda/cuda_forward.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>

#include "runtime/engine/cuda/device_experts.hpp"
#include "runtime/engine/cuda/device_router.hpp"
#include "runtime/engine/cuda/device_sampler.hpp"
#include "runtime/engine/cuda/device_weights.hpp"
#include "runtime/engine/engine.hpp"
#include "runtime/engine/model_weights.hpp"
#include "runtime/engine/moe_slices.hpp"
#include "runtime/engine/rope.hpp"
#include "runtime/kernels/cuda/cuda_device.hpp"
#include "runtime/model/checkpoint.hpp"

namespace tandem::rt {
namespace cuda {

namespace {

struct DeviceAttention {
  DeviceMatrix q_proj, q_a_proj, q_b_proj, kv_a_proj, key_up, value_up, o_proj;
  DeviceBuffer<float> q_a_norm, kv_a_norm;
};

struct DeviceLayer {
  int checkpoint_layer = 0;
  DeviceBuffer<float> input_norm, post_attention_norm;
  DeviceAttention attention;
  bool moe = false;
  DeviceMlp dense;
  DeviceMatrix router;
  DeviceBuffer<float> router_bias;
  bool has_bias = false;
};

// A sequence's compressed cache on the device, mirroring the host's KvCache.
struct CacheMirror {
  DeviceBuffer<float> data;
  int positions = 0;  // allocated per layer: the host cache's allocation, which grows with the sequence
  std::uint64_t serial = 0;
  int synced = 0;  // positions [0, synced) hold the host cache's values
};

class DeviceForward final : public CudaForward {
 public:
  DeviceForward(const Checkpoint& ckpt, const ModelWeights& w, const RopeTable& rope, float softmax_scale, bool experts_on_device)
      : c_(ckpt.config()), router_(RouterParamsOf(c_)), softmax_scale_(softmax_scale) {
    const char* graphs = std::getenv("TANDEM_CUDA_GRAPHS");
    use_graphs_ = graphs == nullptr || std::string_view(graphs) != "0";
    if (w.mtp) throw std::invalid_argument("--device cuda: the MTP layer runs on the CPU (use --device cpu for an MTP drafter)");
    embed_ = Upload(w.embed);
    // Tied embeddings (the loader copies the embedding's matrix): one device copy. A
    // quantized matrix has no `data`, so its values' owner tells two apart.
    if (w.lm_head.type == w.embed.type && w.lm_head.data == w.embed.data && w.lm_head.quantized == w.embed.quantized) {
      lm_head_view_ = embed_.view;
    } else {
      lm_head_ = Upload(w.lm_head);
      lm_head_view_ = lm_head_.view;
    }
    if (c_.kv_lora_rank > kMaxAttentionLatent) {
      throw std::invalid_argument(
          fmt::format("--device cuda: kv_lora_rank {}; the device attention takes at most {}", c_.kv_lora_rank, kMaxAttentionLatent));
    }
    final_norm_ = UploadFloats(w.final_norm);
    inv_freq_ = UploadDoubles(rope.inv_freq());
    mscale_ = rope.mscale();
    for (const LayerWeights& lw : w.layers) {
      DeviceLayer d;
      d.checkpoint_layer = lw.checkpoint_layer;
      d.input_norm = UploadFloats(lw.input_norm);
      d.post_attention_norm = UploadFloats(lw.post_attention_norm);
      const AttentionWeights& a = lw.attention;
      if (c_.q_lora_rank > 0) {
        d.attention.q_a_proj = Upload(a.q_a_proj);
        d.attention.q_b_proj = Upload(a.q_b_proj);
        d.attention.q_a_norm = UploadFloats(a.q_a_norm);
      } else {
        d.attention.q_proj = Upload(a.q_proj);
      }
      d.attention.kv_a_proj = Upload(a.kv_a_proj);
      d.attention.kv_a_norm = UploadFloats(a.kv_a_norm);
      std::vector<const WeightMatrix*> keys, values;
      for (const WeightMatrix& m : a.key_up) keys.push_back(&m);
      for (const WeightMatrix& m : a.value_up) values.push_back(&m);
      d.attention.key_up = UploadStacked(keys);
      d.attention.value_up = UploadStacked(values);
      d.attention.o_proj = Upload(a.o_proj);
      d.moe = lw.moe;
      if (lw.moe) {
        d.router = Upload(lw.router);
        d.has_bias = !lw.router_bias.empty();
        d.router_bias = UploadFloats(lw.router_bias);
      } else {
        d.dense = DeviceMlp::Upload(lw.dense);
      }
      layers_.push_back(std::move(d));
    }
    if (experts_on_device) {
      std::vector<LayerSlice> slices;
      const int shared = c_.moe_intermediate_size * c_.n_shared_experts;
      for (const LayerWeights& lw : w.layers) {
        if (lw.moe) slices.push_back({lw.checkpoint_layer, 0, c_.n_routed_experts, 0, c_.moe_intermediate_size, 0, shared});
      }
      // The host slices are read only while uploading: views into the checkpoint
      // where it is mapped (`--device cuda` opens it so), copies otherwise.
      const MoeSlices host(ckpt, slices, nullptr, false, /*fuse_gate_up=*/false);
      experts_.emplace(host);
    }
  }

  void Forward(std::span<const Row> rows, KvCachePool& kv, ExpertExecutor* experts, ExpertInputPrecision expert_input, bool record_routes,
               bool keep_hidden, ForwardOutput& out) override;

  std::uint64_t graph_launches() const override { return graph_launches_; }

  std::vector<TokenId> SampleLogits(std::span<const SamplingParams> params, std::span<const std::int64_t> positions) override {
    if (params.size() != logit_rows_) {
      throw std::invalid_argument(
          fmt::format("device sampler: {} sampling settings for the last pass's {} logits rows", params.size(), logit_rows_));
    }
    return sampler_.Sample(logits_.get(), c_.vocab_size, params, positions, stream_.get());
  }

 private:
  // What a captured pass depends on besides the contents of device buffers.
  struct GraphKey {
    std::int64_t rows = 0;
    std::vector<std::size_t> logit_rows;
    auto operator<=>(const GraphKey&) const = default;
  };
  struct GraphExecDeleter {
    void operator()(cudaGraphExec_t exec) const { cudaGraphExecDestroy(exec); }
  };
  using GraphExec = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, GraphExecDeleter>;

  void SyncCaches(std::span<const Row> rows, KvCachePool& kv);
  // Every kernel of a pass, from the embedding to the LM head, on stream_.
  void Enqueue(std::span<const Row> rows, ExpertExecutor* experts, ExpertInputPrecision expert_input, bool record_routes,
               ForwardOutput& out);
  GraphExec Capture(std::span<const Row> rows, ForwardOutput& out);
  // The generations of every buffer a pass's graph names: this pass's and the experts'.
  std::pair<std::uint64_t, std::uint64_t> Generation() const {
    return {workspace_.generation(), experts_ ? experts_->workspace_generation() : 0};
  }
  void Attention(const DeviceLayer& l, int layer, std::int64_t b_rows);
  void Moe(const DeviceLayer& l, std::span<const Row> rows, ExpertExecutor* experts, ExpertInputPrecision expert_input, bool record_routes,
           ForwardOutput& out);

  const ModelConfig& c_;
  RouterParams router_;
  float softmax_scale_;
  double mscale_ = 1.0;
  Stream stream_;
  DeviceMatrix embed_, lm_head_;
  MatrixView lm_head_view_;
  DeviceBuffer<float> final_norm_;
  DeviceBuffer<double> inv_freq_;
  std::vector<DeviceLayer> layers_;
  std::optional<DeviceExperts> experts_;
  std::map<SequenceId, CacheMirror> mirrors_;
  DeviceSampler sampler_;
  std::size_t logit_rows_ = 0;
  // CUDA graphs of whole passes (experts on the device, no routes to record), by
  // shape; a shape is captured the second time in a row it is seen with no buffer
  // of the pass having moved in between (Workspace). TANDEM_CUDA_GRAPHS=0 turns
  // them off; so does a capture that fails (the passes then launch each kernel).
  Workspace workspace_;
  bool use_graphs_ = true;
  std::map<GraphKey, GraphExec> graphs_;
  std::pair<std::uint64_t, std::uint64_t> graphs_generation_{0, 0};
  std::optional<GraphKey> last_key_;
  std::pair<std::uint64_t, std::uint64_t> last_generation_{0, 0};
  std::uint64_t graph_launches_ = 0;

  // Per pass: the rows' tokens, positions, capacities and cache pointers.
  // The rows' arguments, one transfer per pass: [caches (n pointers) | tokens |
  // positions | capacities (n int32 each)] in row_args_, views into it below.
  PinnedBuffer<std::byte> row_args_pinned_;
  DeviceBuffer<std::byte> row_args_;
  float* const* caches_ = nullptr;
  const std::int32_t *tokens_ = nullptr, *positions_ = nullptr, *capacities_ = nullptr;
  // Activations, reused between passes.
  DeviceBuffer<float> x_, xn_, q_, q_a_, kv_a_, q_abs_, latent_, o_, gate_, up_, mlp_, router_logits_, route_weights_, logits_in_, logits_,
      staging_;
  DeviceBuffer<std::int32_t> route_experts_;
  // Host copies for a remote executor and for the cache of record.
  PinnedBuffer<float> host_x_, host_mlp_, host_staging_, host_route_weights_;
  PinnedBuffer<std::int32_t> host_route_experts_;
  std::vector<ExpertRoute> host_routes_;
};

void DeviceForward::SyncCaches(std::span<const Row> rows, KvCachePool& kv) {
  for (auto it = mirrors_.begin(); it != mirrors_.end();) {  // closed sequences
    it = kv.Contains(it->first) ? std::next(it) : mirrors_.erase(it);
  }
  const std::int64_t width = c_.kv_lora_rank + c_.qk_rope_head_dim;
  const auto layers = static_cast<std::int64_t>(layers_.size());
  for (const Row& r : rows) {
    const KvCache& host = kv.Get(r.sequence);
    CacheMirror& m = mirrors_[r.sequence];
    // A new cache, its content replaced on the host, or its allocation grown: upload it whole.
    if (m.serial != host.serial() || m.positions != host.allocated()) {
      if (m.positions != host.allocated()) {
        m.data = DeviceBuffer<float>(static_cast<std::size_t>(layers * host.allocated() * width));
        m.positions = host.allocated();
      }
      m.serial = host.serial();
      m.synced = 0;
    }
    m.synced = std::min(m.synced, host.length());
    if (m.synced < host.length()) {  // positions the host has and the mirror lacks
      for (std::int64_t l = 0; l < layers; ++l) {
        const std::int64_t first = (l * m.positions + m.synced) * width;
        Check(cudaMemcpyAsync(m.data.get() + first, host.At(static_cast<int>(l), m.synced),
                              static_cast<std::size_t>((host.length() - m.synced) * width) * sizeof(float), cudaMemcpyHostToDevice,
                              stream_.get()),
              "cudaMemcpyAsync (kv cache)");
      }
      m.synced = host.length();
    }
  }
  const auto n = rows.size();
  const std::size_t bytes = n * (sizeof(float*) + 3 * sizeof(std::int32_t));
  row_args_pinned_.Reserve(bytes);
  std::byte* device = workspace_.Grow(row_args_, bytes);
  auto* caches = reinterpret_cast<float**>(row_args_pinned_.get());
  auto* ints = reinterpret_cast<std::int32_t*>(caches + n);  // tokens, positions, capacities
  for (std::size_t b = 0; b < n; ++b) {
    CacheMirror& m = mirrors_.at(rows[b].sequence);
    caches[b] = m.data.get();
    ints[b] = rows[b].token;
    ints[n + b] = rows[b].position;
    ints[2 * n + b] = m.positions;
  }
  Check(cudaMemcpyAsync(device, row_args_pinned_.get(), bytes, cudaMemcpyHostToDevice, stream_.get()), "cudaMemcpyAsync (rows' arguments)");
  caches_ = reinterpret_cast<float* const*>(device);
  tokens_ = reinterpret_cast<const std::int32_t*>(device + n * sizeof(float*));
  positions_ = tokens_ + n;
  capacities_ = tokens_ + 2 * n;
}

void DeviceForward::Attention(const DeviceLayer& l, int layer, std::int64_t b_rows) {
  const DeviceAttention& w = l.attention;
  const cudaStream_t s = stream_.get();
  const std::int64_t hidden = c_.hidden_size, heads = c_.num_attention_heads;
  const std::int64_t nope = c_.qk_nope_head_dim, rope = c_.qk_rope_head_dim, v_dim = c_.v_head_dim;
  const std::int64_t q_head = nope + rope, kvl = c_.kv_lora_rank, width = kvl + rope;
  const auto eps = static_cast<float>(c_.rms_norm_eps);
  const std::int64_t q_width = heads * q_head;

  workspace_.Grow(q_, static_cast<std::size_t>(b_rows * q_width));
  workspace_.Grow(kv_a_, static_cast<std::size_t>(b_rows * width));
  if (c_.q_lora_rank > 0) {
    workspace_.Grow(q_a_, static_cast<std::size_t>(b_rows * c_.q_lora_rank));
    Gemv(w.q_a_proj.view, xn_.get(), hidden, b_rows, q_a_.get(), c_.q_lora_rank, false, s);
    RmsNorm(q_a_.get(), c_.q_lora_rank, w.q_a_norm.get(), b_rows, c_.q_lora_rank, eps, q_a_.get(), c_.q_lora_rank, s);
    Gemv(w.q_b_proj.view, q_a_.get(), c_.q_lora_rank, b_rows, q_.get(), q_width, false, s);
  } else {
    Gemv(w.q_proj.view, xn_.get(), hidden, b_rows, q_.get(), q_width, false, s);
  }
  Gemv(w.kv_a_proj.view, xn_.get(), hidden, b_rows, kv_a_.get(), width, false, s);

  // The new rows' compressed KV: normalised latent, rotated key, into the caches.
  RmsNorm(kv_a_.get(), width, w.kv_a_norm.get(), b_rows, kvl, eps, kv_a_.get(), width, s);
  Rope(kv_a_.get(), b_rows, width, kvl, 1, 0, rope, positions_, inv_freq_.get(), mscale_, s);
  const CacheRows cache{caches_, capacities_, positions_, width};
  StoreLatents(kv_a_.get(), b_rows, cache, layer, staging_.get() + static_cast<std::int64_t>(layer) * b_rows * width, s);
  Rope(q_.get(), b_rows, q_width, nope, heads, q_head, rope, positions_, inv_freq_.get(), mscale_, s);

  workspace_.Grow(q_abs_, static_cast<std::size_t>(b_rows * heads * kvl));
  workspace_.Grow(latent_, static_cast<std::size_t>(b_rows * heads * kvl));
  workspace_.Grow(o_, static_cast<std::size_t>(b_rows * heads * v_dim));
  AbsorbKeys(w.key_up.view, heads, nope, kvl, q_.get(), q_head, b_rows, q_abs_.get(), s);
  LatentAttention(q_abs_.get(), q_.get(), q_head, nope, cache, layer, b_rows, heads, kvl, rope, softmax_scale_, latent_.get(), s);
  ApplyValues(w.value_up.view, heads, v_dim, kvl, latent_.get(), b_rows, o_.get(), s);
  // x += o_proj · o: the residual added by the product itself.
  Gemv(w.o_proj.view, o_.get(), heads * v_dim, b_rows, x_.get(), hidden, true, s);
}

void DeviceForward::Moe(const DeviceLayer& l, std::span<const Row> rows, ExpertExecutor* experts, ExpertInputPrecision expert_input,
                        bool record_routes, ForwardOutput& out) {
  const cudaStream_t s = stream_.get();
  const auto b_rows = static_cast<std::int64_t>(rows.size());
  const std::int64_t hidden = c_.hidden_size;
  const int k = c_.num_experts_per_tok;
  const auto n = static_cast<std::size_t>(b_rows * hidden);
  const auto routes = static_cast<std::size_t>(b_rows * k);
  workspace_.Grow(router_logits_, static_cast<std::size_t>(b_rows * c_.n_routed_experts));
  workspace_.Grow(route_experts_, routes);
  workspace_.Grow(route_weights_, routes);
  Gemv(l.router.view, xn_.get(), hidden, b_rows, router_logits_.get(), c_.n_routed_experts, false, s);
  Route(router_logits_.get(), b_rows, router_, l.has_bias ? l.router_bias.get() : nullptr, route_experts_.get(), route_weights_.get(), s);

  const bool host_routes = record_routes || experts != nullptr;
  if (host_routes) {
    host_route_experts_.Reserve(routes);
    host_route_weights_.Reserve(routes);
    Check(cudaMemcpyAsync(host_route_experts_.get(), route_experts_.get(), routes * sizeof(std::int32_t), cudaMemcpyDeviceToHost, s),
          "cudaMemcpyAsync");
    Check(cudaMemcpyAsync(host_route_weights_.get(), route_weights_.get(), routes * sizeof(float), cudaMemcpyDeviceToHost, s),
          "cudaMemcpyAsync");
  }
  if (experts != nullptr) {
    host_x_.Reserve(n);
    host_mlp_.Reserve(n);
    Check(cudaMemcpyAsync(host_x_.get(), xn_.get(), n * sizeof(float), cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
  }
  if (host_routes) {
    stream_.Synchronize();
    host_routes_.resize(routes);
    for (std::size_t i = 0; i < routes; ++i) host_routes_[i] = {host_route_experts_.get()[i], host_route_weights_.get()[i]};
    if (record_routes) out.routes.push_back(host_routes_);
  }
  workspace_.Grow(mlp_, n);
  if (experts != nullptr) {
    RoundExpertInput(host_x_.get(), b_rows, hidden, expert_input);
    experts->Start(l.checkpoint_layer, rows, host_x_.get(), host_routes_);
    experts->Finish(host_mlp_.get());
    Check(cudaMemcpyAsync(mlp_.get(), host_mlp_.get(), n * sizeof(float), cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
  } else {
    experts_->ComputeOnDevice(l.checkpoint_layer, xn_.get(), b_rows, route_experts_.get(), route_weights_.get(), k, mlp_.get(), nullptr, s);
  }
  Add(x_.get(), mlp_.get(), static_cast<std::int64_t>(n), s);
}

void DeviceForward::Enqueue(std::span<const Row> rows, ExpertExecutor* experts, ExpertInputPrecision expert_input, bool record_routes,
                            ForwardOutput& out) {
  const cudaStream_t s = stream_.get();
  const auto b_rows = static_cast<std::int64_t>(rows.size());
  const std::int64_t hidden = c_.hidden_size;
  const auto eps = static_cast<float>(c_.rms_norm_eps);
  Embed(embed_.view, tokens_, b_rows, x_.get(), s);
  for (int l = 0; l < static_cast<int>(layers_.size()); ++l) {
    const DeviceLayer& lw = layers_[static_cast<std::size_t>(l)];
    RmsNorm(x_.get(), hidden, lw.input_norm.get(), b_rows, hidden, eps, xn_.get(), hidden, s);
    Attention(lw, l, b_rows);
    RmsNorm(x_.get(), hidden, lw.post_attention_norm.get(), b_rows, hidden, eps, xn_.get(), hidden, s);
    if (!lw.moe) {
      const auto n = static_cast<std::size_t>(b_rows * lw.dense.intermediate());
      lw.dense.Forward(xn_.get(), b_rows, workspace_.Grow(gate_, n), workspace_.Grow(up_, n), x_.get(), true, s);  // x += mlp
    } else {
      Moe(lw, rows, experts, expert_input, record_routes, out);
    }
  }
  const auto selected = static_cast<std::int64_t>(out.logit_rows.size());
  if (selected > 0) {
    for (std::int64_t i = 0; i < selected; ++i) {
      RmsNorm(x_.get() + static_cast<std::int64_t>(out.logit_rows[static_cast<std::size_t>(i)]) * hidden, hidden, final_norm_.get(), 1,
              hidden, eps, logits_in_.get() + i * hidden, hidden, s);
    }
    Gemv(lm_head_view_, logits_in_.get(), hidden, selected, logits_.get(), c_.vocab_size, false, s);
  }
}

DeviceForward::GraphExec DeviceForward::Capture(std::span<const Row> rows, ForwardOutput& out) {
  const cudaStream_t s = stream_.get();
  Check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  cudaGraph_t graph = nullptr;
  try {
    Enqueue(rows, nullptr, ExpertInputPrecision::kF32, false, out);
  } catch (...) {
    cudaStreamEndCapture(s, &graph);  // leave the stream usable
    if (graph != nullptr) cudaGraphDestroy(graph);
    throw;
  }
  Check(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  Check(status, "cudaGraphInstantiate");
  return GraphExec(exec);
}

void DeviceForward::Forward(std::span<const Row> rows, KvCachePool& kv, ExpertExecutor* experts, ExpertInputPrecision expert_input,
                            bool record_routes, bool keep_hidden, ForwardOutput& out) {
  if (experts == nullptr && !experts_) throw std::logic_error("device forward: no executor for the experts");
  const cudaStream_t s = stream_.get();
  const auto b_rows = static_cast<std::int64_t>(rows.size());
  const std::int64_t hidden = c_.hidden_size, width = c_.kv_lora_rank + c_.qk_rope_head_dim;
  const auto layers = static_cast<std::int64_t>(layers_.size());
  const auto n = static_cast<std::size_t>(b_rows * hidden);
  logit_rows_ = 0;
  SyncCaches(rows, kv);
  for (std::size_t b = 0; b < rows.size(); ++b) {
    if (rows[b].logits) out.logit_rows.push_back(b);
  }
  const auto selected = static_cast<std::int64_t>(out.logit_rows.size());
  workspace_.Grow(x_, n);
  workspace_.Grow(xn_, n);
  workspace_.Grow(staging_, static_cast<std::size_t>(layers * b_rows * width));
  workspace_.Grow(logits_in_, static_cast<std::size_t>(std::max<std::int64_t>(selected, 1) * hidden));
  workspace_.Grow(logits_, static_cast<std::size_t>(std::max<std::int64_t>(selected, 1) * c_.vocab_size));

  // A pass with no host round trip inside can be a graph: one launch instead of a
  // few hundred.
  if (use_graphs_ && experts == nullptr && !record_routes) {
    GraphKey key{b_rows, out.logit_rows};
    if (graphs_generation_ != Generation()) {  // a buffer a graph names has moved: every graph is stale
      graphs_.clear();
      graphs_generation_ = Generation();
    }
    auto it = graphs_.find(key);
    if (it == graphs_.end() && last_key_ == key && last_generation_ == Generation()) {
      if (graphs_.size() >= 64) graphs_.clear();
      try {
        it = graphs_.emplace(key, Capture(rows, out)).first;
      } catch (const std::exception& e) {
        fmt::print(stderr, "tandem-rt: CUDA graph capture failed ({}); launching kernels one by one from now on\n", e.what());
        use_graphs_ = false;
        graphs_.clear();
      }
    }
    if (it != graphs_.end()) {
      Check(cudaGraphLaunch(it->second.get(), s), "cudaGraphLaunch");
      ++graph_launches_;
    } else {
      Enqueue(rows, experts, expert_input, record_routes, out);
    }
    last_key_ = std::move(key);
    last_generation_ = Generation();
  } else {
    Enqueue(rows, experts, expert_input, record_routes, out);
  }

  // The new cache entries back to the cache of record, the logits, the hidden states.
  host_staging_.Reserve(static_cast<std::size_t>(layers * b_rows * width));
  Check(cudaMemcpyAsync(host_staging_.get(), staging_.get(), static_cast<std::size_t>(layers * b_rows * width) * sizeof(float),
                        cudaMemcpyDeviceToHost, s),
        "cudaMemcpyAsync (kv cache)");
  if (keep_hidden) {
    host_x_.Reserve(n);
    Check(cudaMemcpyAsync(host_x_.get(), x_.get(), n * sizeof(float), cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
  }
  if (selected > 0) {
    out.logits.resize(static_cast<std::size_t>(selected * c_.vocab_size));
    Check(cudaMemcpyAsync(out.logits.data(), logits_.get(), out.logits.size() * sizeof(float), cudaMemcpyDeviceToHost, s),
          "cudaMemcpyAsync (logits)");
  }
  stream_.Synchronize();
  logit_rows_ = static_cast<std::size_t>(selected);

  for (std::int64_t l = 0; l < layers; ++l) {
    for (std::int64_t b = 0; b < b_rows; ++b) {
      const Row& r = rows[static_cast<std::size_t>(b)];
      std::copy_n(host_staging_.get() + (l * b_rows + b) * width, width, kv.Get(r.sequence).At(static_cast<int>(l), r.position));
    }
  }
  for (const Row& r : rows) {
    CacheMirror& m = mirrors_.at(r.sequence);
    m.synced = std::max(m.synced, r.position + 1);
  }
  if (keep_hidden) out.hidden.assign(host_x_.get(), host_x_.get() + n);
}

}  // namespace

}  // namespace cuda

std::unique_ptr<CudaForward> CudaForward::Create(const Checkpoint& ckpt, const ModelWeights& weights, const RopeTable& rope,
                                                 float softmax_scale, bool experts_on_device) {
  RequireCudaDevice();
  return std::make_unique<cuda::DeviceForward>(ckpt, weights, rope, softmax_scale, experts_on_device);
}

}  // namespace tandem::rt
