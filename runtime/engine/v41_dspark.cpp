#include "runtime/engine/v41_dspark.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "runtime/engine/hyper_connections.hpp"
#include "runtime/engine/router.hpp"
#include "runtime/engine/sink_attention.hpp"
#include "runtime/engine/v41_engine.hpp"
#include "runtime/engine/v41_moe_slices.hpp"
#include "runtime/engine/v41_ops.hpp"
#include "runtime/engine/v41_rope.hpp"
#include "runtime/engine/v41_weights.hpp"
#include "runtime/kernels/matmul.hpp"
#include "runtime/kernels/microscaled_matrix.hpp"
#include "runtime/model/v41_config.hpp"
#include "runtime/numeric/microscaling.hpp"

namespace tandem::rt {

struct V41DSpark::State {
  const V41Config& c;
  const V41Weights& w;
  ThreadPool* pool;
  ModelConfig moe_config;
  std::vector<Router> routers;               // per stage
  std::vector<V41Rope> ropes;                // per stage (window-only: θ rope_theta, no YaRN)
  KvCachePool cache;                         // per position: each stage's KV row of the target's state
  std::map<SequenceId, std::int64_t> first;  // the first position observed
  float eps;

  State(const V41Engine& target, ThreadPool* p)
      : c(target.config()),
        w(target.weights()),
        pool(p),
        moe_config(V41MoeConfig(c, /*dspark=*/true)),
        cache(1, static_cast<int>(c.n_mtp_layers) * c.head_dim),
        eps(static_cast<float>(c.norm_eps)) {
    if (w.draft_stages.empty() || c.dspark_block_size <= 0) throw std::invalid_argument("this checkpoint has no DSpark stages (mtp.*)");
    if (!target.keeps_hidden()) throw std::invalid_argument("DSpark reads the target's DSpark inputs: V41EngineOptions::keep_hidden");
    for (std::size_t s = 0; s < w.draft_stages.size(); ++s) {
      routers.emplace_back(moe_config, w.draft_stages[s].block.moe.bias);
      ropes.push_back(V41Rope::ForLayer(c, c.n_layers + static_cast<int>(s)));
    }
  }

  const V41DraftStage& Stage(std::size_t s) const { return w.draft_stages[s]; }

  // The projected target state of `rows` rows (stage 0's main_proj and main_norm).
  std::vector<float> MainX(const float* hidden, std::int64_t rows) const {
    const std::int64_t dim = c.dim;
    std::vector<float> projected(static_cast<std::size_t>(rows * dim)), out(projected.size());
    MatMul(Stage(0).main_proj, hidden, rows, projected.data(), pool);
    for (std::int64_t r = 0; r < rows; ++r) V41Norm(projected.data() + r * dim, Stage(0).main_norm, dim, eps, out.data() + r * dim);
    return out;
  }

  // A stage's KV rows of `rows` vectors at `positions`: fp8(rope(kv_norm(wkv · x))).
  void StageKv(std::size_t s, const float* x, std::int64_t rows, const std::int64_t* positions, float* out) const {
    const std::int64_t hd = c.head_dim;
    const V41Attention& a = Stage(s).block.attention;
    std::vector<float> kv(static_cast<std::size_t>(rows * hd));
    MatMul(a.wkv, x, rows, kv.data(), pool);
    for (std::int64_t r = 0; r < rows; ++r) {
      float* row = out + r * hd;
      V41Norm(kv.data() + r * hd, a.kv_norm, hd, eps, row);
      ropes[s].Apply(row, 1, hd, positions[r]);
      RoundTripFp8(row, static_cast<std::size_t>(hd));
    }
  }

