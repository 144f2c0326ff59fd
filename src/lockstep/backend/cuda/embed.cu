// Token and position embeddings, forward and backward.
//
// The token-embedding backward is a scatter-add whose chains are fixed:
// dwte[v, :] = +0 + dy[n1, :] + dy[n2, :] + ... over the tokens with id v in
// ascending n (ops::Embedding::backward). The device sorts (id, n) pairs with
// a stable radix sort (CUB; a stable sort of pairs given in ascending n keeps
// equal ids in ascending n), marks where each id's run starts and ends,
// and runs one chain per (vocabulary row, column): a block per row, a thread
// per column (coalesced dy rows), the run's token indices staged in shared
// memory and each chain's loads issued 8 ahead. No atomics: the bits are those of the CPU's chains.
#include <cub/device/device_radix_sort.cuh>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "lockstep/backend/cuda/canonical_warp.cuh"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/pdl_device.cuh"
#include "lockstep/backend/cuda/pointwise_launch.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"

namespace lockstep::cuda::launch {
namespace {

__global__ void embedding_fwd_kernel(std::size_t tokens, std::size_t vocab, std::size_t dim, const Index* ids,
                                     const float* wte, float* y) {
  // PDL (pdl_device.cuh): the first kernel of a decode pass, launched plainly (everything before the pass,
  // the weights' writers included, has completed); it lets the next kernel launch now. (The wait is a no-op
  // after a plain launch; it keeps the kernel right if it is ever launched programmatically.)
  pdl::pdl_trigger();
  pdl::pdl_wait();
  for (std::size_t n = blockIdx.x; n < tokens; n += gridDim.x) {
    const Index id = ids[n];
    const bool ok = id >= 0 && static_cast<std::size_t>(id) < vocab;
    const float* row = wte + (ok ? static_cast<std::size_t>(id) : 0) * dim;
    float* out = y + n * dim;
    for (std::size_t d = threadIdx.x; d < dim; d += blockDim.x)
      out[d] = ok ? row[d] : num::float_of(num::reduce::kCanonicalNaN);
  }
}

// keys = id (out-of-range ids: the sentinel V, sorted last and skipped), values = n.
__global__ void embedding_keys_kernel(std::size_t tokens, std::size_t vocab, const Index* ids, int* keys,
                                      int* vals) {
  for (std::size_t n = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; n < tokens;
       n += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const Index id = ids[n];
    keys[n] = id >= 0 && static_cast<std::size_t>(id) < vocab ? id : static_cast<int>(vocab);
    vals[n] = static_cast<int>(n);
  }
}

__global__ void fill_int_kernel(std::size_t n, int* p, int v) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] = v;
}

// first[v], end[v]: the sorted positions where id v's run starts and ends.
__global__ void embedding_heads_kernel(std::size_t tokens, std::size_t vocab, const int* keys, int* first,
                                       int* end) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < tokens;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int k = keys[i];
    if (static_cast<std::size_t>(k) >= vocab) continue;
    if (i == 0 || keys[i - 1] != k) first[k] = static_cast<int>(i);
    if (i + 1 == tokens || keys[i + 1] != k) end[k] = static_cast<int>(i + 1);
  }
}

// A block per vocabulary row, a thread per column (blockDim >= dim up to
// 1024, else a loop). The run's token indices are staged in shared memory
// kStage at a time; each column's chain adds them in order, its loads issued
// kAhead at a time (they do not depend on the chain).
constexpr unsigned kStage = 256;
constexpr unsigned kAhead = 8;

