#include "runtime/draft/draft_options.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "runtime/draft/mtp_drafter.hpp"
#include "runtime/draft/ngram_drafter.hpp"
#include "runtime/draft/quantized_experts.hpp"
#include "runtime/draft/replica_drafter.hpp"
#include "runtime/engine/local_experts.hpp"
#include "runtime/model/checkpoint.hpp"

namespace tandem::rt {

std::string ResolveDraftMode(const DraftOptions& options, const Checkpoint& ckpt) {
  if (options.mode != "auto") return options.mode;
  if (ckpt.synthetic()) return "replica";
  return ckpt.config().num_nextn_predict_layers > 0 ? "mtp" : "off";
}

std::unique_ptr<Drafter> MakeDrafter(const DraftOptions& options, const Checkpoint& ckpt, ThreadPool* pool) {
  const std::string mode = ResolveDraftMode(options, ckpt);
  if (mode == "off") return nullptr;
  if (mode == "ngram") return std::make_unique<NgramDrafter>(options.ngram_min, options.ngram_max);
  if (mode == "mtp") {
    // One block: its experts stay in their checkpoint precision, on this process.
    const ModelConfig& c = ckpt.config();
    const std::vector<LayerSlice> mtp_layer = {
        {c.num_hidden_layers, 0, c.n_routed_experts, 0, c.moe_intermediate_size, 0, c.moe_intermediate_size * c.n_shared_experts}};
    return std::make_unique<MtpDrafter>(
        ckpt, pool, [&ckpt, mtp_layer](ThreadPool& p) { return std::make_shared<LocalExpertExecutor>(ckpt, &p, false, mtp_layer); });
  }
  if (mode == "replica") {
    const QuantFormat format = options.replica_format;
    const int group = options.replica_group;
    return std::make_unique<ReplicaDrafter>(
        ckpt, pool, [&ckpt, format, group](ThreadPool& p) { return std::make_shared<QuantizedExpertExecutor>(ckpt, format, group, &p); },
        fmt::format("replica-{}", ToString(format)), format, group);
  }
  if (mode == "dspark") throw std::invalid_argument("--draft dspark: DSpark is DeepSeek V4.1's drafter; this checkpoint is not V4.1");
  throw std::invalid_argument(fmt::format("--draft {}: expected auto, replica, mtp, ngram or off", mode));
}

}  // namespace tandem::rt