  void Observe(std::span<const Row> rows, const float* hidden) {
    if (rows.empty()) return;
    std::map<SequenceId, int> next;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      if (!cache.Contains(r.sequence)) throw std::invalid_argument(fmt::format("DSpark: sequence {} has no cache open", r.sequence));
      const int length = cache.Get(r.sequence).length();
      auto [it, fresh] = next.try_emplace(r.sequence, length == 0 && !first.contains(r.sequence) ? r.position : length);
      if (fresh && length == 0) first[r.sequence] = r.position;
      if (r.position != it->second) {
        throw std::invalid_argument(
            fmt::format("DSpark: sequence {} position {} but the next position is {}", r.sequence, r.position, it->second));
      }
      ++it->second;
    }
    for (const auto& [sequence, end] : next) cache.Get(sequence).Reserve(end);
    const auto n = static_cast<std::int64_t>(rows.size());
    const std::vector<float> main_x = MainX(hidden, n);
    std::vector<std::int64_t> positions(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) positions[i] = rows[i].position;
    std::vector<float> kv(static_cast<std::size_t>(n * c.head_dim));
    for (std::size_t s = 0; s < w.draft_stages.size(); ++s) {
      StageKv(s, main_x.data(), n, positions.data(), kv.data());
      for (std::size_t i = 0; i < rows.size(); ++i) {
        std::copy_n(kv.data() + i * static_cast<std::size_t>(c.head_dim), c.head_dim,
                    cache.Get(rows[i].sequence).At(0, rows[i].position) + s * static_cast<std::size_t>(c.head_dim));
      }
    }
    for (const auto& [sequence, end] : next) cache.Get(sequence).SetLength(end);
  }

  // A stage's attention over its ring (slot order, as the reference lists it) and the block.
  void Attention(std::size_t s, const KvCache& seq, std::int64_t position, const float* x, std::int64_t block, float* out) const {
    const std::int64_t hd = c.head_dim, heads = c.n_heads, W = c.window_size;
    const V41Attention& a = Stage(s).block.attention;
    std::vector<float> qr(static_cast<std::size_t>(block * c.q_lora_rank)), q(static_cast<std::size_t>(block * heads * hd));
    MatMul(a.wq_a, x, block, qr.data(), pool);
    for (std::int64_t r = 0; r < block; ++r)
      V41Norm(qr.data() + r * c.q_lora_rank, a.q_norm, c.q_lora_rank, eps, qr.data() + r * c.q_lora_rank);
    MatMul(a.wq_b, qr.data(), block, q.data(), pool);
    std::vector<std::int64_t> positions(static_cast<std::size_t>(block));
    std::iota(positions.begin(), positions.end(), position + 1);
    for (std::int64_t r = 0; r < block; ++r) ropes[s].Apply(q.data() + r * heads * hd, heads, hd, positions[static_cast<std::size_t>(r)]);
    const std::int64_t ring = std::min(W, position + 1), from = first_position;
    std::vector<float> kv(static_cast<std::size_t>((ring + block) * hd));
    std::vector<std::int32_t> indices;
    for (std::int64_t slot = 0; slot < ring; ++slot) {
      const std::int64_t p = position - ((position - slot) % W + W) % W;  // the latest position in this slot
      if (p < from) continue;                                             // not observed (a reused prefix)
      std::copy_n(seq.At(0, static_cast<int>(p)) + s * static_cast<std::size_t>(hd), hd, kv.data() + indices.size() * hd);
      indices.push_back(static_cast<std::int32_t>(indices.size()));
    }
    const auto ring_rows = static_cast<std::int64_t>(indices.size());
    StageKv(s, x, block, positions.data(), kv.data() + ring_rows * hd);
    for (std::int64_t j = 0; j < block; ++j) indices.push_back(static_cast<std::int32_t>(ring_rows + j));
    std::vector<float> o(static_cast<std::size_t>(block * heads * hd));
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
    for (std::int64_t r = 0; r < block; ++r) {
      for (std::int64_t h = 0; h < heads; ++h) {
        SinkAttention(q.data() + (r * heads + h) * hd, kv.data(), indices, hd, scale, a.sink[static_cast<std::size_t>(h)],
                      o.data() + (r * heads + h) * hd);
      }
      ropes[s].Apply(o.data() + r * heads * hd, heads, hd, positions[static_cast<std::size_t>(r)], /*inverse=*/true);
    }
    V41GroupedOutput(a, o.data(), block, heads, hd, c.o_groups, c.o_lora_rank, out, pool);
  }

