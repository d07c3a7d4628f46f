#include "runtime/engine/v41_engine.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "runtime/engine/compressed_kv.hpp"
#include "runtime/engine/engram_hash.hpp"
#include "runtime/engine/hyper_connections.hpp"
#include "runtime/engine/index_selection.hpp"
#include "runtime/engine/local_experts.hpp"
#include "runtime/engine/router.hpp"
#include "runtime/engine/sink_attention.hpp"
#include "runtime/engine/v41_moe_slices.hpp"
#include "runtime/engine/v41_ops.hpp"
#include "runtime/engine/v41_rope.hpp"
#include "runtime/engine/v41_weights.hpp"
#include "runtime/kernels/matmul.hpp"
#include "runtime/kernels/microscaled_matrix.hpp"
#include "runtime/kernels/thread_pool.hpp"
#include "runtime/model/v41_checkpoint.hpp"
#include "runtime/numeric/dtype.hpp"
#include "runtime/numeric/microscaling.hpp"
#include "runtime/numeric/rounded_math.hpp"

namespace tandem::rt {

namespace {

// Where each piece of a position's cache row lies (floats from the row's start; −1: none).
struct CacheLayout {
  int token = 0;
  std::vector<int> window, latent, index_key, pending;
  int width = 1;

  explicit CacheLayout(const V41Config& c) {
    const auto layers = static_cast<std::size_t>(c.n_layers);
    window.assign(layers, -1);
    latent.assign(layers, -1);
    index_key.assign(layers, -1);
    pending.assign(layers, -1);
    for (int l = 0; l < c.n_layers; ++l) {
      const auto i = static_cast<std::size_t>(l);
      window[i] = std::exchange(width, width + c.head_dim);
      const V41Block b = c.Block(l);
      if (b == V41Block::kKvIndexSource || b == V41Block::kCandidateSource) {
        latent[i] = std::exchange(width, width + c.head_dim);
        index_key[i] = std::exchange(width, width + c.index_head_dim);
        if (c.compress_ratios[i] > 1) pending[i] = std::exchange(width, width + 2 * c.head_dim);
      }
    }
  }
};

}  // namespace

struct V41Engine::State {
  std::shared_ptr<const V41Config> config_holder;
  const V41Config& c;
  EngramConstants engram;
  V41Weights w;
  CacheLayout layout;
  KvCachePool cache_pool;
  std::unique_ptr<ThreadPool> own_pool;
  ThreadPool* pool = nullptr;
  ModelConfig moe_config;
  std::vector<Router> routers;
  std::vector<V41Rope> ropes;
  float eps;
  ExpertInputPrecision expert_input;
  bool keep_hidden;
  std::shared_ptr<ExpertExecutor> experts;

  // Per forward: rows, and for each row the compressed positions its layers attend to
  // (the latest index source's picks) and the candidate source's mask.
  std::span<const Row> rows;
  std::vector<KvCache*> caches;
  std::vector<std::vector<std::int32_t>> topk;
  std::vector<std::vector<bool>> candidates;

  State(const V41Checkpoint& ckpt, V41EngineOptions options, const Engine::ExpertExecutorFactory& factory)
      : config_holder(std::make_shared<V41Config>(ckpt.config())),
        c(*config_holder),
        engram(ckpt.engram()),
        w(V41Weights::Load(ckpt, /*experts=*/false)),
        layout(c),
        cache_pool(1, layout.width),
        moe_config(V41MoeConfig(c)),
        eps(static_cast<float>(c.norm_eps)),
        expert_input(options.expert_input),
        keep_hidden(options.keep_hidden) {
    if (options.pool != nullptr) {
      pool = options.pool;
    } else {
      own_pool = std::make_unique<ThreadPool>(options.threads);
      pool = own_pool.get();
    }
    for (const V41Layer& l : w.layers) routers.emplace_back(moe_config, l.moe.bias);
    for (int l = 0; l < c.n_layers; ++l) ropes.push_back(V41Rope::ForLayer(c, l));
    experts = factory ? factory(*pool)
                      : std::make_shared<LocalExpertExecutor>(std::make_unique<V41MoeSlices>(ckpt, V41MoeSlices::Everything(c), pool),
                                                              c.n_activated_experts);
  }

  float* Cache(std::size_t row, int offset, std::int64_t position) const { return caches[row]->At(0, static_cast<int>(position)) + offset; }
  float* Cache(std::size_t row, int offset) const { return Cache(row, offset, rows[row].position); }