__global__ void embedding_rows_kernel(std::size_t vocab, std::size_t dim, const int* vals, const int* first,
                                      const int* end, const float* dy, float* dwte) {
  __shared__ int s_vals[kStage];
  for (std::size_t v = blockIdx.x; v < vocab; v += gridDim.x) {
    const int s = first[v];
    const int count = s >= 0 ? end[v] - s : 0;
    float* out = dwte + v * dim;
    for (std::size_t d0 = 0; d0 < dim; d0 += blockDim.x) {
      const std::size_t d = d0 + threadIdx.x;
      const bool active = d < dim;
      float acc = 0.0f;
      for (int c0 = 0; c0 < count; c0 += static_cast<int>(kStage)) {
        const int len = count - c0 < static_cast<int>(kStage) ? count - c0 : static_cast<int>(kStage);
        __syncthreads();  // the last stage's readers are done
        for (int i = static_cast<int>(threadIdx.x); i < len; i += static_cast<int>(blockDim.x))
          s_vals[i] = vals[s + c0 + i];
        __syncthreads();
        if (active) {
          int i = 0;
          for (; i + static_cast<int>(kAhead) <= len; i += static_cast<int>(kAhead)) {
            float g[kAhead];
#pragma unroll
            for (unsigned u = 0; u < kAhead; ++u) g[u] = dy[static_cast<std::size_t>(s_vals[i + static_cast<int>(u)]) * dim + d];
#pragma unroll
            for (unsigned u = 0; u < kAhead; ++u) acc = __fadd_rn(acc, g[u]);
          }
          for (; i < len; ++i) acc = __fadd_rn(acc, dy[static_cast<std::size_t>(s_vals[i]) * dim + d]);
        }
      }
      if (active) out[d] = acc;
    }
  }
}

__global__ void positions_fwd_kernel(std::size_t rows, std::size_t seq, std::size_t dim, std::size_t offset,
                                     const float* x, const float* wpe, float* y) {
  for (std::size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* p = wpe + (offset + r % seq) * dim;
    for (std::size_t d = threadIdx.x; d < dim; d += blockDim.x) y[r * dim + d] = __fadd_rn(x[r * dim + d], p[d]);
  }
}

// One thread per (wpe row, column): the chain over b, or +0 off [offset, offset + seq).
__global__ void positions_bwd_kernel(std::size_t batch, std::size_t seq, std::size_t dim, std::size_t max_seq,
                                     std::size_t offset, const float* dy, float* dwpe) {
  const std::size_t total = max_seq * dim;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t p = i / dim, d = i % dim;
    float acc = 0.0f;
    if (p >= offset && p < offset + seq) {
      const std::size_t t = p - offset;
      for (std::size_t b = 0; b < batch; ++b) acc = __fadd_rn(acc, dy[(b * seq + t) * dim + d]);
    }
    dwpe[i] = acc;
  }
}

constexpr std::size_t kAlign = 256;
std::size_t align_up(std::size_t b) { return (b + kAlign - 1) / kAlign * kAlign; }

int key_bits(std::size_t vocab) {  // keys lie in [0, vocab]
  int bits = 1;
  while (bits < 31 && (std::size_t{1} << bits) <= vocab) ++bits;
  return bits;
}

std::size_t cub_bytes(std::size_t tokens, std::size_t vocab) {
  std::size_t bytes = 0;
  const cudaError_t e = cub::DeviceRadixSort::SortPairs<int, int>(nullptr, bytes, nullptr, nullptr, nullptr, nullptr,
                                                                  static_cast<int>(tokens), 0, key_bits(vocab));
  if (e != cudaSuccess) throw std::runtime_error(std::string("embedding_bwd: CUB sizing: ") + cudaGetErrorString(e));
  return bytes;
}

unsigned rows_grid(std::size_t rows) { return static_cast<unsigned>(rows < 65536 * 16 ? (rows ? rows : 1) : 65536 * 16); }
unsigned dim_threads(std::size_t dim) { return dim >= 256 ? 256 : (dim > 64 ? 128 : 64); }

}  // namespace

void embedding_fwd(std::size_t tokens, std::size_t vocab, std::size_t dim, const Index* ids, const float* wte,
                   float* y) {
  if (tokens == 0 || dim == 0) return;
  trace::launched("embedding_fwd");
  embedding_fwd_kernel<<<rows_grid(tokens), dim_threads(dim)>>>(tokens, vocab, dim, ids, wte, y);
  check_launch("embedding_fwd");
}

