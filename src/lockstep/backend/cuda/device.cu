// Definitions of device.hpp: cudaMalloc/cudaFree/cudaMemcpy with errors turned
// into exceptions, the poison fill, and the allocation counters.
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/device_pool.hpp"
#include "lockstep/backend/cuda/env_choice.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/backend/cuda/profile.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace lockstep::cuda {
namespace {

void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw std::runtime_error("CUDA error in " + what + ": " + cudaGetErrorString(e));
}

std::mutex g_mutex;
std::unordered_map<void*, std::size_t> g_sizes;
std::size_t g_bytes = 0, g_allocs = 0, g_peak_bytes = 0, g_reserved = 0;
std::optional<std::uint32_t> g_poison;
std::atomic<std::size_t> g_host_waits{0};
std::uint64_t g_frees = 0;  // memory_epoch(), under g_mutex

__global__ void fill_words_kernel(std::uint32_t* p, std::uint32_t pattern, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] = pattern;
}

// The pool: sizes are rounded up to a bucket (four per power of two: 2^k,
// 1.25·2^k, 1.5·2^k, 1.75·2^k, so at most a quarter is wasted); a freed block
// goes to its bucket's free list and the next request of that bucket takes it.
// cudaMalloc runs only when a bucket is empty; nothing is given back to CUDA.
std::size_t bucket_of(std::size_t bytes) {
  std::size_t b = 256;
  while (b < bytes) {
    const std::size_t q = b / 4;
    if (b + q >= bytes && q >= 64) return b + q;
    if (b + 2 * q >= bytes && q >= 64) return b + 2 * q;
    if (b + 3 * q >= bytes && q >= 64) return b + 3 * q;
    b *= 2;
  }
  return b;
}

std::unordered_map<std::size_t, std::vector<void*>> g_free;

// fill_words under a trace name: the poison fill is its own path in the
// launch trace, so that the gates' poisoned allocations do not count as a
// gate of fill_words (the fill cases gate it: gate_train.cpp).
void fill_words_as(const char* name, void* p, std::uint32_t pattern, std::size_t words) {
  if (words == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((words + 255) / 256, 4096));
  trace::launched(name);
  fill_words_kernel<<<blocks, 256>>>(static_cast<std::uint32_t*>(p), pattern, words);
  check_launch(name);
}

}  // namespace

void* device_alloc(std::size_t bytes) {
  // One extra word: a zero-size buffer still has a valid, distinct address.
  const std::size_t size = bucket_of(bytes + 4);
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto& list = g_free[size];
    if (!list.empty()) {
      p = list.back();
      list.pop_back();
    }
  }
  if (p == nullptr) {
    check(cudaMalloc(&p, size), "cudaMalloc(" + std::to_string(bytes) + " bytes)");
    std::lock_guard<std::mutex> lock(g_mutex);
    ++g_allocs;
    g_reserved += size;
  }
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_sizes[p] = size;
    g_bytes += size;
    g_peak_bytes = std::max(g_peak_bytes, g_bytes);
  }
  if (g_poison) fill_words_as("fill_words (poison)", p, *g_poison, size / 4);
  return p;
}

void device_free(void* p) noexcept {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_sizes.find(p);
  if (it == g_sizes.end()) return;
  g_bytes -= it->second;
  ++g_frees;
  g_free[it->second].push_back(p);
  g_sizes.erase(it);
}

void copy_to_device(void* dst, const void* src, std::size_t bytes) {
  if (!bytes) return;
  g_host_waits.fetch_add(1, std::memory_order_relaxed);
  profile::mark("(copy to device: host waits)");
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "copy to device");
}
namespace {
// The readback stage (set_pinned_readback): page-locked, grown to the largest
// copy it served, kept for the process. Readbacks of kPinnedReadbackMax bytes
// or more (checkpoints' weights) copy straight into pageable memory.
constexpr std::size_t kPinnedReadbackMax = std::size_t{64} << 20;
std::mutex g_stage_mutex;
void* g_stage = nullptr;
std::size_t g_stage_bytes = 0;
std::atomic<int> g_pinned_readback{-1};  // -1: the environment's
bool pinned_readback() {
  const int set = g_pinned_readback.load();
  if (set >= 0) return set != 0;
  static const bool env_on = env_on_unless_zero("LOCKSTEP_PINNED_READBACK");
  return env_on;
}
// The stage, grown to `bytes` if it is smaller; nullptr when no page-locked
// memory is to be had (a limit on locked pages): the caller copies straight
// to pageable memory then, as with the stage off. Under g_stage_mutex.
void* stage_of(std::size_t bytes) {
  if (g_stage_bytes >= bytes) return g_stage;
  if (g_stage != nullptr) check(cudaFreeHost(g_stage), "cudaFreeHost of the readback stage");
  g_stage = nullptr;
  g_stage_bytes = 0;
  if (cudaHostAlloc(&g_stage, bytes, cudaHostAllocDefault) != cudaSuccess) {
    (void)cudaGetLastError();
    g_stage = nullptr;
    return nullptr;
  }
  g_stage_bytes = bytes;
  return g_stage;
}
}  // namespace

