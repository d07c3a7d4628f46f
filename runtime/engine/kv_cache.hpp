#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <vector>

namespace tandem::rt {

using SequenceId = std::uint64_t;

// A cache could not grow within its pool's memory budget (KvCachePool::SetBudget).
class KvBudgetExhausted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What the caches of one pool hold together, and the most they may (0: no limit).
struct KvMemory {
  std::size_t limit_bytes = 0;
  std::size_t bytes = 0;
  std::size_t caches = 0;
};

// One sequence's compressed MLA cache: per layer and position, the normalised
// latent c (kv_lora_rank floats) followed by the rotated shared key k_pe
// (qk_rope_head_dim floats). Positions [0, length) are valid. Memory follows the
// sequence, not its capacity: positions are allocated as Reserve asks (doubling, up to
// the capacity), so a request allowed a long answer costs only what it has written.
class KvCache {
 public:
  KvCache(int layers, int width, int capacity, std::shared_ptr<KvMemory> memory = nullptr);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  int length() const { return length_; }
  int capacity() const { return capacity_; }
  int allocated() const { return allocated_; }  // positions writable now
  int width() const { return width_; }
  static constexpr int kFirstAllocation = 256;  // positions a new cache starts with (fewer if its capacity is smaller)
  // Unique in the process, and renewed whenever the content is replaced from outside
  // a forward pass (a new cache, CopyPrefixFrom): a device's mirror of the cache
  // knows from it whether what it holds is still this cache's.
  std::uint64_t serial() const { return serial_; }

  float* At(int layer, int position) { return data_.data() + Offset(layer, position); }
  const float* At(int layer, int position) const { return data_.data() + Offset(layer, position); }

  // Makes positions [0, positions) writable, keeping what [0, length) holds. Throws
  // std::invalid_argument past the capacity and KvBudgetExhausted past the pool's budget
  // (the cache is then unchanged). Pointers from At() do not survive a growth.
  void Reserve(int positions);
  // Marks [0, length) valid after a forward wrote those positions.
  void SetLength(int length);
  // Speculative rollback: forget positions from `length` on.
  void Truncate(int length);
  // Prefix reuse: this cache becomes the first `length` positions of `other`.
  void CopyPrefixFrom(const KvCache& other, int length);

 private:
  std::size_t Offset(int layer, int position) const {
    return (static_cast<std::size_t>(layer) * static_cast<std::size_t>(allocated_) + static_cast<std::size_t>(position)) *
           static_cast<std::size_t>(width_);
  }
  std::size_t Bytes(int positions) const;
  // Allocates `wanted` positions, or fewer within the budget but at least `positions`.
  void Grow(int positions, int wanted);

  int layers_;
  int width_;
  int capacity_;
  int allocated_ = 0;
  int length_ = 0;
  std::uint64_t serial_;
  std::shared_ptr<KvMemory> memory_;
  std::vector<float> data_;
};

// The caches of all live sequences, by id. Errors (unknown id, duplicate id,
// capacity) throw std::invalid_argument with the id in the message; a cache that
// would take the pool past its budget throws KvBudgetExhausted.
class KvCachePool {
 public:
  KvCachePool(int layers, int width) : layers_(layers), width_(width), memory_(std::make_shared<KvMemory>()) {}

  // The most bytes the pool's caches may hold together (0: no limit).
  void SetBudget(std::size_t bytes) { memory_->limit_bytes = bytes; }
  std::size_t budget_bytes() const { return memory_->limit_bytes; }
  std::size_t bytes_in_use() const { return memory_->bytes; }
  std::size_t bytes_per_position() const { return static_cast<std::size_t>(layers_) * static_cast<std::size_t>(width_) * sizeof(float); }

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
  std::shared_ptr<KvMemory> memory_;  // shared with its caches, which account their bytes in it
  std::map<SequenceId, std::unique_ptr<KvCache>> caches_;
};

}  // namespace tandem::rt
