#pragma once

#include <memory>
#include <string>

#include "runtime/draft/drafter.hpp"
#include "runtime/kernels/quantized_matrix.hpp"

namespace tandem::rt {

class Checkpoint;
class ThreadPool;

// `tandem-rt serve --draft …`: which drafter, with what settings.
struct DraftOptions {
  // auto: replica for synthetic checkpoints (random weights: only a copy of the
  // target agrees with it), mtp for checkpoints with an MTP layer, else off.
  std::string mode = "auto";        // auto | replica | mtp | ngram | off
  std::string policy = "adaptive";  // fixed:K | adaptive
  int max_drafts = 8;               // the adaptive policy's ceiling
  QuantFormat replica_format = QuantFormat::kInt8;
  int replica_group = 32;
  int ngram_min = 1;
  int ngram_max = 4;
};

// The mode `auto` stands for with this checkpoint.
std::string ResolveDraftMode(const DraftOptions& options, const Checkpoint& ckpt);

// nullptr for `off`. The MTP drafter needs an engine with keep_hidden. The replica quantizes the checkpoint's experts here (seconds
// for the presets) and computes on `pool`, the target engine's threads. Throws
// std::invalid_argument for a bad mode or setting.
std::unique_ptr<Drafter> MakeDrafter(const DraftOptions& options, const Checkpoint& ckpt, ThreadPool* pool);

}  // namespace tandem::rt