std::size_t embedding_bwd_scratch_bytes(std::size_t tokens, std::size_t vocab) {
  return 4 * align_up(tokens * sizeof(int)) + 2 * align_up(vocab * sizeof(int)) + align_up(cub_bytes(tokens, vocab));
}

void embedding_bwd(std::size_t tokens, std::size_t vocab, std::size_t dim, const Index* ids, const float* dy,
                   float* dwte, void* scratch, std::size_t scratch_bytes) {
  if (tokens > 0x7FFFFFFF || vocab >= 0x7FFFFFFF) throw std::invalid_argument("embedding_bwd: too many tokens/ids");
  if (vocab == 0 || dim == 0) return;
  if (scratch_bytes < embedding_bwd_scratch_bytes(tokens, vocab))
    throw std::invalid_argument("embedding_bwd: scratch too small");
  auto* base = static_cast<unsigned char*>(scratch);
  const std::size_t tb = align_up(tokens * sizeof(int));
  int* keys_in = reinterpret_cast<int*>(base);
  int* vals_in = reinterpret_cast<int*>(base + tb);
  int* keys = reinterpret_cast<int*>(base + 2 * tb);
  int* vals = reinterpret_cast<int*>(base + 3 * tb);
  const std::size_t vb = align_up(vocab * sizeof(int));
  int* first = reinterpret_cast<int*>(base + 4 * tb);
  int* end = reinterpret_cast<int*>(base + 4 * tb + vb);
  void* temp = base + 4 * tb + 2 * vb;
  trace::launched("embedding_bwd (fill)");
  fill_int_kernel<<<detail::blocks_for(vocab, 256, 4096), 256>>>(vocab, first, -1);
  check_launch("embedding_bwd (fill)");
  if (tokens > 0) {
    trace::launched("embedding_bwd (keys)");
    embedding_keys_kernel<<<detail::blocks_for(tokens, 256, 4096), 256>>>(tokens, vocab, ids, keys_in, vals_in);
    check_launch("embedding_bwd (keys)");
    std::size_t temp_bytes = cub_bytes(tokens, vocab);
    trace::launched("embedding_bwd (CUB radix sort)");
    const cudaError_t e = cub::DeviceRadixSort::SortPairs<int, int>(temp, temp_bytes, keys_in, keys, vals_in, vals,
                                                                    static_cast<int>(tokens), 0, key_bits(vocab));
    if (e != cudaSuccess) throw std::runtime_error(std::string("embedding_bwd: sort: ") + cudaGetErrorString(e));
    trace::launched("embedding_bwd (heads)");
    embedding_heads_kernel<<<detail::blocks_for(tokens, 256, 4096), 256>>>(tokens, vocab, keys, first, end);
    check_launch("embedding_bwd (heads)");
  }
  const unsigned threads = static_cast<unsigned>(dim >= 1024 ? 1024 : (dim + 31) / 32 * 32);
  trace::launched("embedding_bwd (rows)");
  embedding_rows_kernel<<<rows_grid(vocab), threads>>>(vocab, dim, vals, first, end, dy, dwte);
  check_launch("embedding_bwd (rows)");
}

void positions_fwd(std::size_t batch, std::size_t seq, std::size_t dim, std::size_t offset, const float* x,
                   const float* wpe, float* y) {
  const std::size_t rows = batch * seq;
  if (rows == 0 || dim == 0) return;
  trace::launched("positions_fwd");
  positions_fwd_kernel<<<rows_grid(rows), dim_threads(dim)>>>(rows, seq, dim, offset, x, wpe, y);
  check_launch("positions_fwd");
}

void positions_bwd_wpe(std::size_t batch, std::size_t seq, std::size_t dim, std::size_t max_seq,
                       std::size_t offset, const float* dy, float* dwpe) {
  const std::size_t total = max_seq * dim;
  if (total == 0) return;
  trace::launched("positions_bwd");
  positions_bwd_kernel<<<detail::blocks_for(total, 256, 132 * 64), 256>>>(batch, seq, dim, max_seq, offset, dy,
                                                                          dwpe);
  check_launch("positions_bwd");
}

}  // namespace lockstep::cuda::launch
