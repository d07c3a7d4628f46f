#include "runtime/engine/kv_cache.hpp"

#include <algorithm>
#include <atomic>
#include <stdexcept>

#include <fmt/format.h>

namespace tandem::rt {

namespace {
std::uint64_t NextSerial() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

KvCache::KvCache(int layers, int width, int capacity)
    : layers_(layers),
      width_(width),
      capacity_(capacity),
      serial_(NextSerial()),
      data_(static_cast<std::size_t>(layers) * static_cast<std::size_t>(capacity) * static_cast<std::size_t>(width)) {
  if (layers <= 0 || width <= 0 || capacity <= 0) throw std::invalid_argument("kv cache: layers, width and capacity must be positive");
}

void KvCache::SetLength(int length) {
  if (length < 0 || length > capacity_) {
    throw std::invalid_argument(fmt::format("kv cache: length {} outside [0, {}]", length, capacity_));
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
  for (int l = 0; l < layers_; ++l) {
    std::copy_n(other.At(l, 0), static_cast<std::size_t>(length) * static_cast<std::size_t>(width_), At(l, 0));
  }
  length_ = length;
  serial_ = NextSerial();
}

KvCache& KvCachePool::Open(SequenceId id, int capacity) {
  if (caches_.contains(id)) throw std::invalid_argument(fmt::format("kv cache: sequence {} is already open", id));
  auto cache = std::make_unique<KvCache>(layers_, width_, capacity);
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
