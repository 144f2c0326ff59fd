// Definitions of device.hpp: cudaMalloc/cudaFree/cudaMemcpy with errors turned
// into exceptions, the poison fill, and the allocation counters.
#include "lockstep/backend/cuda/device.hpp"

#include <cuda_runtime.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace lockstep::cuda {
namespace {

void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw std::runtime_error("CUDA error in " + what + ": " + cudaGetErrorString(e));
}

std::mutex g_mutex;
std::unordered_map<void*, std::size_t> g_sizes;
std::size_t g_bytes = 0, g_allocs = 0;
std::optional<std::uint32_t> g_poison;

__global__ void fill_words_kernel(std::uint32_t* p, std::uint32_t pattern, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] = pattern;
}

}  // namespace

void* device_alloc(std::size_t bytes) {
  void* p = nullptr;
  // One extra word: a zero-size buffer still has a valid, distinct address.
  const std::size_t padded = (bytes + 4 + 255) / 256 * 256;
  check(cudaMalloc(&p, padded), "cudaMalloc(" + std::to_string(bytes) + " bytes)");
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_sizes[p] = padded;
    g_bytes += padded;
    ++g_allocs;
  }
  if (g_poison) fill_words(p, *g_poison, padded / 4);
  return p;
}

void device_free(void* p) noexcept {
  if (p == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_sizes.find(p);
    if (it != g_sizes.end()) {
      g_bytes -= it->second;
      g_sizes.erase(it);
    }
  }
  cudaFree(p);
}

void copy_to_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes) check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "copy to device");
}
void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes) check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "copy to host");
}
void copy_on_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes) check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "copy on device");
}

void fill_words(void* p, std::uint32_t pattern, std::size_t words) {
  if (words == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((words + 255) / 256, 4096));
  fill_words_kernel<<<blocks, 256>>>(static_cast<std::uint32_t*>(p), pattern, words);
  check_launch("fill_words");
}

void synchronize(const char* what) { check(cudaDeviceSynchronize(), what); }

void check_launch(const char* kernel) { check(cudaGetLastError(), std::string("launch of ") + kernel); }

void set_poison(std::optional<std::uint32_t> pattern) { g_poison = pattern; }
std::optional<std::uint32_t> poison() { return g_poison; }

std::size_t bytes_in_use() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_bytes;
}
std::size_t allocation_count() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_allocs;
}

}  // namespace lockstep::cuda
