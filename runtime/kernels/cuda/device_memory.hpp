#pragma once

// Device and pinned host memory owned by RAII handles, and the one way CUDA
// errors become exceptions. Internal to the CUDA backend (needs cuda_runtime.h).

#include <cstddef>
#include <cstdint>
#include <utility>

#include <cuda_runtime.h>

namespace tandem::rt::cuda {

// Throws std::runtime_error "CUDA: <what>: <reason>" unless `status` is cudaSuccess.
void Check(cudaError_t status, const char* what);

// Throws if the last kernel launch failed (bad configuration, no image for this GPU).
void CheckLaunch(const char* kernel);

// Where a Buffer's memory comes from.
struct DeviceMemory {
  static void* Allocate(std::size_t bytes) {
    void* p = nullptr;
    Check(cudaMalloc(&p, bytes), "cudaMalloc");
    return p;
  }
  static void Free(void* p) { cudaFree(p); }
};
// Page-locked host memory: what asynchronous copies to and from the device need.
struct PinnedMemory {
  static void* Allocate(std::size_t bytes) {
    void* p = nullptr;
    Check(cudaMallocHost(&p, bytes), "cudaMallocHost");
    return p;
  }
  static void Free(void* p) { cudaFreeHost(p); }
};

// An allocation of n T's owned by RAII. Reserve grows it (dropping the contents):
// workspace that reaches its steady size after the first steps and is then reused.
template <typename T, typename Memory>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(std::size_t n) { Reserve(n); }
  ~Buffer() { Release(); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      Release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }

  // Returns whether the buffer moved.
  bool Reserve(std::size_t n) {
    if (n <= size_) return false;
    Release();
    data_ = static_cast<T*>(Memory::Allocate(n * sizeof(T)));
    size_ = n;
    return true;
  }
  T* get() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }

 private:
  void Release() {
    if (data_ != nullptr) Memory::Free(data_);
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
};

template <typename T>
using DeviceBuffer = Buffer<T, DeviceMemory>;
template <typename T>
using PinnedBuffer = Buffer<T, PinnedMemory>;

// Device buffers that a captured CUDA graph names: growing one through Grow bumps
// the generation, and a graph captured under an older generation is stale.
class Workspace {
 public:
  template <typename T>
  T* Grow(DeviceBuffer<T>& buffer, std::size_t n) {
    if (buffer.Reserve(n)) ++generation_;
    return buffer.get();
  }
  std::uint64_t generation() const { return generation_; }

 private:
  std::uint64_t generation_ = 0;
};

// A stream owned by RAII.
class Stream {
 public:
  Stream() { Check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void Synchronize() const { Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace tandem::rt::cuda
