#include "runtime/engine/engine.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "runtime/engine/cuda/cuda_forward.hpp"
#include "runtime/engine/local_experts.hpp"
#include "runtime/engine/mlp.hpp"
#include "runtime/engine/model_weights.hpp"
#include "runtime/engine/rope.hpp"
#include "runtime/engine/router.hpp"
#include "runtime/kernels/latent_attention.hpp"
#include "runtime/kernels/matmul.hpp"
#include "runtime/kernels/ops.hpp"
#include "runtime/kernels/thread_pool.hpp"
#include "runtime/kernels/workspace_memory.hpp"
#include "runtime/model/checkpoint.hpp"

namespace tandem::rt {

namespace {

// Charges the time since its previous lap to a region of the pass; a pass that
// ends adds its regions to the StepProfile (one that throws, nothing). Does
// nothing without a profile.
class RegionClock {
 public:
  explicit RegionClock(StepProfile* profile) : profile_(profile) {}
  void Start() {
    if (profile_ == nullptr) return;
    pass_ = {};
    last_ = std::chrono::steady_clock::now();
  }
  void Lap(StepProfile::Region region) {
    if (profile_ == nullptr) return;
    const auto now = std::chrono::steady_clock::now();
    pass_[region] += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }
  void EndPass() {
    if (profile_ == nullptr) return;
    Lap(StepProfile::kOther);
    for (std::size_t r = 0; r < pass_.size(); ++r) profile_->seconds[r] += pass_[r];
    ++profile_->passes;
  }

 private:
  StepProfile* profile_;
  std::array<double, StepProfile::kRegions> pass_{};
  std::chrono::steady_clock::time_point last_;
};

}  // namespace

struct Engine::State {
  ModelConfig config;
  EngineOptions options;
  ModelWeights weights;
  RopeTable rope;
  std::vector<std::optional<Router>> routers;  // per layer; set for MoE layers
  std::unique_ptr<ThreadPool> own_pool;        // unless EngineOptions::pool lends one
  ThreadPool& pool;
  std::shared_ptr<ExpertExecutor> experts;
  KvCachePool kv;
  float softmax_scale;
  RegionClock clock;

  // Workspace, reused between steps.
  Workspace<float> x, xn, attn, mlp, q, q_a, kv_a, q_abs, latent, o, router_logits, mlp_scratch, logits_in, mtp_in;
  Workspace<float> head_rows, head_out;  // one head's rows together (Attention with many rows)
  std::vector<MatMulTask> head_products;
  std::vector<std::int64_t> by_length, attention_order;  // a step's rows by context length; in the order attention takes them
  std::vector<ExpertRoute> routes;
  std::unique_ptr<CudaForward> cuda;  // set when the pass runs on the GPU
  std::uint64_t passes = 0;
  std::uint64_t device_logits_pass = 0;  // the pass whose logits the device holds

  State(const Checkpoint& ckpt, EngineOptions opts, const ExpertExecutorFactory& factory)
      : config(ckpt.config()),
        options(opts),
        weights(opts.mtp ? ModelWeights::LoadMtp(ckpt) : ModelWeights::Load(ckpt)),
        rope(config),
        own_pool(opts.pool != nullptr ? nullptr : std::make_unique<ThreadPool>(opts.threads)),
        pool(opts.pool != nullptr ? *opts.pool : *own_pool),
        // Rounded expert inputs mean a comparison with a hybrid run: sum exactly as it does.
        // On the GPU the device holds the experts itself.
        experts(factory ? factory(pool)
                : opts.device == Device::kCuda
                    ? nullptr
                    : std::make_shared<LocalExpertExecutor>(ckpt, &pool, opts.expert_input != ExpertInputPrecision::kF32,
                                                            MoeLayersOf(config, weights))),
        kv(static_cast<int>(weights.layers.size()), config.kv_lora_rank + config.qk_rope_head_dim),
        softmax_scale(static_cast<float>(rope.softmax_scale_factor() / std::sqrt(static_cast<double>(config.q_head_dim())))),
        clock(opts.profile) {
    if (opts.quantize) {
      if (opts.device == Device::kCuda)
        throw std::invalid_argument("--device cuda: a quantized reading of the model (a drafter's) runs on the CPU");
      weights.Quantize(*opts.quantize, opts.quantize_group);
    }
    if (opts.device == Device::kCuda) {
      if (!factory && opts.expert_input != ExpertInputPrecision::kF32) {
        throw std::invalid_argument(
            "--device cuda: rounding the experts' inputs (--expert-input-dtype, a CPU comparison aid) is not done on the device");
      }
      cuda = CudaForward::Create(ckpt, weights, rope, softmax_scale, experts == nullptr);
    }
    for (const LayerWeights& lw : weights.layers) {
      if (lw.moe) {
        routers.emplace_back(std::in_place, config, lw.router_bias);
      } else {
        routers.emplace_back();
      }
    }
  }