  void Validate(std::span<const Row> in) {
    std::map<SequenceId, int> next;
    for (std::size_t i = 0; i < in.size(); ++i) {
      const Row& r = in[i];
      if (!cache_pool.Contains(r.sequence))
        throw std::invalid_argument(fmt::format("row {}: sequence {} has no KV cache open", i, r.sequence));
      if (r.token < 0 || r.token >= c.vocab_size) {
        throw std::invalid_argument(fmt::format("row {}: token {} is outside the vocabulary [0, {})", i, r.token, c.vocab_size));
      }
      auto [it, fresh] = next.try_emplace(r.sequence, cache_pool.Get(r.sequence).length());
      if (r.position != it->second) {
        throw std::invalid_argument(
            fmt::format("row {}: sequence {} position {} but the next position is {}", i, r.sequence, r.position, it->second));
      }
      if (r.position >= cache_pool.Get(r.sequence).capacity()) {
        throw std::invalid_argument(fmt::format("row {}: sequence {} position {} exceeds its KV capacity {}", i, r.sequence, r.position,
                                                cache_pool.Get(r.sequence).capacity()));
      }
      ++it->second;
    }
    for (const auto& [sequence, end] : next) cache_pool.Get(sequence).Reserve(end);
  }

  // Engram's table rows of every row for each Engram layer: [engram layer][row × ids].
  std::vector<std::vector<std::int64_t>> EngramIds() const {
    const int ids = (c.engram_max_ngram_size - 1) * c.engram_n_heads;
    std::vector<std::vector<std::int64_t>> out(engram.layers.size(),
                                               std::vector<std::int64_t>(rows.size() * static_cast<std::size_t>(ids)));
    std::map<SequenceId, std::vector<std::size_t>> by_sequence;
    for (std::size_t i = 0; i < rows.size(); ++i) by_sequence[rows[i].sequence].push_back(i);
    for (const auto& [sequence, members] : by_sequence) {
      const std::int64_t end = rows[members.back()].position + 1;
      // Engram reads at most max_ngram − 1 positions back.
      const std::int64_t from = std::max<std::int64_t>(0, rows[members.front()].position - (c.engram_max_ngram_size - 1));
      std::vector<std::int64_t> compressed(static_cast<std::size_t>(end), 0);
      for (std::int64_t p = from; p < end; ++p) {
        const auto token = static_cast<std::int64_t>(*Cache(members.front(), layout.token, p));
        compressed[static_cast<std::size_t>(p)] = engram.token_map[static_cast<std::size_t>(token)];
      }
      for (std::size_t e = 0; e < engram.layers.size(); ++e) {
        for (std::size_t m : members) {
          EngramRows(engram.layers[e], c.engram_max_ngram_size, c.engram_n_heads, engram.pad_id, compressed, rows[m].position,
                     rows[m].position + 1, out[e].data() + m * static_cast<std::size_t>(ids));
        }
      }
    }
    return out;
  }

