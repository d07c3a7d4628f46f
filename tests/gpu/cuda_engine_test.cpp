// GPU tests (CTest label "gpu"): need a CUDA build and a GPU. They compare the
// device engine, experts and sampler with the CPU's on the same inputs.

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/engine/cuda/cuda_experts.hpp"
#include "runtime/engine/cuda/cuda_forward.hpp"
#include "runtime/engine/cuda/device_router.hpp"
#include "runtime/engine/engine.hpp"
#include "runtime/engine/moe_slices.hpp"
#include "runtime/engine/router.hpp"
#include "runtime/kernels/cuda/cuda_device.hpp"
#include "runtime/kernels/cuda/device_memory.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/sampling/sampler.hpp"
#include "tests/runtime/engine_rows.hpp"
#include "tests/runtime/eval_run.hpp"
#include "tests/runtime/tiny_model.hpp"

namespace tandem::rt {
namespace {

using testing::MaxRelativeError;
using testing::Prefill;
using testing::RunEval;
using testing::SmallCheckpoint;
using testing::TinyCheckpoint;
using testing::Tokens;

// The acceptance bound for bf16 weights: the two engines read the same weights and
// differ only in the order of fp32 sums.
constexpr double kLogitTolerance = 1e-3;

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << CudaDeviceSummary();
  }
};

void ExpectSameRun(const std::filesystem::path& model, const std::vector<std::string>& cpu_flags, const std::vector<std::string>& gpu_flags,
                   double tolerance) {
  const auto cpu = RunEval(model, cpu_flags);
  const auto gpu = RunEval(model, gpu_flags);
  ASSERT_EQ(cpu.run.exit_code, 0) << cpu.run.err;
  ASSERT_EQ(gpu.run.exit_code, 0) << gpu.run.err;
  ASSERT_EQ(cpu.logits.size(), gpu.logits.size());
  const double error = MaxRelativeError(gpu, cpu);
  std::printf("max relative logit error %.3g over %zu positions\n", error, cpu.logits.size() / static_cast<std::size_t>(cpu.vocab));
  EXPECT_LE(error, tolerance);
  EXPECT_EQ(gpu.tokens, cpu.tokens) << "greedy outputs differ";
}

TEST_F(Gpu, SmallPresetLogitsAndGreedyTokensMatchTheCpuEngine) {
  ExpectSameRun(SmallCheckpoint(), {}, {"--device", "cuda"}, kLogitTolerance);
}

TEST_F(Gpu, TinyPresetLogitsAndGreedyTokensMatchTheCpuEngine) {
  // The tiny preset's widths are not multiples of 8: the kernels' scalar paths.
  ExpectSameRun(TinyCheckpoint(), {}, {"--device", "cuda"}, kLogitTolerance);
}

TEST_F(Gpu, HybridLayoutWithGpuCoordinatorAndGpuWorkersMatchesTheCpuLayout) {
  ExpectSameRun(SmallCheckpoint(), {"--spawn-workers", "4"}, {"--device", "cuda", "--spawn-workers", "4", "--spawned-device", "cuda"},
                kLogitTolerance);
}

TEST_F(Gpu, RowLogitsAreBitIdenticalAloneAndInABatch) {
  const Checkpoint ckpt = Checkpoint::Open(SmallCheckpoint());
  Engine engine(ckpt, EngineOptions{.threads = 1, .device = Device::kCuda});
  const int vocab = ckpt.config().vocab_size;
  const auto prompt = Tokens(12, 7, vocab);
  engine.kv().Open(1, 64);
  const std::vector<float> batched = Prefill(engine, 1, prompt);
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    engine.kv().Open(100 + i, 64);
    std::vector<TokenId> prefix(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    const std::vector<float> alone = Prefill(engine, 100 + i, prefix);
    const float* row = alone.data() + i * static_cast<std::size_t>(vocab);
    EXPECT_EQ(0, std::memcmp(row, batched.data() + i * static_cast<std::size_t>(vocab), static_cast<std::size_t>(vocab) * 4))
        << "position " << i;
  }
}

TEST_F(Gpu, RollbackForkReopenAndReplacedPrefixesKeepTheDeviceCacheInStepWithTheHost) {
  const Checkpoint ckpt = Checkpoint::Open(SmallCheckpoint());
  Engine gpu(ckpt, EngineOptions{.threads = 1, .device = Device::kCuda});
  Engine cpu(ckpt, EngineOptions{.threads = 1});
  const int vocab = ckpt.config().vocab_size;
  const auto a = Tokens(10, 3, vocab), b = Tokens(6, 4, vocab), c = Tokens(9, 5, vocab);
  for (Engine* e : {&gpu, &cpu}) {
    e->kv().Open(1, 64);
    Prefill(*e, 1, a);
    e->kv().Get(1).Truncate(4);  // speculative rollback: positions 4.. are recomputed
    e->kv().Fork(1, 2, 4, 32);   // a fork written on the host only (another capacity)
    e->kv().Open(4, 64);
    Prefill(*e, 4, c);                                 // the device mirror of 4 now holds c's 9 positions ...
    e->kv().Get(4).CopyPrefixFrom(e->kv().Get(2), 4);  // ... which the host replaces (prefix reuse)
    e->kv().Close(1);
    e->kv().Open(1, 64);  // same id, same capacity, a new cache
  }
  for (const SequenceId seq : {1, 2, 4}) {
    const auto want = Prefill(cpu, seq, b), got = Prefill(gpu, seq, b);
    EXPECT_LE(MaxRelativeError(got, want, vocab), kLogitTolerance) << "sequence " << seq;
  }
}