  // A stage's MoE, every expert here: the bf16 outputs summed in double, rounded once.
  void Moe(std::size_t s, const float* x, std::int64_t rows, float* out) const {
    const std::int64_t dim = c.dim;
    const V41Moe& m = Stage(s).block.moe;
    const int experts = moe_config.n_routed_experts, k = moe_config.num_experts_per_tok;
    std::vector<float> logits(static_cast<std::size_t>(rows * experts));
    PlainMatMul(m.gate, x, rows, logits.data(), pool);
    std::vector<ExpertRoute> routes(static_cast<std::size_t>(rows * k));
    for (std::int64_t r = 0; r < rows; ++r) {
      routers[s].Route({logits.data() + r * experts, static_cast<std::size_t>(experts)},
                       {routes.data() + r * k, static_cast<std::size_t>(k)});
    }
    const auto limit = static_cast<float>(c.swiglu_limit);
    std::vector<double> sum(static_cast<std::size_t>(rows * dim), 0.0);
    std::vector<float> y(static_cast<std::size_t>(rows * dim));
    for (std::int64_t r = 0; r < rows; ++r) {
      for (int i = 0; i < k; ++i) {
        const ExpertRoute& route = routes[static_cast<std::size_t>(r * k + i)];
        V41ExpertForward(m.experts[static_cast<std::size_t>(route.expert)], x + r * dim, &route.weight, 1, limit, y.data(), pool);
        for (std::int64_t d = 0; d < dim; ++d) sum[static_cast<std::size_t>(r * dim + d)] += y[static_cast<std::size_t>(d)];
      }
    }
    V41ExpertForward(m.shared, x, nullptr, rows, limit, y.data(), pool);
    for (std::size_t i = 0; i < sum.size(); ++i) out[i] = V41Bf16(static_cast<float>(sum[i] + y[i]));
  }

  std::int64_t first_position = 0;  // of the sequence being drafted for