  // The experts an engine over these weights computes: every MoE layer it holds.
  static std::vector<LayerSlice> MoeLayersOf(const ModelConfig& c, const ModelWeights& w) {
    std::vector<LayerSlice> slices;
    for (const LayerWeights& lw : w.layers) {
      if (lw.moe) {
        slices.push_back(
            {lw.checkpoint_layer, 0, c.n_routed_experts, 0, c.moe_intermediate_size, 0, c.moe_intermediate_size * c.n_shared_experts});
      }
    }
    return slices;
  }

  void OrderAttention(std::span<const Row> rows);
  void Attention(int layer, std::span<const Row> rows);
  void Validate(std::span<const Row> rows, std::map<SequenceId, int>& next_position);
};

void Engine::State::Validate(std::span<const Row> rows, std::map<SequenceId, int>& next_position) {
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    if (!kv.Contains(r.sequence)) throw std::invalid_argument(fmt::format("row {}: sequence {} has no KV cache open", i, r.sequence));
    if (r.token < 0 || r.token >= config.vocab_size) {
      throw std::invalid_argument(fmt::format("row {}: token {} is outside the vocabulary [0, {})", i, r.token, config.vocab_size));
    }
    auto [it, inserted] = next_position.try_emplace(r.sequence, kv.Get(r.sequence).length());
    if (r.position != it->second) {
      throw std::invalid_argument(
          fmt::format("row {}: sequence {} position {} but the next position is {}", i, r.sequence, r.position, it->second));
    }
    if (r.position >= kv.Get(r.sequence).capacity()) {
      throw std::invalid_argument(fmt::format("row {}: sequence {} position {} exceeds its KV capacity {}", i, r.sequence, r.position,
                                              kv.Get(r.sequence).capacity()));
    }
    ++it->second;
  }
}

// Row-by-row work of a step (norms, residual adds, rotating and storing the new
// latents, routing) goes to the pool in shares of at least this many rows: a prompt
// chunk's would otherwise leave the other threads idle, while a decode step's few rows
// stay on the caller (ParallelFor runs a single share inline). Each row is computed
// alone either way.
constexpr std::int64_t kRowsPerShare = 8;

template <typename Fn>
void ForRows(ThreadPool& pool, std::int64_t rows, const Fn& fn) {
  ForShares(&pool, rows, kRowsPerShare, fn);
}

// From this many rows on, attention's per-head products take a head's rows together
// (Engine::State::Attention): two more hand-offs to the pool per layer, repaid once the
// rows are many.
constexpr std::int64_t kRowsForHeadProducts = 8;

// A row's attention costs its context length, and the pool gives each thread one
// contiguous share: rows by length, longest and shortest alternating, so that every
// share holds as much context as another (a prompt chunk's rows in position order
// left the first thread the short half, idle half the time). Once per step: every
// layer attends over the same rows.
void Engine::State::OrderAttention(std::span<const Row> rows) {
  by_length.resize(rows.size());
  std::iota(by_length.begin(), by_length.end(), std::int64_t{0});
  std::stable_sort(by_length.begin(), by_length.end(), [&](std::int64_t a, std::int64_t c) { return rows[a].position < rows[c].position; });
  attention_order.resize(by_length.size());
  for (std::size_t k = 0, lo = 0, hi = by_length.size(); k < by_length.size(); ++k) {
    attention_order[k] = k % 2 == 0 ? by_length[--hi] : by_length[lo++];
  }
}

