// The row-wise kernels a decode step runs besides the matrix products, at the
// small preset's sizes (DeepSeek-V3's in brackets where they differ): bytes read
// and written per second, and FLOP/s (counting a multiply-add as 2 and exp/rsqrt as 1).
#include <algorithm>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "runtime/engine/rope.hpp"
#include "runtime/engine/router.hpp"
#include "runtime/kernels/latent_attention.hpp"
#include "runtime/kernels/ops.hpp"
#include "runtime/model/synthetic_checkpoint.hpp"
#include "runtime/sampling/sampler.hpp"

namespace tandem::rt {
namespace {

std::vector<float> Random(std::int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

void Count(benchmark::State& state, double bytes, double flops) {
  state.SetBytesProcessed(static_cast<std::int64_t>(static_cast<double>(state.iterations()) * bytes));
  state.counters["FLOP/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * flops, benchmark::Counter::kIsRate);
}

// Arg: width (512 small hidden, 7168 V3 hidden).
void BM_RmsNorm(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  std::vector<float> x = Random(n, 1), w = Random(n, 2), out(static_cast<std::size_t>(n));
  for (auto _ : state) {
    RmsNorm(x.data(), w.data(), 1, n, 1e-6f, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  Count(state, 3.0 * 4 * static_cast<double>(n), 4.0 * static_cast<double>(n));
}
BENCHMARK(BM_RmsNorm)->Arg(512)->Arg(7168);

// Arg: width (128 small expert, 2048 V3 expert).
void BM_SwiGlu(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  std::vector<float> gate = Random(n, 3), up = Random(n, 4);
  for (auto _ : state) {
    std::vector<float> g = gate;  // SwiGlu works in place
    SwiGlu(g.data(), up.data(), n);
    benchmark::DoNotOptimize(g.data());
  }
  Count(state, 3.0 * 4 * static_cast<double>(n), 5.0 * static_cast<double>(n));
}
BENCHMARK(BM_SwiGlu)->Arg(128)->Arg(2048);

// Arg: length (attention scores over a context; the LM head's vocabulary).
void BM_Softmax(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const std::vector<float> x = Random(n, 5);
  std::vector<float> y = x;
  for (auto _ : state) {
    y = x;
    Softmax(y.data(), n);
    benchmark::DoNotOptimize(y.data());
  }
  Count(state, 2.0 * 4 * static_cast<double>(n), 4.0 * static_cast<double>(n));
}
BENCHMARK(BM_Softmax)->Arg(96)->Arg(4096)->Arg(16276);

// Greedy sampling of one row of logits (the small preset's vocabulary, and
// DeepSeek-V3's): once per decoded token of every request, on the scheduler's thread.
void BM_ArgMax(benchmark::State& state) {
  const std::vector<float> logits = Random(state.range(0), 12);
  for (auto _ : state) benchmark::DoNotOptimize(ArgMax(logits));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ArgMax)->Arg(16276)->Arg(129280);
// One sampled token (temperature 1) from a row of logits, the sampling parameters an
// API client sends by default (Arg 0: top-k, top-p and min-p off) or top-k 40 (Arg 1)
// or top-p 0.95 (Arg 2: on these nearly flat logits the prefix is most of the
// vocabulary; Arg 3: on logits 8× as spread, as a trained model's are, a few hundred
// tokens). Vocabulary: the small preset's.
void BM_Sample(benchmark::State& state) {
  std::vector<float> logits = Random(16276, 13);
  if (state.range(0) == 3) {
    for (float& v : logits) v *= 8.0f;
  }
  SamplingParams params;
  params.temperature = 1.0f;
  if (state.range(0) == 1) params.top_k = 40;
  if (state.range(0) >= 2) params.top_p = 0.95f;
  std::int64_t position = 0;
  for (auto _ : state) benchmark::DoNotOptimize(Sample(logits, params, position++));
}
BENCHMARK(BM_Sample)->Arg(0)->Arg(1)->Arg(2)->Arg(3)->ArgName("cut");

// What ArgMax was: std::max_element, the baseline it is measured against.
void BM_ArgMaxByMaxElement(benchmark::State& state) {
  const std::vector<float> logits = Random(state.range(0), 12);
  for (auto _ : state) benchmark::DoNotOptimize(std::max_element(logits.begin(), logits.end()));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ArgMaxByMaxElement)->Arg(16276)->Arg(129280);

// The rope part of every head's query and of the cached key at one position.
void BM_Rope(benchmark::State& state) {
  const ModelConfig config = FindPreset("small").config;
  const RopeTable rope(config);
  const std::int64_t rows = config.num_attention_heads + 1, dim = config.qk_rope_head_dim;
  std::vector<float> v = Random(rows * dim, 6);
  std::int64_t position = 0;
  for (auto _ : state) {
    rope.Apply(v.data(), rows, position++ % 4096);
    benchmark::DoNotOptimize(v.data());
  }
  Count(state, 2.0 * 4 * static_cast<double>(rows * dim), 3.0 * static_cast<double>(rows * dim));
}
BENCHMARK(BM_Rope);

// One token's routing over the small preset's 64 experts (sigmoid scores, bias
// correction, 8 groups of which 4 are kept, top 6).
void BM_Route(benchmark::State& state) {
  const ModelConfig config = FindPreset("small").config;
  const std::vector<float> bias = Random(config.n_routed_experts, 9);
  std::vector<float> correction(bias.size());
  for (std::size_t e = 0; e < bias.size(); ++e) correction[e] = 0.01f * bias[e];
  const Router router(config, correction);
  const std::vector<float> logits = Random(config.n_routed_experts, 10);
  std::vector<ExpertRoute> routes(static_cast<std::size_t>(config.num_experts_per_tok));
  for (auto _ : state) {
    router.Route(logits, routes);
    benchmark::DoNotOptimize(routes.data());
  }
}
BENCHMARK(BM_Route);

// Query heads over a compressed MLA cache of `len` positions (small preset: latent
// 128, rope 32, 8 heads), one at a time (LatentAttention, as before the heads were
// batched) or all together (LatentAttentionHeads). Args: len, heads, together.
void BM_LatentAttention(benchmark::State& state) {
  const std::int64_t len = state.range(0), heads = state.range(1), latent = 128, rope = 32, stride = latent + rope;
  const bool together = state.range(2) != 0;
  const std::vector<float> cache = Random(len * stride, 7), q = Random(heads * stride, 8);
  std::vector<float> scores(static_cast<std::size_t>(heads * len)), out(static_cast<std::size_t>(heads * latent));
  for (auto _ : state) {
    if (together) {
      LatentAttentionHeads(q.data(), stride, q.data() + latent, stride, heads, cache.data(), stride, len, latent, rope, 0.1f, scores.data(),
                           out.data());
    } else {
      for (std::int64_t h = 0; h < heads; ++h) {
        const float* qh = q.data() + h * stride;
        LatentAttention(qh, qh + latent, cache.data(), stride, len, latent, rope, 0.1f, scores.data(), out.data() + h * latent);
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  // Per head the cache is used twice (scores, then the weighted sum of latents).
  const double uses = static_cast<double>(heads) * static_cast<double>(len) * static_cast<double>(stride + latent);
  Count(state, 4.0 * uses, 2.0 * uses);
}
BENCHMARK(BM_LatentAttention)->ArgsProduct({{96, 1024, 8192}, {1, 8}, {0, 1}})->ArgNames({"len", "heads", "together"});

}  // namespace
}  // namespace tandem::rt