void set_pinned_readback(int on) { g_pinned_readback.store(on < 0 ? -1 : (on != 0 ? 1 : 0)); }

void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  if (!bytes) return;
  g_host_waits.fetch_add(1, std::memory_order_relaxed);
  profile::mark("(copy to host: host waits)");
  // Through the page-locked stage: one DMA at the link's rate, then a host
  // copy, where a pageable destination makes the driver stage it in pieces
  // (a decode pass's logits, 513 KB at batch 1: docs/perf/DECODE_CUDA.md §21).
  if (bytes < kPinnedReadbackMax && pinned_readback()) {
    std::lock_guard<std::mutex> lock(g_stage_mutex);
    if (void* stage = stage_of(bytes)) {
      check(cudaMemcpyAsync(stage, src, bytes, cudaMemcpyDeviceToHost, cudaStreamPerThread), "copy to host");
      check(cudaStreamSynchronize(cudaStreamPerThread), "copy to host");
      std::memcpy(dst, stage, bytes);
      return;
    }
  }
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "copy to host");
}
void copy_on_device(void* dst, const void* src, std::size_t bytes) {
  if (!bytes) return;
  profile::mark("copy on device");
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0), "copy on device");
}
void copy_to_device_async(void* dst, const void* src, std::size_t bytes) {
  if (!bytes) return;
  profile::mark("copy to device (asynchronous)");
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, 0), "asynchronous copy to device");
}

void* pinned_alloc(std::size_t bytes) {
  void* p = nullptr;
  check(cudaHostAlloc(&p, bytes, cudaHostAllocDefault), "cudaHostAlloc of " + std::to_string(bytes) + " bytes");
  return p;
}
void pinned_free(void* p) noexcept {
  if (p) cudaFreeHost(p);
}

std::size_t host_waits() { return g_host_waits.load(std::memory_order_relaxed); }

void copy_rows_to_host(float* dst, const float* src, std::size_t rows, std::size_t row_elems, std::size_t stride) {
  if (rows == 0 || row_elems == 0) return;
  g_host_waits.fetch_add(1, std::memory_order_relaxed);
  profile::mark("(strided copy to host: host waits)");
  check(cudaMemcpy2D(dst, row_elems * sizeof(float), src, stride * sizeof(float), row_elems * sizeof(float), rows,
                     cudaMemcpyDeviceToHost),
        "strided copy to host");
}

void fill_words(void* p, std::uint32_t pattern, std::size_t words) { fill_words_as("fill_words", p, pattern, words); }

void synchronize(const char* what) {
  g_host_waits.fetch_add(1, std::memory_order_relaxed);
  profile::mark("(synchronize: host waits)");
  check(cudaDeviceSynchronize(), what);
}

void check_launch(const char* kernel) { check(cudaGetLastError(), std::string("launch of ") + kernel); }

void set_poison(std::optional<std::uint32_t> pattern) { g_poison = pattern; }
std::optional<std::uint32_t> poison() { return g_poison; }

std::size_t bytes_in_use() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_bytes;
}
std::size_t pool_block_bytes(std::size_t bytes) { return bucket_of(bytes + 4); }

std::size_t peak_bytes_in_use() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_peak_bytes;
}
void reset_peak_bytes_in_use() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_peak_bytes = g_bytes;
}
std::size_t bytes_reserved() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_reserved;
}
std::size_t device_bytes_used() {
  std::size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return total - free;
}
std::uint64_t memory_epoch() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_frees;
}
std::size_t allocation_count() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_allocs;
}

}  // namespace lockstep::cuda