TEST_F(Gpu, GraphReplayGivesTheSameLogitsAsLaunchingEachKernel) {
  const Checkpoint ckpt = Checkpoint::Open(SmallCheckpoint());
  setenv("TANDEM_CUDA_GRAPHS", "0", 1);
  Engine direct(ckpt, EngineOptions{.threads = 1, .device = Device::kCuda});
  unsetenv("TANDEM_CUDA_GRAPHS");
  Engine graphs(ckpt, EngineOptions{.threads = 1, .device = Device::kCuda});
  const int vocab = ckpt.config().vocab_size;
  const auto prompt = Tokens(9, 21, vocab);
  std::vector<float> a, b;
  for (Engine* e : {&direct, &graphs}) {
    e->kv().Open(1, 128);
    (e == &direct ? a : b) = Prefill(*e, 1, prompt);
  }
  ASSERT_EQ(a, b);
  for (int step = 0; step < 40; ++step) {
    const TokenId next =
        ArgMax(std::span<const float>(a.data() + a.size() - static_cast<std::size_t>(vocab), static_cast<std::size_t>(vocab)));
    a = Prefill(direct, 1, {next});
    b = Prefill(graphs, 1, {next});
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << "step " << step;
  }
  EXPECT_EQ(direct.cuda()->graph_launches(), 0u);
  EXPECT_GE(graphs.cuda()->graph_launches(), 38u);  // every step once the shape has been seen twice
  std::printf("graph launches: %llu of 41 passes\n", static_cast<unsigned long long>(graphs.cuda()->graph_launches()));
}

TEST_F(Gpu, DeviceExpertSlicesMatchTheCpuSlices) {
  const Checkpoint ckpt = Checkpoint::Open(SmallCheckpoint());
  const ModelConfig& c = ckpt.config();
  const int layer = c.first_k_dense_replace;
  const int shared = c.moe_intermediate_size * c.n_shared_experts;
  // A tensor-parallel half of some experts and of the shared experts, as a worker holds.
  const std::vector<LayerSlice> slices = {{layer, 2, c.n_routed_experts - 1, 0, c.moe_intermediate_size / 2, shared / 2, shared}};
  MoeSlices host(ckpt, slices, nullptr, true, /*fuse_gate_up=*/false);
  const auto device = CudaMoeSlices::Upload(host);
  const int rows = 5, k = c.num_experts_per_tok;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(rows * c.hidden_size));
  for (float& v : x) v = normal(rng);
  std::vector<ExpertRoute> routes;
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < k; ++j) routes.push_back({(r * 3 + j * 5) % c.n_routed_experts, 0.1f + 0.05f * static_cast<float>(j)});
  }
  std::vector<double> want(x.size()), got(x.size());
  host.Compute(layer, x.data(), rows, routes, k, want.data());
  device->Compute(layer, x.data(), rows, routes, k, got.data());
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::fabs(want[i] - got[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  std::printf("device expert slices: max |Δ| %.3g of max |y| %.3g\n", diff, scale);
  EXPECT_GT(scale, 0.0);
  EXPECT_LE(diff, 1e-4 * scale);
}

TEST_F(Gpu, SampledChoicesEqualTheCpuSamplersForTheSameLogits) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  int compared = 0;
  for (const std::int64_t vocab : {1, 7, 1000, 32000, 129280}) {
    std::vector<SamplingParams> params;
    std::vector<std::int64_t> positions;
    for (int i = 0; i < 24; ++i) {
      SamplingParams p;
      p.temperature = i % 6 == 0 ? 0.0f : 0.3f + 0.25f * static_cast<float>(i % 5);
      p.top_k = i % 3 == 0 ? 0 : 1 + (i * 37) % 200;
      p.top_p = i % 4 == 0 ? 1.0f : 0.5f + 0.1f * static_cast<float>(i % 5);
      p.min_p = i % 5 == 0 ? 0.05f : 0.0f;
      p.seed = 1000 + static_cast<std::uint64_t>(i);
      params.push_back(p);
      positions.push_back(i * 13);
    }
    std::vector<float> logits(params.size() * static_cast<std::size_t>(vocab));
    for (std::size_t i = 0; i < logits.size(); ++i) {
      // Coarse values make ties; some −0 and +0 among them. Every seventh row is
      // masked as a grammar masks it (−∞ but for one token in fifty): survivors
      // of probability 0 meet the exponential race.
      const float v = std::round(normal(rng) * 4.0f) / 4.0f;
      const auto row = static_cast<std::int64_t>(i) / vocab, column = static_cast<std::int64_t>(i) % vocab;
      logits[i] = row % 7 == 3 && column % 50 != 0 ? -std::numeric_limits<float>::infinity() : i % 97 == 0 ? -0.0f : v;
    }
    const std::vector<TokenId> device = CudaSample(logits, vocab, params, positions);
    ASSERT_EQ(device.size(), params.size());
    for (std::size_t r = 0; r < params.size(); ++r) {
      const std::span<const float> row(logits.data() + r * static_cast<std::size_t>(vocab), static_cast<std::size_t>(vocab));
      EXPECT_EQ(device[r], Sample(row, params[r], positions[r])) << "vocab " << vocab << " row " << r;
      ++compared;
    }
  }
  std::printf("%d sampled choices compared\n", compared);
}

