#include "runtime/engine/kv_cache.hpp"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace tandem::rt {

namespace {
std::uint64_t NextSerial() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

KvCache::KvCache(int layers, int width, int capacity, std::shared_ptr<KvMemory> memory)
    : layers_(layers), width_(width), capacity_(capacity), serial_(NextSerial()), memory_(std::move(memory)) {
  if (layers <= 0 || width <= 0 || capacity <= 0) throw std::invalid_argument("kv cache: layers, width and capacity must be positive");
  if (memory_) ++memory_->caches;
  try {
    Grow(1, std::min(capacity, kFirstAllocation));
  } catch (...) {
    if (memory_) --memory_->caches;
    throw;
  }
}

KvCache::~KvCache() {
  if (!memory_) return;
  memory_->bytes -= Bytes(allocated_);
  --memory_->caches;
}

std::size_t KvCache::Bytes(int positions) const {
  return static_cast<std::size_t>(layers_) * static_cast<std::size_t>(positions) * static_cast<std::size_t>(width_) * sizeof(float);
}

void KvCache::Reserve(int positions) {
  if (positions <= allocated_) return;
  if (positions > capacity_) {
    throw std::invalid_argument(fmt::format("kv cache: {} positions exceed the capacity of {}", positions, capacity_));
  }
  Grow(positions, std::min(capacity_, std::max(positions, 2 * allocated_)));  // doubling keeps the copies amortised
}

void KvCache::Grow(int positions, int wanted) {
  int grown = wanted;  // within a budget, as much of it as fits
  if (memory_ && memory_->limit_bytes > 0) {
    const std::size_t others = memory_->bytes - Bytes(allocated_);
    const std::size_t room = memory_->limit_bytes > others ? memory_->limit_bytes - others : 0;
    grown = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(grown), room / Bytes(1)));
    if (grown < positions) {
      constexpr double kMiB = 1024.0 * 1024.0;
      throw KvBudgetExhausted(fmt::format(
          "the KV cache budget of {:.1f} MiB is in use ({:.1f} MiB by {} sequences); this sequence needs {:.1f} MiB for {} positions",
          static_cast<double>(memory_->limit_bytes) / kMiB, static_cast<double>(memory_->bytes) / kMiB, memory_->caches,
          static_cast<double>(Bytes(positions)) / kMiB, positions));
    }
  }
  std::vector<float> data(static_cast<std::size_t>(layers_) * static_cast<std::size_t>(grown) * static_cast<std::size_t>(width_));
  const auto valid = static_cast<std::size_t>(length_) * static_cast<std::size_t>(width_);
  for (int l = 0; l < layers_; ++l) {
    std::copy_n(At(l, 0), valid,
                data.data() + static_cast<std::size_t>(l) * static_cast<std::size_t>(grown) * static_cast<std::size_t>(width_));
  }
  if (memory_) memory_->bytes += Bytes(grown) - Bytes(allocated_);
  data_ = std::move(data);
  allocated_ = grown;
}

void KvCache::SetLength(int length) {
  if (length < 0 || length > allocated_) {
    throw std::invalid_argument(fmt::format("kv cache: length {} outside [0, {}] (capacity {})", length, allocated_, capacity_));
  }
  length_ = length;
}

void KvCache::Truncate(int length) {
  if (length < 0 || length > length_) {
    throw std::invalid_argument(fmt::format("kv cache: cannot truncate to {} (length is {})", length, length_));
  }
  length_ = length;
}

void KvCache::CopyPrefixFrom(const KvCache& other, int length) {
  if (other.layers_ != layers_ || other.width_ != width_) throw std::invalid_argument("kv cache: copying between different models");
  if (length < 0 || length > other.length_ || length > capacity_) {
    throw std::invalid_argument(
        fmt::format("kv cache: cannot copy a {}-position prefix (source has {}, capacity {})", length, other.length_, capacity_));
  }
  Reserve(length);
  for (int l = 0; l < layers_; ++l) {
    std::copy_n(other.At(l, 0), static_cast<std::size_t>(length) * static_cast<std::size_t>(width_), At(l, 0));
  }
  length_ = length;
  serial_ = NextSerial();
}

KvCache& KvCachePool::Open(SequenceId id, int capacity) {
  if (caches_.contains(id)) throw std::invalid_argument(fmt::format("kv cache: sequence {} is already open", id));
  auto cache = std::make_unique<KvCache>(layers_, width_, capacity, memory_);
  KvCache& ref = *cache;
  caches_.emplace(id, std::move(cache));
  return ref;
}

KvCache& KvCachePool::Get(SequenceId id) {
  const auto it = caches_.find(id);
  if (it == caches_.end()) throw std::invalid_argument(fmt::format("kv cache: sequence {} is not open", id));
  return *it->second;
}

const KvCache& KvCachePool::Get(SequenceId id) const { return const_cast<KvCachePool*>(this)->Get(id); }

void KvCachePool::Close(SequenceId id) {
  if (caches_.erase(id) == 0) throw std::invalid_argument(fmt::format("kv cache: sequence {} is not open", id));
}

KvCache& KvCachePool::Fork(SequenceId src, SequenceId dst, int length, int capacity) {
  const KvCache& source = Get(src);
  KvCache& target = Open(dst, capacity);
  try {
    target.CopyPrefixFrom(source, length);
  } catch (...) {
    caches_.erase(dst);
    throw;
  }
  return target;
}

}  // namespace tandem::rt