void Engine::State::Attention(int layer, std::span<const Row> rows) {
  const AttentionWeights& w = weights.layers[static_cast<std::size_t>(layer)].attention;
  const auto b_rows = static_cast<std::int64_t>(rows.size());
  const std::int64_t heads = config.num_attention_heads;
  const std::int64_t nope = config.qk_nope_head_dim, rope_dim = config.qk_rope_head_dim, v_dim = config.v_head_dim;
  const std::int64_t q_head = nope + rope_dim, kvl = config.kv_lora_rank, width = kvl + rope_dim;
  const auto eps = static_cast<float>(config.rms_norm_eps);

  // Queries [rows × heads·(nope + rope)] and the new rows' compressed KV, both from
  // xn: the two down-projections in one parallel loop.
  q.resize(static_cast<std::size_t>(b_rows * heads * q_head));
  kv_a.resize(static_cast<std::size_t>(b_rows * width));
  if (config.q_lora_rank > 0) {
    q_a.resize(static_cast<std::size_t>(b_rows * config.q_lora_rank));
    const MatMulTask down[] = {{&w.q_a_proj, xn.data(), b_rows, q_a.data(), nullptr},
                               {&w.kv_a_proj, xn.data(), b_rows, kv_a.data(), nullptr}};
    MatMulMany(down, &pool);
    RmsNorm(q_a.data(), w.q_a_norm.data(), b_rows, config.q_lora_rank, eps, q_a.data());
    MatMul(w.q_b_proj, q_a.data(), b_rows, q.data(), &pool);
  } else {
    const MatMulTask down[] = {{&w.q_proj, xn.data(), b_rows, q.data(), nullptr}, {&w.kv_a_proj, xn.data(), b_rows, kv_a.data(), nullptr}};
    MatMulMany(down, &pool);
  }
  clock.Lap(StepProfile::kAttentionProjections);

  // The compressed KV, normalised and rotated, straight into the caches.
  ForRows(pool, b_rows, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t b = first; b < last; ++b) {
      float* row = kv_a.data() + b * width;
      RmsNorm(row, w.kv_a_norm.data(), 1, kvl, eps, row);
      rope.Apply(row + kvl, 1, rows[b].position);
      std::copy_n(row, width, kv.Get(rows[b].sequence).At(layer, rows[b].position));
      rope.Apply(q.data() + b * heads * q_head + nope, heads, rows[b].position, q_head);
    }
  });

  // Per (row, head), one parallel loop: absorb W_UK into the query (q_abs =
  // W_UK[h]ᵀ · q_nope, so scores are taken against the cached latents), attend over
  // the cache, and apply W_UV[h] to the attended latent. A thread's heads of one row
  // attend together (LatentAttentionHeads); each pair's result is still computed alone,
  // so batching and threads never change it. With many rows (a prompt chunk, a large
  // batch) the two products take a head's rows together instead, before and after the
  // loop: W_UK's absorption over all of them in one call, W_UV by the many-input tiles
  // (MatMulMany); both give each row the bits it gets alone.
  const bool rows_together = b_rows >= kRowsForHeadProducts;
  q_abs.resize(static_cast<std::size_t>(b_rows * heads * kvl));
  latent.resize(static_cast<std::size_t>(b_rows * heads * kvl));
  o.resize(static_cast<std::size_t>(b_rows * heads * v_dim));
  if (rows_together) {
    // q_abs head by head: head h's row b at (h · rows + b) · kvl.
    head_rows.resize(static_cast<std::size_t>(heads * b_rows * std::max(nope, kvl)));
    const auto absorb = [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t h = begin; h < end; ++h) {
        // The head's rows gathered by the thread that takes them (a prompt chunk's are
        // megabytes a layer: on the caller alone, the other threads would wait).
        for (std::int64_t b = 0; b < b_rows; ++b) {
          std::copy_n(q.data() + (b * heads + h) * q_head, nope, head_rows.data() + (h * b_rows + b) * nope);
        }
        MatMulTransposed(w.key_up[static_cast<std::size_t>(h)], head_rows.data() + h * b_rows * nope, b_rows,
                         q_abs.data() + h * b_rows * kvl, nullptr);
      }
    };
    pool.ParallelFor(heads, [&absorb](std::int64_t begin, std::int64_t end) { absorb(begin, end); });
  }
  const auto per_head = [&](std::int64_t begin, std::int64_t end) {
    thread_local std::vector<float> s;
    for (std::int64_t j = begin; j < end;) {
      const std::int64_t b = attention_order[static_cast<std::size_t>(j / heads)], h0 = j % heads, n = std::min(heads - h0, end - j);
      const std::int64_t i = b * heads + h0;
      if (!rows_together) {
        // All of this share's absorptions read their matrices from memory at once,
        // instead of one after another (each product only prefetches its own).
        for (std::int64_t h = h0; h < h0 + n; ++h) PrefetchWeights(w.key_up[static_cast<std::size_t>(h)]);
        for (std::int64_t h = h0; h < h0 + n; ++h) {
          MatMulTransposed(w.key_up[static_cast<std::size_t>(h)], q.data() + (b * heads + h) * q_head, 1,
                           q_abs.data() + (b * heads + h) * kvl, nullptr);
        }
      }
      const float* queries = rows_together ? q_abs.data() + (h0 * b_rows + b) * kvl : q_abs.data() + i * kvl;
      const std::int64_t query_stride = rows_together ? b_rows * kvl : kvl;
      const int len = rows[b].position + 1;
      s.resize(static_cast<std::size_t>(n * len));
      LatentAttentionHeads(queries, query_stride, q.data() + i * q_head + nope, q_head, n, kv.Get(rows[b].sequence).At(layer, 0), width,
                           len, kvl, rope_dim, softmax_scale, s.data(), latent.data() + i * kvl);
      if (!rows_together) {
        for (std::int64_t h = h0; h < h0 + n; ++h) {
          MatMul(w.value_up[static_cast<std::size_t>(h)], latent.data() + (b * heads + h) * kvl, 1, o.data() + (b * heads + h) * v_dim,
                 nullptr);
        }
      } else {
        // W_UV takes a head's rows together: gathered here, while the latents are hot
        // (the absorption's inputs in head_rows are no longer read).
        for (std::int64_t h = h0; h < h0 + n; ++h) {
          std::copy_n(latent.data() + (b * heads + h) * kvl, kvl, head_rows.data() + (h * b_rows + b) * kvl);
        }
      }
      j += n;
    }
  };
  // Capturing one reference keeps the pool's std::function from allocating.
  pool.ParallelFor(b_rows * heads, [&per_head](std::int64_t begin, std::int64_t end) { per_head(begin, end); });
  if (rows_together) {
    // W_UV head by head over all rows (gathered by head above), the outputs put back.
    head_out.resize(static_cast<std::size_t>(heads * b_rows * v_dim));
    head_products.clear();
    for (std::int64_t h = 0; h < heads; ++h) {
      head_products.push_back({&w.value_up[static_cast<std::size_t>(h)], head_rows.data() + h * b_rows * kvl, b_rows,
                               head_out.data() + h * b_rows * v_dim, nullptr});
    }
    MatMulMany(head_products, &pool);
    // Shares of at least 32 rows: a batch's few rows stay on the caller, a prompt
    // chunk's are shared out.
    ForShares(&pool, b_rows, 32, [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t b = first; b < last; ++b) {
        for (std::int64_t h = 0; h < heads; ++h) {
          std::copy_n(head_out.data() + (h * b_rows + b) * v_dim, v_dim, o.data() + (b * heads + h) * v_dim);
        }
      }
    });
  }
  clock.Lap(StepProfile::kAttentionCache);
  attn.resize(static_cast<std::size_t>(b_rows * config.hidden_size));
  MatMul(w.o_proj, o.data(), b_rows, attn.data(), &pool);
  clock.Lap(StepProfile::kAttentionProjections);
}

