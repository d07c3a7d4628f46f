#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace tandem::rt {

using SequenceId = std::uint64_t;

// One sequence's compressed MLA cache: per layer and position, the normalised
// latent c (kv_lora_rank floats) followed by the rotated shared key k_pe
// (qk_rope_head_dim floats). Positions [0, length) are valid.
class KvCache {
 public:
  KvCache(int layers, int width, int capacity);

  int length() const { return length_; }
  int capacity() const { return capacity_; }
  int width() const { return width_; }
  // Unique in the process, and renewed whenever the content is replaced from outside
  // a forward pass (a new cache, CopyPrefixFrom): a device's mirror of the cache
  // knows from it whether what it holds is still this cache's.
  std::uint64_t serial() const { return serial_; }

  float* At(int layer, int position) { return data_.data() + Offset(layer, position); }
  const float* At(int layer, int position) const { return data_.data() + Offset(layer, position); }

  // Marks [0, length) valid after a forward wrote those positions.
  void SetLength(int length);
  // Speculative rollback: forget positions from `length` on.
  void Truncate(int length);
  // Prefix reuse: this cache becomes the first `length` positions of `other`.
  void CopyPrefixFrom(const KvCache& other, int length);

 private:
  std::size_t Offset(int layer, int position) const {
    return (static_cast<std::size_t>(layer) * static_cast<std::size_t>(capacity_) + static_cast<std::size_t>(position)) *
           static_cast<std::size_t>(width_);
  }

  int layers_;
  int width_;
  int capacity_;
  int length_ = 0;
  std::uint64_t serial_;
  std::vector<float> data_;
};

// The caches of all live sequences, by id. Errors (unknown id, duplicate id,
// capacity) throw std::invalid_argument with the id in the message.
class KvCachePool {
 public:
  KvCachePool(int layers, int width) : layers_(layers), width_(width) {}

  KvCache& Open(SequenceId id, int capacity);
  KvCache& Get(SequenceId id);
  const KvCache& Get(SequenceId id) const;
  bool Contains(SequenceId id) const { return caches_.contains(id); }
  void Close(SequenceId id);
  // Opens `dst` (capacity as given) holding the first `length` positions of `src`.
  KvCache& Fork(SequenceId src, SequenceId dst, int length, int capacity);
  std::size_t size() const { return caches_.size(); }

 private:
  int layers_;
  int width_;
  std::map<SequenceId, std::unique_ptr<KvCache>> caches_;
};

}  // namespace tandem::rt