TEST_F(Gpu, DeviceRouterChoosesWhatTheCpuRouterChooses) {
  // Every scoring function and top-k method, with and without normalisation, on
  // logits with ties (multiples of 1/4) and a correction bias.
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  int compared = 0;
  for (const auto architecture : {Architecture::kDeepseekV2, Architecture::kDeepseekV3}) {
    for (const auto scoring : {ScoringFunc::kSoftmax, ScoringFunc::kSigmoid, ScoringFunc::kSqrtSoftplus}) {
      for (const auto method : {TopkMethod::kGreedy, TopkMethod::kGroupLimitedGreedy, TopkMethod::kNoauxTc}) {
        for (const bool norm : {false, true}) {
          ModelConfig c;
          c.architecture = architecture;
          c.n_routed_experts = 64;
          c.num_experts_per_tok = 6;
          c.n_group = 8;
          c.topk_group = 3;
          c.scoring_func = scoring;
          c.topk_method = method;
          c.norm_topk_prob = norm;
          c.routed_scaling_factor = 2.5;
          std::vector<float> bias(64);
          for (float& v : bias) v = std::round(normal(rng) * 8.0f) / 64.0f;
          const Router router(c, bias);
          const int rows = 50;
          // Half the rows on a grid of 1/4 (ties), half continuous.
          std::vector<float> logits(static_cast<std::size_t>(rows * 64));
          for (std::size_t i = 0; i < logits.size(); ++i) {
            const float v = normal(rng);
            logits[i] = (i / 64) % 2 == 0 ? std::round(v * 4.0f) / 4.0f : v;
          }
          cuda::DeviceBuffer<float> d_logits(logits.size()), d_bias(bias.size()), d_weights(rows * 6);
          cuda::DeviceBuffer<std::int32_t> d_experts(rows * 6);
          cuda::Check(cudaMemcpy(d_logits.get(), logits.data(), logits.size() * 4, cudaMemcpyHostToDevice), "copy");
          cuda::Check(cudaMemcpy(d_bias.get(), bias.data(), bias.size() * 4, cudaMemcpyHostToDevice), "copy");
          cuda::Route(d_logits.get(), rows, cuda::RouterParamsOf(c), d_bias.get(), d_experts.get(), d_weights.get(), nullptr);
          std::vector<std::int32_t> experts(rows * 6);
          std::vector<float> weights(rows * 6);
          cuda::Check(cudaMemcpy(experts.data(), d_experts.get(), experts.size() * 4, cudaMemcpyDeviceToHost), "copy");
          cuda::Check(cudaMemcpy(weights.data(), d_weights.get(), weights.size() * 4, cudaMemcpyDeviceToHost), "copy");
          for (int r = 0; r < rows; ++r) {
            std::vector<ExpertRoute> want(6);
            router.Route(std::span<const float>(logits.data() + r * 64, 64), want);
            for (int k = 0; k < 6; ++k) {
              EXPECT_EQ(experts[static_cast<std::size_t>(r * 6 + k)], want[static_cast<std::size_t>(k)].expert)
                  << "scoring " << static_cast<int>(scoring) << " method " << static_cast<int>(method) << " row " << r;
              EXPECT_NEAR(weights[static_cast<std::size_t>(r * 6 + k)], want[static_cast<std::size_t>(k)].weight,
                          1e-6f * std::fabs(want[static_cast<std::size_t>(k)].weight));
            }
            ++compared;
          }
        }
      }
    }
  }
  std::printf("%d rows routed on both\n", compared);
}

TEST(GpuBuild, TheDeviceIsOneThisBuildCanRun) {
  ASSERT_TRUE(CudaBuilt());
  if (CudaDeviceCount() == 0) GTEST_SKIP() << CudaDeviceSummary();
  const std::string summary = CudaDeviceSummary();
  std::printf("%s\n", summary.c_str());
  EXPECT_NE(summary.find("compute "), std::string::npos) << summary;
  EXPECT_NO_THROW(RequireCudaDevice());  // compute capability 9.0 or newer
}

}  // namespace
}  // namespace tandem::rt