Engine::Engine(const Checkpoint& ckpt, EngineOptions options, const ExpertExecutorFactory& experts)
    : state_(std::make_unique<State>(ckpt, options, experts)) {}

std::vector<RankStats> Engine::RankStatistics() const {
  return state_->experts ? state_->experts->RankStatistics() : std::vector<RankStats>{};
}

std::string Engine::LateRanks() const { return state_->experts ? state_->experts->Late() : ""; }

Engine::~Engine() = default;

const ModelConfig& Engine::config() const { return state_->config; }
KvCachePool& Engine::kv() { return state_->kv; }
ThreadPool& Engine::pool() { return state_->pool; }
bool Engine::keeps_hidden() const { return state_->options.keep_hidden; }
int Engine::vocab_size() const { return state_->config.vocab_size; }
int Engine::hidden_size() const { return state_->config.hidden_size; }
const CudaForward* Engine::cuda() const { return state_->cuda.get(); }

void Engine::WarmUp(int rows) {
  if (rows <= 0) return;
  const State& s = *state_;
  if (s.options.mtp) throw std::invalid_argument("WarmUp: an MTP engine's rows need the target's hidden states");
  if (rows > s.config.max_position_embeddings) {
    throw std::invalid_argument(fmt::format("WarmUp: {} rows exceed the model's context {}", rows, s.config.max_position_embeddings));
  }
  constexpr SequenceId kScratch = std::numeric_limits<SequenceId>::max();
  kv().Open(kScratch, rows);
  std::vector<Row> scratch;
  for (int i = 0; i < rows; ++i) {
    scratch.push_back({kScratch, i, static_cast<TokenId>(i % s.config.vocab_size), i + 1 == rows});
  }
  ForwardOutput out;
  try {
    Forward(scratch, out);
  } catch (...) {
    kv().Close(kScratch);
    throw;
  }
  kv().Close(kScratch);
}

