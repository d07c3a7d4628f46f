#pragma once

// The CUDA kernels' launchers: plain pointers to device memory and a stream, so
// the host code that orders them (device_model, expert_slices, forward) is plain
// C++. Every reduction runs in a fixed order that depends on the shapes alone,
// so a row's result never depends on the batch around it. Internal to the backend.

#include <cstdint>

#include <cuda_runtime.h>

namespace tandem::rt::cuda {

enum class DType { kF32, kBF16 };

// A row-major [rows × cols] matrix in device memory (bf16 stored as raw bits).
struct MatrixView {
  DType type = DType::kBF16;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  const void* data = nullptr;

  std::int64_t element_size() const { return type == DType::kF32 ? 4 : 2; }
  bool empty() const { return data == nullptr; }
};

// y[b·y_stride + r] (+)= Σ_c W[r, c] · x[b·x_stride + c] for b < batch, r < W.rows.
// fp32 accumulation; a warp per 4 output rows (8 when batch > 1), lanes over 8-value
// chunks of the rows (WarpDots).
void Gemv(const MatrixView& w, const float* x, std::int64_t x_stride, std::int64_t batch, float* y, std::int64_t y_stride, bool accumulate,
          cudaStream_t stream);

// out[b] = row tokens[b] of `table` as fp32.
void Embed(const MatrixView& table, const std::int32_t* tokens, std::int64_t rows, float* out, cudaStream_t stream);

// out[b] = x[b] / sqrt(mean(x[b]²) + eps) · weight (the mean in double), for
// rows of width n at the given strides; out may alias x.
void RmsNorm(const float* x, std::int64_t x_stride, const float* weight, std::int64_t rows, std::int64_t n, float eps, float* out,
             std::int64_t out_stride, cudaStream_t stream);

// x[i] += y[i] for i < n.
void Add(float* x, const float* y, std::int64_t n, cudaStream_t stream);

// gate[i] = silu(gate[i]) · up[i] for i < n, as the CPU's SwiGlu (g / (1 + e^−g) · u).
void SwiGlu(float* gate, const float* up, std::int64_t n, cudaStream_t stream);

// Rotary embedding as RopeTable::Apply (interleaved pairs, angle = position ·
// inv_freq[i] in double, cos/sin × mscale): `count` vectors per row, each `dim`
// wide, the first at v + b·row_stride + offset, then every `vector_stride`.
void Rope(float* v, std::int64_t rows, std::int64_t row_stride, std::int64_t offset, std::int64_t count, std::int64_t vector_stride,
          std::int64_t dim, const std::int32_t* positions, const double* inv_freq, double mscale, cudaStream_t stream);

// The compressed caches of a batch's rows: caches[b] is the row's sequence's cache
// (layer-major: entry (layer, t) at ((layer · capacities[b]) + t) · width floats).
struct CacheRows {
  float* const* caches = nullptr;
  const std::int32_t* capacities = nullptr;
  const std::int32_t* positions = nullptr;  // the row's position: it attends to t ≤ position
  std::int64_t width = 0;
};

// Copies each row's compressed KV entry (`width` floats of kv_a[b]) into its
// sequence's cache at (layer, its position), and to staging[b] (the host's copy).
void StoreLatents(const float* kv_a, std::int64_t rows, const CacheRows& cache, int layer, float* staging, cudaStream_t stream);

// q_abs[i, c] = Σ_n key_up[h, n, c] · q[i·q_stride + n] for i = b·heads + h (n ascending).
// key_up: [heads × nope × latent] fp32 or bf16.
void AbsorbKeys(const MatrixView& key_up, std::int64_t heads, std::int64_t nope, std::int64_t latent, const float* q, std::int64_t q_stride,
                std::int64_t rows, float* q_abs, cudaStream_t stream);

// Per (row b, head h): s_t = (q_abs · c_t + q_rope · k_t) · scale for t ≤ the row's
// position, softmax over t, out = Σ_t p_t · c_t (t ascending), as an online softmax
// over chunks of the cache (no scratch). Entries are `latent` floats c_t then `rope`
// floats k_t; q_rope of (b, h) is at q + (b·heads + h)·q_stride + q_rope_offset.
// latent ≤ kMaxAttentionLatent.
constexpr std::int64_t kMaxAttentionLatent = 1024;
void LatentAttention(const float* q_abs, const float* q, std::int64_t q_stride, std::int64_t q_rope_offset, const CacheRows& cache,
                     int layer, std::int64_t rows, std::int64_t heads, std::int64_t latent, std::int64_t rope, float scale, float* out,
                     cudaStream_t stream);

// o[i·v_dim + v] = Σ_c value_up[h, v, c] · latent[i·kvl + c], i = b·heads + h.
void ApplyValues(const MatrixView& value_up, std::int64_t heads, std::int64_t v_dim, std::int64_t latent, const float* latents,
                 std::int64_t rows, float* o, cudaStream_t stream);

// The router's settings (see Router in runtime/engine/router.hpp).
struct RouterParams {
  int experts = 0;
  int top_k = 0;
  int groups = 1;
  int top_groups = 1;
  int scoring = 0;      // ScoringFunc as int
  int topk_method = 0;  // TopkMethod as int
  bool norm_topk_prob = false;
  bool scale = false;  // multiply by routed_scaling_factor
  double routed_scaling_factor = 1.0;
};
constexpr int kMaxRoutedExperts = 512;

// Routes every row (one thread each, the CPU router's arithmetic in double):
// experts/weights [rows × top_k]. `bias` may be null.
void Route(const float* logits, std::int64_t rows, const RouterParams& params, const float* bias, std::int32_t* experts, float* weights,
           cudaStream_t stream);

// Groups the routes to experts [expert_begin, expert_end) by expert: slot_route
// lists route indices (b·top_k + k) expert by expert, each expert's in ascending
// order; offsets[e − expert_begin] .. offsets[e − expert_begin + 1] are its slots;
// route_slot[route] is the route's slot or −1.
void GroupRoutes(const std::int32_t* experts, std::int64_t routes, int expert_begin, int expert_end, std::int32_t* slot_route,
                 std::int32_t* offsets, std::int32_t* route_slot, cudaStream_t stream);

// h[s, i] = silu(gate_e[i] · x[row(s)]) · (up_e[i] · x[row(s)]) for every slot s of
// every expert e, row(s) = slot_route[s] / top_k. gate/up: [experts × inter × hidden].
void ExpertGateUp(const MatrixView& gate, const MatrixView& up, std::int64_t experts, std::int64_t inter, std::int64_t hidden,
                  const float* x, const std::int32_t* slot_route, const std::int32_t* offsets, int top_k, float* h, cudaStream_t stream);

// y[s, o] = down_e[o] · h[s] for every slot s of expert e. down: [experts × hidden × inter].
void ExpertDown(const MatrixView& down, std::int64_t experts, std::int64_t hidden, std::int64_t inter, const float* h,
                const std::int32_t* offsets, float* y, cudaStream_t stream);

// out[b, o] = Σ_k weights[b, k] · y[route_slot[b·top_k + k], o] (k ascending, in
// double, slots of −1 skipped) + shared[b, o] (when not null). Written to out32 or
// out64 (one of them).
void CombineRoutes(const float* y, const std::int32_t* route_slot, const float* weights, std::int64_t rows, int top_k, std::int64_t hidden,
                   const float* shared, float* out32, double* out64, cudaStream_t stream);

// Bytes of temporary storage SortByLogit needs for `rows` rows of `vocab`.
std::size_t SortTemporaryBytes(std::int64_t rows, std::int64_t vocab);

// Per row: ids sorted by logit, descending, ties by ascending id (a stable radix
// sort; −0 counts as +0), with the sorted logits.
void SortByLogit(const float* logits, std::int64_t rows, std::int64_t vocab, float* keys_in, float* sorted_logits, std::int32_t* ids_in,
                 std::int32_t* sorted_ids, const std::int32_t* offsets, void* temp, std::size_t temp_bytes, cudaStream_t stream);

// One sampling request per row (see Sample in runtime/sampling/sampler.hpp).
struct SampleParams {
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  std::uint64_t seed = 0;
  std::int64_t position = 0;
};

// Greedy rows: tokens[b] = the largest logit's id, lowest id on ties.
void ArgMax(const float* logits, std::int64_t rows, std::int64_t vocab, const SampleParams* params, std::int32_t* tokens,
            cudaStream_t stream);

// Sampled rows (temperature > 0), from their sorted logits and ids: the CPU
// sampler's walk, with its sums in its order. `prob` holds rows·vocab doubles.
void SampleSorted(const float* sorted_logits, const std::int32_t* sorted_ids, std::int64_t rows, std::int64_t vocab,
                  const SampleParams* params, double* prob, std::int32_t* tokens, cudaStream_t stream);

}  // namespace tandem::rt::cuda