  // h [rows × hc × dim] += each copy's gated share of the n-gram memory's value.
  void Engram(const V41Engram& g, const std::vector<std::int64_t>& ids, std::vector<float>& h) {
    const std::int64_t n = static_cast<std::int64_t>(rows.size()), dim = c.dim, hc = c.hc_mult;
    const std::int64_t heads = (c.engram_max_ngram_size - 1) * c.engram_n_heads, width = g.width, in = heads * width;
    std::vector<float> e(static_cast<std::size_t>(n * in));
    for (std::int64_t r = 0; r < n; ++r) {
      for (std::int64_t j = 0; j < heads; ++j) {
        const std::int64_t row = ids[static_cast<std::size_t>(r * heads + j)];
        for (std::int64_t k = 0; k < width; ++k) {
          const float v = F8E4M3ToF32(g.table[static_cast<std::size_t>(row * width + k)]) *
                          E8M0ToF32(g.table_scales[static_cast<std::size_t>(row * (width / 32) + k / 32)]);
          e[static_cast<std::size_t>(r * in + j * width + k)] = V41Bf16(v);
        }
      }
    }
    std::vector<float> kv(static_cast<std::size_t>(n * (hc + 1) * dim));
    MatMul(g.wkv, e.data(), n, kv.data(), pool);
    const float inv_sqrt_dim = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
    ForShares(pool, n, 4, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) {
        const float* value = kv.data() + r * (hc + 1) * dim + hc * dim;
        for (std::int64_t j = 0; j < hc; ++j) {
          float* x = h.data() + (r * hc + j) * dim;
          const float* key = kv.data() + r * (hc + 1) * dim + j * dim;
          double xs = 0.0, ks = 0.0, dot = 0.0;
          for (std::int64_t k = 0; k < dim; ++k) {
            const float wgt = g.q_weight[static_cast<std::size_t>(j * dim + k)] * g.k_weight[static_cast<std::size_t>(j * dim + k)];
            xs += static_cast<double>(x[k]) * x[k];
            ks += static_cast<double>(key[k]) * key[k];
            dot += static_cast<double>(x[k] * wgt * key[k]);
          }
          const float rstd = (1.0f / std::sqrt(static_cast<float>(xs / static_cast<double>(dim)) + eps)) *
                             (1.0f / std::sqrt(static_cast<float>(ks / static_cast<double>(dim)) + eps));
          const float d = static_cast<float>(dot) * rstd * inv_sqrt_dim;
          const float s = std::sqrt(std::max(std::fabs(d), 1e-6f));
          const float gate = RoundedSigmoid(d < 0 ? -s : d > 0 ? s : 0.0f);
          for (std::int64_t k = 0; k < dim; ++k) x[k] = V41Bf16(x[k] + gate * value[k]);
        }
      }
    });
  }

  // The compressed KV a KV source adds: its latent (and index key) at every row that
  // completes a group.
  void Compress(const V41Layer& layer, const float* x) {
    const int l = layer.layer;
    const int ratio = c.compress_ratios[static_cast<std::size_t>(l)];
    const std::int64_t n = static_cast<std::int64_t>(rows.size()), hd = c.head_dim;
    const V41Attention& a = layer.attention;
    std::vector<float> kv(static_cast<std::size_t>(n * hd)), score;
    PlainMatMul(a.compressor_wkv, x, n, kv.data(), pool);
    if (ratio > 1) {
      score.resize(kv.size());
      PlainMatMul(a.compressor_wgate, x, n, score.data(), pool);
      for (std::size_t r = 0; r < rows.size(); ++r) {  // every position's rows, for the group it belongs to
        float* p = Cache(r, layout.pending[static_cast<std::size_t>(l)]);
        std::copy_n(kv.data() + r * static_cast<std::size_t>(hd), hd, p);
        std::copy_n(score.data() + r * static_cast<std::size_t>(hd), hd, p + hd);
      }
    } else {
      V41Bf16(kv.data(), n * hd);  // a plain bf16 projection
    }
    const V41Rope& rope = ropes[static_cast<std::size_t>(l)];
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const std::int64_t p = rows[r].position;
      if ((p + 1) % ratio != 0) continue;
      std::vector<float> latent;
      if (ratio > 1) {
        GatedPooling pooling(ratio, hd);
        std::optional<std::vector<float>> pooled;
        for (std::int64_t q = p + 1 - ratio; q <= p; ++q) {
          const float* pend = Cache(r, layout.pending[static_cast<std::size_t>(l)], q);
          pooled = pooling.Add(q, {pend, static_cast<std::size_t>(hd)}, {pend + hd, static_cast<std::size_t>(hd)});
        }
        latent = std::move(*pooled);
        V41Bf16(latent.data(), hd);
      } else {
        latent.assign(kv.begin() + static_cast<std::ptrdiff_t>(r * static_cast<std::size_t>(hd)),
                      kv.begin() + static_cast<std::ptrdiff_t>((r + 1) * static_cast<std::size_t>(hd)));
      }
      std::vector<float> normed(static_cast<std::size_t>(hd));
      V41Norm(latent.data(), a.compressor_norm, hd, eps, normed.data());
      const std::int64_t group_position = p + 1 - ratio;
      if (!a.index_wk.empty()) {
        std::vector<float> k(static_cast<std::size_t>(c.index_head_dim));
        PlainMatMul(a.index_wk, normed.data(), 1, k.data(), nullptr);
        V41Bf16(k.data(), c.index_head_dim);
        float* key = Cache(r, layout.index_key[static_cast<std::size_t>(l)]);
        V41Norm(k.data(), a.index_k_norm, c.index_head_dim, eps, key);
        rope.Apply(key, 1, c.index_head_dim, group_position);
        RoundTripFp4Pow2(key, static_cast<std::size_t>(c.index_head_dim));
      }
      float* stored = Cache(r, layout.latent[static_cast<std::size_t>(l)]);
      std::copy(normed.begin(), normed.end(), stored);
      rope.Apply(stored, 1, hd, group_position);
      RoundTripFp4E4M3(stored, static_cast<std::size_t>(hd));
    }
  }

  // The indexer of an index source: each row's top-k compressed positions (and, on the
  // candidate source, its candidate blocks).
  void Index(const V41Layer& layer, const float* x, const float* qr) {
    const int l = layer.layer;
    const int ratio = c.compress_ratios[static_cast<std::size_t>(l)];
    const int key_layer = c.KvSourceOf(l);
    const std::int64_t n = static_cast<std::int64_t>(rows.size()), ih = c.index_n_heads, id = c.index_head_dim;
    const V41Attention& a = layer.attention;
    std::vector<float> q(static_cast<std::size_t>(n * ih * id)), weights(static_cast<std::size_t>(n * ih));
    MatMul(a.index_wq_b, qr, n, q.data(), pool);
    PlainMatMul(a.index_weights_proj, x, n, weights.data(), pool);
    const float factor = static_cast<float>(1.0 / std::sqrt(static_cast<double>(id)) / std::sqrt(static_cast<double>(ih)));
    for (float& v : weights) v = V41Bf16(V41Bf16(v) * factor);
    const V41Rope& rope = ropes[static_cast<std::size_t>(l)];
    const bool candidate_source = l == c.candidate_source_layer;
    const bool uses_candidates = c.candidate_source_layer >= 0 && c.candidate_source_layer < l;
    ForShares(pool, n, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) {
        const auto ri = static_cast<std::size_t>(r);
        const std::int64_t p = rows[ri].position;
        float* qrow = q.data() + r * ih * id;
        rope.Apply(qrow, ih, id, p);
        RoundTripFp4Pow2(qrow, static_cast<std::size_t>(ih * id));
        const std::int64_t visible = (p + 1) / ratio;
        std::vector<float> score(static_cast<std::size_t>(visible));
        for (std::int64_t t = 0; t < visible; ++t) {
          const float* key = Cache(ri, layout.index_key[static_cast<std::size_t>(key_layer)], t * ratio + ratio - 1);
          double sum = 0.0;
          for (std::int64_t h = 0; h < ih; ++h) {
            double dot = 0.0;
            for (std::int64_t k = 0; k < id; ++k) dot += static_cast<double>(qrow[h * id + k]) * key[k];
            sum += V41Bf16(std::max(V41Bf16(static_cast<float>(dot)), 0.0f) * weights[static_cast<std::size_t>(r * ih + h)]);
          }
          score[static_cast<std::size_t>(t)] = V41Bf16(static_cast<float>(sum));
        }
        if (candidate_source) candidates[ri] = CandidateBlocks(score, visible, c.candidate_topk_blocks, c.candidate_block_size);
        if (uses_candidates) {
          for (std::int64_t t = 0; t < visible; ++t) {
            if (!candidates[ri][static_cast<std::size_t>(t)]) score[static_cast<std::size_t>(t)] = -INFINITY;
          }
        }
        topk[ri].assign(static_cast<std::size_t>(c.index_topk), -1);
        TopPositions(score, visible, c.index_topk, 0, topk[ri].data());
      }
    });
  }

  // attention(x) for every row → out [rows × dim].
  void Attention(const V41Layer& layer, const float* x, float* out) {
    const int l = layer.layer;
    const int ratio = c.compress_ratios[static_cast<std::size_t>(l)];
    const std::int64_t n = static_cast<std::int64_t>(rows.size()), hd = c.head_dim, heads = c.n_heads;
    const V41Attention& a = layer.attention;
    const V41Rope& rope = ropes[static_cast<std::size_t>(l)];
    std::vector<float> qr(static_cast<std::size_t>(n * c.q_lora_rank)), q(static_cast<std::size_t>(n * heads * hd));
    MatMul(a.wq_a, x, n, qr.data(), pool);
    for (std::int64_t r = 0; r < n; ++r)
      V41Norm(qr.data() + r * c.q_lora_rank, a.q_norm, c.q_lora_rank, eps, qr.data() + r * c.q_lora_rank);
    MatMul(a.wq_b, qr.data(), n, q.data(), pool);
    std::vector<float> kv(static_cast<std::size_t>(n * hd));
    MatMul(a.wkv, x, n, kv.data(), pool);
    for (std::int64_t r = 0; r < n; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      rope.Apply(q.data() + r * heads * hd, heads, hd, rows[ri].position);
      float* window = Cache(ri, layout.window[static_cast<std::size_t>(l)]);
      V41Norm(kv.data() + r * hd, a.kv_norm, hd, eps, window);
      rope.Apply(window, 1, hd, rows[ri].position);
      RoundTripFp8(window, static_cast<std::size_t>(hd));
    }
    if (ratio > 0) {
      const V41Block type = c.Block(l);
      if (type == V41Block::kKvIndexSource || type == V41Block::kCandidateSource) Compress(layer, x);
      if (!a.index_wq_b.empty()) Index(layer, x, qr.data());
    }
    const int source = ratio > 0 ? c.KvSourceOf(l) : -1;
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
    std::vector<float> o(static_cast<std::size_t>(n * heads * hd));
    ForShares(pool, n, 1, [&](std::int64_t begin, std::int64_t end) {
      std::vector<float> rows_kv;
      std::vector<std::int32_t> indices;
      for (std::int64_t r = begin; r < end; ++r) {
        const auto ri = static_cast<std::size_t>(r);
        const std::int64_t p = rows[ri].position;
        rows_kv.clear();
        for (std::int64_t t = std::max<std::int64_t>(0, p - c.window_size + 1); t <= p; ++t) {
          const float* v = Cache(ri, layout.window[static_cast<std::size_t>(l)], t);
          rows_kv.insert(rows_kv.end(), v, v + hd);
        }
        if (ratio > 0) {
          for (std::int32_t t : topk[ri]) {
            if (t < 0) continue;
            const float* v = Cache(ri, layout.latent[static_cast<std::size_t>(source)], static_cast<std::int64_t>(t) * ratio + ratio - 1);
            rows_kv.insert(rows_kv.end(), v, v + hd);
          }
        }
        indices.resize(rows_kv.size() / static_cast<std::size_t>(hd));
        std::iota(indices.begin(), indices.end(), 0);
        for (std::int64_t h = 0; h < heads; ++h) {
          float* oh = o.data() + (r * heads + h) * hd;
          SinkAttention(q.data() + (r * heads + h) * hd, rows_kv.data(), indices, hd, scale, a.sink[static_cast<std::size_t>(h)], oh);
        }
        rope.Apply(o.data() + r * heads * hd, heads, hd, p, /*inverse=*/true);
      }
    });
    V41GroupedOutput(a, o.data(), n, heads, hd, c.o_groups, c.o_lora_rank, out, pool);
  }

  // moe(x) → out [rows × dim]: the gate and routes here, the experts by the executor (this
  // process's V41MoeSlices, or a hybrid layout's ranks), their sum rounded once to bf16.
  void Moe(const V41Layer& layer, const float* x, float* out) {
    const std::int64_t n = static_cast<std::int64_t>(rows.size()), dim = c.dim;
    const V41Moe& m = layer.moe;
    const auto n_experts = static_cast<int>(m.bias.size());
    const int k = c.n_activated_experts;
    std::vector<float> logits(static_cast<std::size_t>(n * n_experts));
    PlainMatMul(m.gate, x, n, logits.data(), pool);
    if (c.gate_temp != 1.0) {
      for (float& v : logits) v = static_cast<float>(v / c.gate_temp);
    }
    std::vector<ExpertRoute> routes(static_cast<std::size_t>(n * k));
    const Router& router = routers[static_cast<std::size_t>(layer.layer)];
    for (std::int64_t r = 0; r < n; ++r) {
      router.Route({logits.data() + r * n_experts, static_cast<std::size_t>(n_experts)},
                   {routes.data() + r * k, static_cast<std::size_t>(k)});
    }
    // x is bf16 already; a wire that rounds coarser (fp8) rounds it here for every rank alike.
    std::vector<float> input(x, x + n * dim);
    RoundExpertInput(input.data(), n, dim, expert_input);
    experts->Start(layer.layer, rows, input.data(), routes);
    experts->Finish(out);
    for (std::int64_t i = 0; i < n * dim; ++i) out[i] = V41Bf16(out[i]);
  }

  void Run(std::span<const Row> in, ForwardOutput& out) {
    Validate(in);
    rows = in;
    const std::size_t n = rows.size();
    const std::int64_t dim = c.dim, hc = c.hc_mult;
    caches.assign(n, nullptr);
    for (std::size_t r = 0; r < n; ++r) {
      caches[r] = &cache_pool.Get(rows[r].sequence);
      *Cache(r, layout.token) = static_cast<float>(rows[r].token);
    }
    topk.assign(n, {});
    candidates.assign(n, {});
    const std::vector<std::vector<std::int64_t>> engram_ids = EngramIds();

    // The stream: hc copies of the embedding; the first attention collapses it with copy 0.
    std::vector<float> h(n * static_cast<std::size_t>(hc * dim));
    for (std::size_t r = 0; r < n; ++r) {
      CopyRow(w.embed, rows[r].token, h.data() + r * static_cast<std::size_t>(hc * dim));
      for (std::int64_t j = 1; j < hc; ++j) {
        std::copy_n(h.data() + r * static_cast<std::size_t>(hc * dim), dim, h.data() + r * static_cast<std::size_t>(hc * dim) + j * dim);
      }
    }
    std::vector<float> pre_in(n * static_cast<std::size_t>(hc), 0.0f);
    for (std::size_t r = 0; r < n; ++r) pre_in[r * static_cast<std::size_t>(hc)] = 1.0f;

    const auto mixes = static_cast<std::size_t>(hc);
    std::vector<float> pre(n * mixes), post(n * mixes), comb(n * mixes * mixes), x(n * static_cast<std::size_t>(dim)),
        f(n * static_cast<std::size_t>(dim)), mixed(h.size());
    std::size_t engram_at = 0;
    const auto targets = static_cast<std::int64_t>(c.dspark_target_layer_ids.size());
    std::vector<float> hidden(keep_hidden ? n * static_cast<std::size_t>(targets * dim) : 0);
    for (const V41Layer& layer : w.layers) {
      if (layer.engram) Engram(*layer.engram, engram_ids[engram_at++], h);
      if (keep_hidden) {
        const auto t = std::find(c.dspark_target_layer_ids.begin(), c.dspark_target_layer_ids.end(), layer.layer);
        if (t != c.dspark_target_layer_ids.end()) {
          const auto k = static_cast<std::int64_t>(t - c.dspark_target_layer_ids.begin());
          for (std::size_t r = 0; r < n; ++r) {
            const float* copies = h.data() + r * static_cast<std::size_t>(hc * dim);
            float* into = hidden.data() + r * static_cast<std::size_t>(targets * dim) + k * dim;
            for (std::int64_t d = 0; d < dim; ++d) {
              double sum = 0.0;  // exact: a few bf16 values
              for (std::int64_t j = 0; j < hc; ++j) sum += copies[j * dim + d];
              into[d] = V41Bf16(static_cast<float>(sum / static_cast<double>(hc)));
            }
          }
        }
      }
      // Attention: collapsed with the previous sublayer's `pre`, folded back with this one's post and comb.
      const HyperConnectionWeights hw_attn = HcWeightsOf(layer.hc_attn, c.hc_mult, dim, c.hc_sinkhorn_iters, c.norm_eps, c.hc_eps);
      const HyperConnectionWeights hw_ffn = HcWeightsOf(layer.hc_ffn, c.hc_mult, dim, c.hc_sinkhorn_iters, c.norm_eps, c.hc_eps);
      SublayerIn(hw_attn, h, pre_in, layer.attn_norm, pre, post, comb, x);
      Attention(layer, x.data(), f.data());
      SublayerOut(f, h, post, comb, mixed);
      h.swap(mixed);
      std::vector<float> attn_pre = pre;
      SublayerIn(hw_ffn, h, attn_pre, layer.ffn_norm, pre, post, comb, x);
      Moe(layer, x.data(), f.data());
      SublayerOut(f, h, post, comb, mixed);
      h.swap(mixed);
      pre_in = pre;
    }

    // The head: the stream collapsed with the last FFN's pre, normed, an fp32 product.
    out.logits.clear();
    out.logit_rows.clear();
    out.routes.clear();
    out.hidden = std::move(hidden);
    std::vector<float> normed;
    for (std::size_t r = 0; r < n; ++r) {
      if (!rows[r].logits) continue;
      std::vector<float> collapsed(static_cast<std::size_t>(dim));
      HcPre(h.data() + r * static_cast<std::size_t>(hc * dim), c.hc_mult, dim, pre_in.data() + r * mixes, collapsed.data());
      normed.resize(normed.size() + static_cast<std::size_t>(dim));
      V41Norm(collapsed.data(), w.norm, dim, eps, normed.data() + normed.size() - static_cast<std::size_t>(dim));
      out.logit_rows.push_back(r);
    }
    out.logits.resize(out.logit_rows.size() * static_cast<std::size_t>(c.vocab_size));
    if (!out.logit_rows.empty())
      PlainMatMul(w.head, normed.data(), static_cast<std::int64_t>(out.logit_rows.size()), out.logits.data(), pool);
    for (const auto& [sequence, cache] : LastPositions()) cache_pool.Get(sequence).SetLength(cache);
  }

  std::map<SequenceId, int> LastPositions() const {
    std::map<SequenceId, int> end;
    for (const Row& r : rows) end[r.sequence] = r.position + 1;
    return end;
  }

  // Each row: its mixes from the stream `h`, and x = norm(bf16(Σ pre_in · copies)).
  void SublayerIn(const HyperConnectionWeights& hw, const std::vector<float>& h, const std::vector<float>& pre_in,
                  const std::vector<float>& norm, std::vector<float>& pre, std::vector<float>& post, std::vector<float>& comb,
                  std::vector<float>& x) {
    const std::int64_t dim = c.dim, hc = c.hc_mult;
    const auto n = static_cast<std::int64_t>(rows.size());
    ForShares(pool, n, 4, [&](std::int64_t begin, std::int64_t end) {
      std::vector<float> collapsed(static_cast<std::size_t>(dim));
      for (std::int64_t r = begin; r < end; ++r) {
        const float* stream = h.data() + r * hc * dim;
        HcMixes(hw, stream, pre.data() + r * hc, post.data() + r * hc, comb.data() + r * hc * hc);
        HcPre(stream, c.hc_mult, dim, pre_in.data() + r * hc, collapsed.data());
        V41Norm(collapsed.data(), norm, dim, eps, x.data() + r * dim);
      }
    });
  }

  void SublayerOut(const std::vector<float>& f, const std::vector<float>& h, const std::vector<float>& post, const std::vector<float>& comb,
                   std::vector<float>& out) {
    const std::int64_t dim = c.dim, hc = c.hc_mult;
    const auto n = static_cast<std::int64_t>(rows.size());
    ForShares(pool, n, 4, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) {
        HcPost(f.data() + r * dim, h.data() + r * hc * dim, c.hc_mult, dim, post.data() + r * hc, comb.data() + r * hc * hc,
               out.data() + r * hc * dim);
      }
    });
  }
};