void Engine::Forward(std::span<const Row> rows, ForwardOutput& out, const float* hidden_in) {
  State& s = *state_;
  const ModelConfig& c = s.config;
  out.logits.clear();
  out.logit_rows.clear();
  out.routes.clear();
  out.hidden.clear();
  out.pass = ++s.passes;
  if (rows.empty()) return;
  if (!s.cuda) s.clock.Start();
  if (s.weights.mtp && hidden_in == nullptr) throw std::invalid_argument("the MTP layer needs the target's hidden state of every row");
  std::map<SequenceId, int> next_position;
  s.Validate(rows, next_position);
  // Caches grow with their sequences: room for this pass's positions before any is written.
  for (const auto& [sequence, length] : next_position) s.kv.Get(sequence).Reserve(length);
  if (s.cuda) {
    s.cuda->Forward(rows, s.kv, s.experts.get(), s.options.expert_input, s.options.record_routes, s.options.keep_hidden, out);
    s.device_logits_pass = out.pass;
    for (const auto& [sequence, length] : next_position) s.kv.Get(sequence).SetLength(length);
    return;
  }

  const auto b_rows = static_cast<std::int64_t>(rows.size());
  const std::int64_t hidden = c.hidden_size;
  const auto n = static_cast<std::size_t>(b_rows * hidden);
  const auto eps = static_cast<float>(c.rms_norm_eps);
  s.x.resize(n);
  s.xn.resize(n);
  s.mlp.resize(n);
  for (std::int64_t b = 0; b < b_rows; ++b) CopyRow(s.weights.embed, rows[b].token, s.x.data() + b * hidden);
  if (s.weights.mtp) {
    // x = eh_proj · [enorm(embed(token)); hnorm(h)], row by row.
    const MtpInputWeights& m = *s.weights.mtp;
    s.mtp_in.resize(2 * n);
    for (std::int64_t b = 0; b < b_rows; ++b) {
      RmsNorm(s.x.data() + b * hidden, m.enorm.data(), 1, hidden, eps, s.mtp_in.data() + 2 * b * hidden);
      RmsNorm(hidden_in + b * hidden, m.hnorm.data(), 1, hidden, eps, s.mtp_in.data() + (2 * b + 1) * hidden);
    }
    MatMul(m.eh_proj, s.mtp_in.data(), b_rows, s.x.data(), &s.pool);
  }

  s.OrderAttention(rows);
  // x += add (when given), then xn = RmsNorm(x) (when given a norm): row by row, in one
  // hand-off. A layer's MLP output is added where the next layer norms its input.
  const auto add_then_norm = [&](const float* add, const std::vector<float>* norm) {
    ForRows(s.pool, b_rows, [&](std::int64_t first, std::int64_t last) {
      if (add != nullptr) {
        for (std::int64_t i = first * hidden; i < last * hidden; ++i) s.x[static_cast<std::size_t>(i)] += add[i];
      }
      if (norm != nullptr) RmsNorm(s.x.data() + first * hidden, norm->data(), last - first, hidden, eps, s.xn.data() + first * hidden);
    });
  };
  for (int l = 0; l < static_cast<int>(s.weights.layers.size()); ++l) {
    const LayerWeights& lw = s.weights.layers[static_cast<std::size_t>(l)];
    add_then_norm(l == 0 ? nullptr : s.mlp.data(), &lw.input_norm);
    s.clock.Lap(StepProfile::kOther);
    s.Attention(l, rows);
    add_then_norm(s.attn.data(), &lw.post_attention_norm);
    s.clock.Lap(StepProfile::kOther);
    if (!lw.moe) {
      MlpForward(lw.dense, s.xn.data(), b_rows, s.mlp.data(), s.mlp_scratch, &s.pool);
      s.clock.Lap(StepProfile::kDenseMlp);
    } else {
      const int k = c.num_experts_per_tok;
      s.router_logits.resize(static_cast<std::size_t>(b_rows * c.n_routed_experts));
      MatMul(lw.router, s.xn.data(), b_rows, s.router_logits.data(), &s.pool);
      s.routes.resize(static_cast<std::size_t>(b_rows * k));
      ForRows(s.pool, b_rows, [&](std::int64_t first, std::int64_t last) {
        for (std::int64_t b = first; b < last; ++b) {
          s.routers[static_cast<std::size_t>(l)]->Route(
              std::span<const float>(s.router_logits.data() + b * c.n_routed_experts, static_cast<std::size_t>(c.n_routed_experts)),
              std::span<ExpertRoute>(s.routes.data() + b * k, static_cast<std::size_t>(k)));
        }
      });
      s.clock.Lap(StepProfile::kRouter);
      if (s.options.record_routes) out.routes.push_back(s.routes);
      RoundExpertInput(s.xn.data(), b_rows, hidden, s.options.expert_input);
      s.experts->Start(lw.checkpoint_layer, rows, s.xn.data(), s.routes);
      s.experts->Finish(s.mlp.data());
      s.clock.Lap(StepProfile::kExperts);
    }
  }
  if (!s.weights.layers.empty()) add_then_norm(s.mlp.data(), nullptr);
  for (const auto& [sequence, length] : next_position) s.kv.Get(sequence).SetLength(length);
  if (s.options.keep_hidden) out.hidden.assign(s.x.begin(), s.x.end());

  for (std::size_t b = 0; b < rows.size(); ++b) {
    if (rows[b].logits) out.logit_rows.push_back(b);
  }
  if (out.logit_rows.empty()) {
    s.clock.EndPass();
    return;
  }
  const auto selected = static_cast<std::int64_t>(out.logit_rows.size());
  s.logits_in.resize(static_cast<std::size_t>(selected * hidden));
  for (std::int64_t i = 0; i < selected; ++i) {
    std::copy_n(s.x.data() + static_cast<std::int64_t>(out.logit_rows[i]) * hidden, hidden, s.logits_in.data() + i * hidden);
  }
  s.clock.Lap(StepProfile::kOther);
  RmsNorm(s.logits_in.data(), s.weights.final_norm.data(), selected, hidden, eps, s.logits_in.data());
  out.logits.resize(static_cast<std::size_t>(selected * c.vocab_size));
  MatMul(s.weights.lm_head, s.logits_in.data(), selected, out.logits.data(), &s.pool);
  s.clock.Lap(StepProfile::kLmHead);
  s.clock.EndPass();
}

std::vector<TokenId> Engine::SampleRows(const ForwardOutput& out, std::span<const SamplingParams> params,
                                        std::span<const std::int64_t> positions) {
  if (params.size() != out.logit_rows.size() || positions.size() != params.size()) {
    throw std::invalid_argument(
        fmt::format("sampling {} logits rows with {} settings and {} positions", out.logit_rows.size(), params.size(), positions.size()));
  }
  if (params.empty()) return {};
  if (state_->cuda && out.pass == state_->device_logits_pass) return state_->cuda->SampleLogits(params, positions);
  std::vector<TokenId> tokens;
  tokens.reserve(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    tokens.push_back(Sample(out.LogitsOf(i, state_->config.vocab_size), params[i], positions[i]));
  }
  return tokens;
}

}  // namespace tandem::rt