  DSparkDraft Draft(SequenceId sequence, std::int64_t position, TokenId next, const Choice& choose) {
    const KvCache& seq = cache.Get(sequence);
    first_position = first.contains(sequence) ? first.at(sequence) : 0;
    if (position < first_position || position + 1 != seq.length()) {
      throw std::invalid_argument(
          fmt::format("DSpark: sequence {} has observed {} positions; a draft follows the last one (position {} asked)", sequence,
                      seq.length(), position));
    }
    if (next < 0 || next >= c.vocab_size) throw std::invalid_argument(fmt::format("DSpark: token {} is outside the vocabulary", next));
    const std::int64_t B = c.dspark_block_size, dim = c.dim, hc = c.hc_mult;
    const auto mixes = static_cast<std::size_t>(hc);
    std::vector<float> h(static_cast<std::size_t>(B * hc * dim));
    for (std::int64_t j = 0; j < B; ++j) {
      CopyRow(w.embed, j == 0 ? next : c.dspark_noise_token_id, h.data() + j * hc * dim);
      for (std::int64_t k = 1; k < hc; ++k) std::copy_n(h.data() + j * hc * dim, dim, h.data() + (j * hc + k) * dim);
    }
    std::vector<float> pre_in(static_cast<std::size_t>(B) * mixes, 0.0f), pre(pre_in.size()), post(pre_in.size()),
        comb(pre_in.size() * mixes), x(static_cast<std::size_t>(B * dim)), f(x.size()), mixed(h.size()),
        collapsed(static_cast<std::size_t>(dim));
    for (std::int64_t j = 0; j < B; ++j) pre_in[static_cast<std::size_t>(j) * mixes] = 1.0f;
    const auto sublayer_in = [&](const HyperConnectionWeights& hw, const std::vector<float>& collapse_with,
                                 const std::vector<float>& norm) {
      for (std::int64_t j = 0; j < B; ++j) {
        const float* stream = h.data() + j * hc * dim;
        HcMixes(hw, stream, pre.data() + j * hc, post.data() + j * hc, comb.data() + j * hc * hc);
        HcPre(stream, c.hc_mult, dim, collapse_with.data() + j * hc, collapsed.data());
        V41Norm(collapsed.data(), norm, dim, eps, x.data() + j * dim);
      }
    };
    const auto sublayer_out = [&] {
      for (std::int64_t j = 0; j < B; ++j) {
        HcPost(f.data() + j * dim, h.data() + j * hc * dim, c.hc_mult, dim, post.data() + j * hc, comb.data() + j * hc * hc,
               mixed.data() + j * hc * dim);
      }
      h.swap(mixed);
    };
    for (std::size_t s = 0; s < w.draft_stages.size(); ++s) {
      const V41Layer& layer = Stage(s).block;
      sublayer_in(HcWeightsOf(layer.hc_attn, c.hc_mult, dim, c.hc_sinkhorn_iters, c.norm_eps, c.hc_eps), pre_in, layer.attn_norm);
      Attention(s, seq, position, x.data(), B, f.data());
      sublayer_out();
      const std::vector<float> attn_pre = pre;
      sublayer_in(HcWeightsOf(layer.hc_ffn, c.hc_mult, dim, c.hc_sinkhorn_iters, c.norm_eps, c.hc_eps), attn_pre, layer.ffn_norm);
      Moe(s, x.data(), B, f.data());
      sublayer_out();
      pre_in = pre;
    }
    // The head: the stream collapsed, normed, the shared head in fp32; then token by token
    // the Markov bias of the token before and the greedy choice.
    const V41DraftStage& last = Stage(w.draft_stages.size() - 1);
    const std::int64_t vocab = c.vocab_size, rank = c.dspark_markov_rank;
    std::vector<float> xs(static_cast<std::size_t>(B * dim)), normed(xs.size());
    for (std::int64_t j = 0; j < B; ++j) {
      HcPre(h.data() + j * hc * dim, c.hc_mult, dim, pre_in.data() + j * hc, xs.data() + j * dim);
      V41Norm(xs.data() + j * dim, last.norm, dim, eps, normed.data() + j * dim);
    }
    DSparkDraft d;
    d.logits.resize(static_cast<std::size_t>(B * vocab));
    PlainMatMul(w.head, normed.data(), B, d.logits.data(), pool);
    std::vector<float> markov(static_cast<std::size_t>(rank)), bias(static_cast<std::size_t>(vocab)),
        joined(static_cast<std::size_t>(dim + rank));
    TokenId previous = next;
    for (std::int64_t j = 0; j < B; ++j) {
      CopyRow(last.markov_embed, previous, markov.data());
      PlainMatMul(last.markov_head, markov.data(), 1, bias.data(), pool);
      float* row = d.logits.data() + j * vocab;
      for (std::int64_t v = 0; v < vocab; ++v) row[v] += bias[static_cast<std::size_t>(v)];
      std::copy_n(xs.data() + j * dim, dim, joined.data());
      std::copy(markov.begin(), markov.end(), joined.begin() + dim);
      float confidence = 0.0f;
      PlainMatMul(last.confidence, joined.data(), 1, &confidence, nullptr);
      d.confidence.push_back(confidence);
      const std::optional<TokenId> chosen = choose ? choose(static_cast<int>(j), {row, static_cast<std::size_t>(vocab)}, confidence)
                                                   : std::optional<TokenId>(static_cast<TokenId>(std::max_element(row, row + vocab) - row));
      if (!chosen) break;
      previous = *chosen;
      d.tokens.push_back(previous);
    }
    d.logits.resize(d.confidence.size() * static_cast<std::size_t>(vocab));
    return d;
  }
};

V41DSpark::V41DSpark(const V41Engine& target, ThreadPool* pool) : state_(std::make_unique<State>(target, pool)) {}
V41DSpark::~V41DSpark() = default;
int V41DSpark::block_size() const { return state_->c.dspark_block_size; }
KvCachePool& V41DSpark::kv() { return state_->cache; }
void V41DSpark::Observe(std::span<const Row> rows, const float* hidden) { state_->Observe(rows, hidden); }
DSparkDraft V41DSpark::Draft(SequenceId sequence, std::int64_t position, TokenId next, const Choice& choose) {
  return state_->Draft(sequence, position, next, choose);
}
void V41DSpark::Close(SequenceId sequence) {
  if (state_->cache.Contains(sequence)) state_->cache.Close(sequence);
  state_->first.erase(sequence);
}

}  // namespace tandem::rt
