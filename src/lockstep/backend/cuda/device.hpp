// Device memory for the CUDA backend, callable from host code compiled by g++
// (no CUDA headers here; the definitions are in device.cu).
//
// DeviceBuffer<T> is the only owner of device memory in lockstep. It grows and
// never shrinks, so a training step that asks for the same sizes as the last one
// allocates nothing (the steady state allocates nothing). Its memory comes from
// a size-bucketed pool (device.cu): a freed block is kept for the next request
// of its bucket, so temporaries cost no cudaMalloc either. New memory is not
// zeroed: kernels must write every cell they claim to produce. In poison mode
// (set_poison) every allocation is filled with a large-value pattern, so a
// kernel that relies on zeroed memory gives wrong bits and fails its gate
// (DESIGN.md §2, "the dirty-buffer gate").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lockstep::cuda {

void* device_alloc(std::size_t bytes);  // throws std::runtime_error naming the size
void device_free(void* p) noexcept;
void copy_to_device(void* dst, const void* src, std::size_t bytes);
void copy_to_host(void* dst, const void* src, std::size_t bytes);
// Whether copy_to_host goes through a page-locked stage (copies under 64 MB):
// on unless LOCKSTEP_PINNED_READBACK=0, or as set here (-1: the environment's,
// 0 off, 1 on; decode_bench's variant key `pinned`).
void set_pinned_readback(int on);
void copy_on_device(void* dst, const void* src, std::size_t bytes);  // in stream order: no host wait
// An asynchronous copy from page-locked host memory (PinnedBuffer), in stream
// order: the host goes on at once and must not touch `src` until the device is
// next waited for.
void copy_to_device_async(void* dst, const void* src, std::size_t bytes);
// `rows` rows of `row_elems` floats, row r starting at src + r·stride, into
// dst densely (stride 1 with row_elems 1 gathers a strided column).
void copy_rows_to_host(float* dst, const float* src, std::size_t rows, std::size_t row_elems, std::size_t stride);
// Every 32-bit word of [p, p + 4·words) set to `pattern` (on the device).
void fill_words(void* p, std::uint32_t pattern, std::size_t words);
// Waits for the device; throws std::runtime_error with the CUDA error (and
// `what`) if any kernel failed.
void synchronize(const char* what = "synchronize");
// Throws if the last launch failed to start (bad configuration); `kernel` names it.
void check_launch(const char* kernel);

// How many times the host has waited for the device so far: every
// synchronize, every copy to the host, every copy to the device from pageable
// memory (cudaMemcpy returns only when the device has the data). Tests use it
// to show that a training step waits once, at its end (DESIGN: no host
// synchronization inside a step except the audits').
std::size_t host_waits();

// Page-locked host memory (cudaHostAlloc), growing only, for copies that must
// not make the host wait (copy_to_device_async).
void* pinned_alloc(std::size_t bytes);
void pinned_free(void* p) noexcept;
template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { pinned_free(p_); }
  void resize(std::size_t n) {
    if (n > cap_) {
      pinned_free(p_);
      p_ = nullptr;
      cap_ = 0;
      p_ = static_cast<T*>(pinned_alloc(n * sizeof(T)));
      cap_ = n;
    }
  }
  T* data() { return p_; }

 private:
  T* p_ = nullptr;
  std::size_t cap_ = 0;
};

// Poison mode: every allocation and every growth is filled with `pattern`
// (e.g. 0x7F000000 = 1.7e38, or a NaN pattern); nullopt: off (the default).
void set_poison(std::optional<std::uint32_t> pattern);
std::optional<std::uint32_t> poison();

// Bytes held by all DeviceBuffers now (in pool buckets), and cudaMalloc calls
// made so far (tests use the count to show a steady-state step allocates nothing).
std::size_t bytes_in_use();
std::size_t allocation_count();
// Counts the device blocks handed back (device_free of a live block): while it
// is unchanged, every pointer a DeviceBuffer has given out still belongs to
// that buffer, so a CUDA graph captured since then reads and writes the
// buffers it was captured with (graph.hpp).
std::uint64_t memory_epoch();
// Peak memory, for the benchmarks' tables: the high-water mark of
// bytes_in_use() since the process started or the last reset (what the
// buffers needed at once), the bytes cudaMalloc has handed the pool (what it
// holds: nothing is given back), and the device's used memory as
// cudaMemGetInfo sees it (total − free: the CUDA context, cuBLASLt's
// workspace and every other process on the device too).
std::size_t peak_bytes_in_use();
void reset_peak_bytes_in_use();
std::size_t bytes_reserved();
std::size_t device_bytes_used();

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) { resize(n); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept { swap(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    swap(o);
    return *this;
  }
  ~DeviceBuffer() { device_free(p_); }

  // Size becomes n; reallocates only to grow (old contents are then lost: the
  // engine resizes before it writes).
  void resize(std::size_t n) {
    if (n > cap_) {
      device_free(p_);
      p_ = nullptr;
      cap_ = 0;
      p_ = static_cast<T*>(device_alloc(n * sizeof(T)));
      cap_ = n;
    }
    n_ = n;
  }
  void assign(std::size_t n, T value);  // resize and fill (float/int32 only)
  T* data() { return p_; }
  const T* data() const { return p_; }
  std::size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }

  void upload(const T* host, std::size_t n) {
    resize(n);
    copy_to_device(p_, host, n * sizeof(T));
  }
  void upload(const std::vector<T>& host) { upload(host.data(), host.size()); }
  std::vector<T> download() const {
    std::vector<T> h(n_);
    copy_to_host(h.data(), p_, n_ * sizeof(T));
    return h;
  }
  void download(T* host) const { copy_to_host(host, p_, n_ * sizeof(T)); }

  void swap(DeviceBuffer& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    std::swap(cap_, o.cap_);
  }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0, cap_ = 0;
};

template <class T>
void DeviceBuffer<T>::assign(std::size_t n, T value) {
  static_assert(sizeof(T) == 4, "DeviceBuffer::assign: 4-byte types only");
  resize(n);
  std::uint32_t w;
  static_assert(sizeof(w) == sizeof(value));
  __builtin_memcpy(&w, &value, 4);
  fill_words(p_, w, n);
}

}  // namespace lockstep::cuda
