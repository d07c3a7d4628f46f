#include "runtime/draft/draft_options.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "runtime/draft/ngram_drafter.hpp"
#include "runtime/draft/quantized_experts.hpp"
#include "runtime/draft/replica_drafter.hpp"
#include "runtime/model/checkpoint.hpp"

namespace tandem::rt {

std::string ResolveDraftMode(const DraftOptions& options, const Checkpoint& ckpt) {
  if (options.mode != "auto") return options.mode;
  // A trained checkpoint's MTP layer is the natural drafter; until it is wired in,
  // only synthetic checkpoints (whose quantized replica agrees with them) draft.
  return ckpt.synthetic() ? "replica" : "off";
}

std::unique_ptr<Drafter> MakeDrafter(const DraftOptions& options, const Checkpoint& ckpt, ThreadPool* pool) {
  const std::string mode = ResolveDraftMode(options, ckpt);
  if (mode == "off") return nullptr;
  if (mode == "ngram") return std::make_unique<NgramDrafter>(options.ngram_min, options.ngram_max);
  if (mode == "replica") {
    const QuantFormat format = options.replica_format;
    const int group = options.replica_group;
    return std::make_unique<ReplicaDrafter>(
        ckpt, pool, [&ckpt, format, group](ThreadPool& p) { return std::make_shared<QuantizedExpertExecutor>(ckpt, format, group, &p); },
        fmt::format("replica-{}", ToString(format)));
  }
  throw std::invalid_argument(fmt::format("--draft {}: expected auto, replica, ngram or off", mode));
}

}  // namespace tandem::rt
