// The canonical reductions on a CUDA device, two ways: the header's
// single-row functions run by one thread (the same source as the CPU), and
// the warp formulation that docs/NUMERICS.md describes (shuffle-down tree).
// Both must give the CPU's bits; reduce_gpu_test.cpp checks it.
#include "reduce_gpu.hpp"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "lockstep/num/reduce.hpp"
#include "lockstep/num/rng.hpp"

namespace lockstep::test::gpu {
namespace {

namespace rd = num::reduce;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}

template <class T>
struct Buffer {
  T* p = nullptr;
  explicit Buffer(std::size_t n) { check(cudaMalloc(&p, (n + 1) * sizeof(T)), "cudaMalloc"); }
  ~Buffer() { cudaFree(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

__device__ float one_row(Kind k, const float* x, const float* y, std::size_t n) {
  switch (k) {
    case Kind::sum: return rd::sum(x, n);
    case Kind::sumsq: return rd::sumsq(x, n);
    case Kind::dot: return rd::dot(x, y, n);
    case Kind::max: return rd::max(x, n);
    case Kind::min: return rd::min(x, n);
  }
  return 0.0f;
}

__global__ void rows_one_thread_kernel(Kind k, const float* x, const float* y, std::size_t rows,
                                       std::size_t n, std::size_t ld, float* out) {
  const std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (r < rows) out[r] = one_row(k, x + r * ld, y + r * ld, n);
}

// max/min under the total order (NaN wins, -0 < +0): through the order key,
// not fmaxf, whose choice between -0 and +0 is unspecified.
__device__ float pick(Kind k, float a, float b) {
  if (a != a || b != b) return num::float_of(rd::kCanonicalNaN);
  const std::int32_t ka = rd::detail::order_key(a), kb = rd::detail::order_key(b);
  if (k == Kind::max) return ka >= kb ? a : b;
  return ka <= kb ? a : b;
}

__device__ float identity(Kind k) {
  if (k == Kind::max) return num::float_of(0xFF800000u);
  if (k == Kind::min) return num::float_of(0x7F800000u);
  return 0.0f;
}

// One chunk by one warp: lane j folds elements j, j+32, ... in order, then
// the shuffle-down tree. `first` selects the lane step of the first level
// (sumsq/dot fold products); later levels are plain sums (or max/min).
__device__ float warp_chunk(Kind k, bool first, const float* x, const float* y, std::size_t len) {
  const unsigned lane = threadIdx.x % 32;
  float acc = identity(k);
  for (std::size_t t = lane; t < len; t += 32) {
    const float v = x[t];
    if (k == Kind::max || k == Kind::min) acc = pick(k, acc, v);
    else if (first && k == Kind::sumsq) acc = num::fma_rn(v, v, acc);
    else if (first && k == Kind::dot) acc = num::fma_rn(v, y[t], acc);
    else acc = acc + v;
  }
  for (int off = 16; off >= 1; off /= 2) {
    const float other = __shfl_down_sync(0xffffffffu, acc, off);
    acc = (k == Kind::max || k == Kind::min) ? pick(k, acc, other) : acc + other;
  }
  return acc;  // meaningful in lane 0
}

__global__ void rows_warp_kernel(Kind k, const float* x, const float* y, std::size_t n,
                                 std::size_t ld, float* out) {
  extern __shared__ float partial[];  // one per chunk
  const std::size_t row = blockIdx.x;
  const unsigned warp = threadIdx.x / 32, warps = blockDim.x / 32, lane = threadIdx.x % 32;
  const float* xr = x + row * ld;
  const float* yr = y + row * ld;
  const std::size_t m = n <= rd::kChunk ? 1 : (n + rd::kChunk - 1) / rd::kChunk;
  for (std::size_t c = warp; c < m; c += warps) {
    const std::size_t base = c * rd::kChunk;
    const std::size_t len = n - base < rd::kChunk ? n - base : rd::kChunk;
    const float p = warp_chunk(k, true, xr + base, yr + base, len);
    if (lane == 0) partial[c] = p;
  }
  __syncthreads();
  if (warp == 0) {
    // m <= 4096 partials: one more level, by the same rule, in one warp.
    const float r = m == 1 ? partial[0] : warp_chunk(k, false, partial, partial, m);
    if (lane == 0) out[row] = rd::canonical_nan(r);
  }
}

__global__ void rng_kernel(bool gaussian, std::uint64_t seed, std::uint64_t stream,
                           std::uint64_t first, std::size_t n, float* out) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n)
    out[i] = gaussian ? num::rng::normal(seed, stream, first + i)
                      : num::rng::uniform(seed, stream, first + i);
}

struct Device {
  Buffer<float> x, y, out;
  Device(const std::vector<float>& hx, const std::vector<float>& hy, std::size_t nout)
      : x(hx.size()), y(hy.size()), out(nout) {
    check(cudaMemcpy(x.p, hx.data(), hx.size() * sizeof(float), cudaMemcpyHostToDevice), "copy x");
    check(cudaMemcpy(y.p, hy.data(), hy.size() * sizeof(float), cudaMemcpyHostToDevice), "copy y");
  }
  std::vector<float> result(std::size_t n) {
    check(cudaGetLastError(), "launch");
    check(cudaDeviceSynchronize(), "kernel");
    std::vector<float> h(n);
    check(cudaMemcpy(h.data(), out.p, n * sizeof(float), cudaMemcpyDeviceToHost), "copy out");
    return h;
  }
};

unsigned blocks_for(std::size_t n, unsigned threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

}  // namespace

int device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

std::vector<float> rows_one_thread(Kind kind, const std::vector<float>& x,
                                   const std::vector<float>& y, std::size_t rows, std::size_t n,
                                   std::size_t ld) {
  Device d(x, y, rows);
  if (rows > 0)
    rows_one_thread_kernel<<<blocks_for(rows, 128), 128>>>(kind, d.x.p, d.y.p, rows, n, ld, d.out.p);
  return d.result(rows);
}

std::vector<float> rows_warp(Kind kind, const std::vector<float>& x, const std::vector<float>& y,
                             std::size_t rows, std::size_t n, std::size_t ld, int warps) {
  const std::size_t m = n <= rd::kChunk ? 1 : (n + rd::kChunk - 1) / rd::kChunk;
  if (m > rd::kChunk) throw std::invalid_argument("rows_warp: more than 4096 chunks");
  Device d(x, y, rows);
  if (rows > 0)
    rows_warp_kernel<<<static_cast<unsigned>(rows), static_cast<unsigned>(32 * warps),
                       m * sizeof(float)>>>(kind, d.x.p, d.y.p, n, ld, d.out.p);
  return d.result(rows);
}

static std::vector<float> rng(bool gaussian, std::uint64_t seed, std::uint64_t stream,
                              std::uint64_t first, std::size_t n) {
  Device d({}, {}, n);
  if (n > 0) rng_kernel<<<blocks_for(n, 256), 256>>>(gaussian, seed, stream, first, n, d.out.p);
  return d.result(n);
}

std::vector<float> uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t first,
                           std::size_t n) {
  return rng(false, seed, stream, first, n);
}
std::vector<float> normal(std::uint64_t seed, std::uint64_t stream, std::uint64_t first,
                          std::size_t n) {
  return rng(true, seed, stream, first, n);
}

}  // namespace lockstep::test::gpu