V41Engine::V41Engine(const V41Checkpoint& ckpt, V41EngineOptions options, const Engine::ExpertExecutorFactory& experts)
    : state_(std::make_unique<State>(ckpt, options, experts)) {}
std::vector<RankStats> V41Engine::RankStatistics() const { return state_->experts->RankStatistics(); }
std::string V41Engine::LateRanks() const { return state_->experts->Late(); }
V41Engine::~V41Engine() = default;

const V41Config& V41Engine::config() const { return state_->c; }
const V41Weights& V41Engine::weights() const { return state_->w; }
KvCachePool& V41Engine::kv() { return state_->cache_pool; }
ThreadPool& V41Engine::pool() { return *state_->pool; }
int V41Engine::CacheWidth(const V41Config& config) { return CacheLayout(config).width; }
int V41Engine::vocab_size() const { return state_->c.vocab_size; }
int V41Engine::hidden_size() const { return state_->c.dim * static_cast<int>(state_->c.dspark_target_layer_ids.size()); }
bool V41Engine::keeps_hidden() const { return state_->keep_hidden; }

void V41Engine::WarmUp(int rows) {
  if (rows <= 0) return;
  // A sequence id no scheduler hands out.
  constexpr SequenceId kScratch = ~SequenceId{0};
  KvCachePool& pool = state_->cache_pool;
  pool.Open(kScratch, rows);
  std::vector<Row> batch;
  for (int i = 0; i < rows; ++i) batch.push_back({kScratch, i, 0, i + 1 == rows});
  ForwardOutput out;
  try {
    state_->Run(batch, out);
  } catch (...) {
    pool.Close(kScratch);
    throw;
  }
  pool.Close(kScratch);
}

void V41Engine::Forward(std::span<const Row> rows, ForwardOutput& out) { state_->Run(rows, out); }

}  // namespace tandem::rt
