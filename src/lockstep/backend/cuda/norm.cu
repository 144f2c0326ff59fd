// LayerNorm and RMSNorm, forward and backward.
//
// Row work (statistics, the normalized output, the input gradient): a warp
// per row, the row's sums in the canonical chunked lane tree (canonical_warp.cuh),
// every element the CPU kernel's expression (backend/cpu/ops.cpp).
//
// Parameter gradients are column chains over the rows in ascending order
// (ops::column_sums; Math::dot_seq: acc = +0, fma, canonical NaN). The chain
// order is fixed, so the parallelism is across columns: a block owns 8
// columns; all its threads stage tiles of 256 rows × 8 columns (dy and the
// recomputed x̂, the same bits as the forward's) into shared memory, coalesced,
// the next tile's loads in flight while 8 threads run the chains over the
// current one (double-buffered).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "lockstep/backend/cuda/batched_copy.cuh"
#include "lockstep/backend/cuda/canonical_warp.cuh"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gemm_launch.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/pdl_device.cuh"
#include "lockstep/backend/cuda/pdl_launch.cuh"
#include "lockstep/backend/cuda/row_cta.cuh"
#include "lockstep/backend/cuda/pointwise_launch.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/num/elementary.hpp"
#include "lockstep/num/fp.hpp"

namespace lockstep::cuda::launch {
namespace {

using cuda::detail::warp_sum_like;
using num::fma_rn;

constexpr unsigned kRowThreads = 256;  // 8 rows (warps) per block
constexpr unsigned kRowsPerBlock = kRowThreads / 32;

template <bool FusedMutant>
__global__ void layernorm_fwd_kernel(std::size_t rows, std::size_t D, float eps, const float* x, const float* g,
                                     const float* b, float* y, float* mean, float* rstd) {
  const std::size_t row = blockIdx.x * static_cast<std::size_t>(kRowsPerBlock) + threadIdx.x / 32;
  if (row >= rows) return;  // whole warps leave together
  const unsigned lane = threadIdx.x & 31u;
  const float* xr = x + row * D;
  const float fD = static_cast<float>(D);
  const float mu = __fdiv_rn(warp_sum_like(D, [xr](float acc, std::size_t i) { return __fadd_rn(acc, xr[i]); }), fD);
  const float var = __fdiv_rn(warp_sum_like(D,
                                            [xr, mu](float acc, std::size_t i) {
                                              const float xc = __fsub_rn(xr[i], mu);
                                              return fma_rn(xc, xc, acc);
                                            }),
                              fD);
  const float rs = num::rsqrt(__fadd_rn(var, eps));
  float* yr = y + row * D;
  for (std::size_t j = lane; j < D; j += 32) {
    const float xc = __fsub_rn(xr[j], mu);
    if constexpr (FusedMutant)
      yr[j] = fma_rn(xc, __fmul_rn(rs, g[j]), b[j]);  // the mutant: xc·rs folded into the fma
    else
      yr[j] = fma_rn(__fmul_rn(xc, rs), g[j], b[j]);
  }
  if (lane == 0) {
    mean[row] = mu;
    rstd[row] = rs;
  }
}

__global__ void layernorm_bwd_rows_kernel(std::size_t rows, std::size_t D, const float* x, const float* g,
                                          const float* mean, const float* rstd, const float* dy, float* dx) {
  const std::size_t row = blockIdx.x * static_cast<std::size_t>(kRowsPerBlock) + threadIdx.x / 32;
  if (row >= rows) return;
  const unsigned lane = threadIdx.x & 31u;
  const float* xr = x + row * D;
  const float* dyr = dy + row * D;
  const float mu = mean[row], rs = rstd[row];
  const float fD = static_cast<float>(D);
  const float a =
      __fdiv_rn(warp_sum_like(D, [dyr, g](float acc, std::size_t i) { return __fadd_rn(acc, __fmul_rn(dyr[i], g[i])); }),
                fD);
  const float bb = __fdiv_rn(warp_sum_like(D,
                                           [=](float acc, std::size_t i) {
                                             const float xh = __fmul_rn(__fsub_rn(xr[i], mu), rs);
                                             return fma_rn(__fmul_rn(dyr[i], g[i]), xh, acc);
                                           }),
                             fD);
  float* dxr = dx + row * D;
  for (std::size_t j = lane; j < D; j += 32) {
    const float xh = __fmul_rn(__fsub_rn(xr[j], mu), rs);
    const float gr = __fmul_rn(dyr[j], g[j]);
    dxr[j] = __fmul_rn(__fsub_rn(gr, fma_rn(xh, bb, a)), rs);
  }
}

__global__ void rmsnorm_fwd_kernel(std::size_t rows, std::size_t D, float eps, const float* x, const float* w,
                                   float* y, float* rstd) {
  pdl::pdl_trigger();  // PDL (pdl_device.cuh): the next kernel may launch now;
  pdl::pdl_wait();     // every read and write after the wait
  const std::size_t row = blockIdx.x * static_cast<std::size_t>(kRowsPerBlock) + threadIdx.x / 32;
  if (row >= rows) return;
  const unsigned lane = threadIdx.x & 31u;
  const float* xr = x + row * D;
  const float ms = __fdiv_rn(
      warp_sum_like(D, [xr](float acc, std::size_t i) { return fma_rn(xr[i], xr[i], acc); }), static_cast<float>(D));
  const float rs = num::rsqrt(__fadd_rn(ms, eps));
  float* yr = y + row * D;
  for (std::size_t j = lane; j < D; j += 32) yr[j] = __fmul_rn(__fmul_rn(xr[j], rs), w[j]);
  if (lane == 0) rstd[row] = rs;
}

// RMSNorm forward for few rows (rmsnorm_fwd dispatches rows <= kFewRows here):
// a CTA per row. A warp per row issues its loads one at a time, each
// lane's next load waiting on the fold (80 dependent loads a lane at D = 2560:
// ~48 µs a row on the H200, latency alone). Here every thread of the CTA
// stages the row into shared memory first (16-byte loads where x is 16-byte
// aligned and D % 4 == 0, all in flight), then warp c folds 4096-chunk c in
// the canonical lane order from shared memory (lane j: elements j, j+32, ...
// of the chunk, then the shuffle-down tree: warp_sum_like's expression
// exactly), warp 0 joins the chunk partials as warp_sum_like does (lane
// k mod 32 folds partial k from +0 in order, the tree, the canonical NaN), and
// every thread writes its part of y. Same bits as rmsnorm_fwd_kernel. The
// steps are row_cta.cuh's, shared with the fused norm + quantize below.
namespace rc = cuda::detail::row_cta;
constexpr std::size_t kFewRows = rc::kFewRows;       // rows <= this: a CTA per row
constexpr unsigned kRowCtaThreads = rc::kThreads;    // 8 warps: up to 8 chunks folded at once
constexpr std::size_t kRowCtaMaxDim = rc::kMaxDim;   // the staged row: 32 KiB of dynamic shared memory

// Vec: x, w and y 16-byte aligned and D % 4 == 0 (the host checks). Blocked:
// the mutant (Mutant::rmsnorm_rows_blocked_lanes): lane j folds a contiguous
// run of the chunk instead of the strided elements j, j+32, ...
template <bool Vec, bool Blocked>
__global__ void __launch_bounds__(kRowCtaThreads)
    rmsnorm_fwd_row_cta_kernel(std::size_t D, float eps, const float* x, const float* __restrict__ w, float* y,
                               float* __restrict__ rstd) {  // y may be x: the row is staged before any write
  pdl::pdl_trigger();                          // PDL (pdl_device.cuh): the next kernel may launch now;
  pdl::pdl_prefetch_l2(w, D * sizeof(float));  // the norm weights (read-only) towards the L2;
  pdl::pdl_wait();                             // x and every write after the wait
  extern __shared__ float4 row_smem[];
  __shared__ float partial[rc::kWarps * 4];  // chunk partials (D <= 12288: 3 chunks)
  __shared__ float s_rs;
  const std::size_t row = blockIdx.x;
  const unsigned tid = threadIdx.x;
  rc::stage_row<Vec>(x + row * D, D, row_smem, [](float) {});
  __syncthreads();
  const float rs = rc::rms_rstd<Blocked>(reinterpret_cast<const float*>(row_smem), D, eps, partial, &s_rs);
  if (tid == 0) rstd[row] = rs;
  float* yr = y + row * D;
  if constexpr (Vec) {
    const float4* w4 = reinterpret_cast<const float4*>(w);
    float4* y4 = reinterpret_cast<float4*>(yr);
#pragma unroll 4
    for (std::size_t v = tid; v < D / 4; v += kRowCtaThreads) y4[v] = rc::rms_scaled(row_smem[v], rs, w4[v]);
  } else {
    const float* xs = reinterpret_cast<const float*>(row_smem);
#pragma unroll 4
    for (std::size_t j = tid; j < D; j += kRowCtaThreads) yr[j] = rc::rms_scaled(xs[j], rs, w[j]);
  }
}

// RMSNorm + the int8 row codes of its output, fused (rmsnorm_quantize_i8): a
// CTA a row stages x, takes rs as the CTA kernel above does, computes y
// = (x·rs)·w into global memory and over its staged x (each thread its own
// elements, folding |y| into its max on the way), joins the max over the CTA
// as row_quantize_i8's CTA path does, and writes the codes of its y values
// and the row's step: the two kernels' steps (row_cta.cuh: norm_quantize_staged) in their order,
// so rmsnorm_fwd's y and rstd and row_quantize_i8's codes and step of that y,
// bit for bit, in one launch and one read of x. StaleRow: the mutant
// (Mutant::norm_quantize_stale_row): y is not written back over the staged
// row, so the codes are those of x.
template <bool Vec, bool StaleRow>
__global__ void __launch_bounds__(kRowCtaThreads)
    rmsnorm_quantize_row_cta_kernel(std::size_t D, float eps, const float* x, const float* __restrict__ w, float* y,
                                    float* __restrict__ rstd, float floor_x, std::int8_t* __restrict__ codes,
                                    float* __restrict__ step) {  // y may be x: the row is staged before any write
  extern __shared__ float4 row_smem[];
  __shared__ float partial[rc::kWarps * 4];
  __shared__ float s_rs;
  __shared__ std::int32_t s_key[rc::kWarps];
  __shared__ std::uint32_t s_mag[rc::kWarps];
  pdl::pdl_trigger();                          // PDL (pdl_device.cuh): the next kernel may launch now;
  pdl::pdl_prefetch_l2(w, D * sizeof(float));  // the norm weights (read-only) towards the L2;
  pdl::pdl_wait();                             // x and every write after the wait
  const std::size_t row = blockIdx.x;
  rc::stage_row<Vec>(x + row * D, D, row_smem, [](float) {});
  __syncthreads();
  rc::norm_quantize_staged<Vec, StaleRow>(row_smem, D, eps, w, y + row * D, rstd + row, floor_x, codes + row * D,
                                          step + row, partial, &s_rs, s_key, s_mag);
}

__global__ void rmsnorm_bwd_rows_kernel(std::size_t rows, std::size_t D, const float* x, const float* w,
                                        const float* rstd, const float* dy, float* dx) {
  const std::size_t row = blockIdx.x * static_cast<std::size_t>(kRowsPerBlock) + threadIdx.x / 32;
  if (row >= rows) return;
  const unsigned lane = threadIdx.x & 31u;
  const float* xr = x + row * D;
  const float* dyr = dy + row * D;
  const float rs = rstd[row];
  const float bb = __fdiv_rn(warp_sum_like(D,
                                           [=](float acc, std::size_t i) {
                                             return fma_rn(__fmul_rn(dyr[i], w[i]), __fmul_rn(xr[i], rs), acc);
                                           }),
                             static_cast<float>(D));
  float* dxr = dx + row * D;
  for (std::size_t j = lane; j < D; j += 32) {
    const float xh = __fmul_rn(xr[j], rs);
    const float gr = __fmul_rn(dyr[j], w[j]);
    dxr[j] = __fmul_rn(__fsub_rn(gr, __fmul_rn(xh, bb)), rs);
  }
}

// Column chains. LayerNorm (Layer = true): dg[j] = dot_seq over rows of
// dy·x̂ with x̂ = (x - mean)·rstd, db[j] = +0 + dy[0, j] + dy[1, j] + ...;
// RMSNorm: dg[j] = dot_seq of dy·(x·rstd).
//
// A block owns kCols columns. Shared memory holds two tiles of kTileRows rows
// (double buffer). Each step: every thread issues its loads of the next tile
// into registers; lanes 0..kCols-1 of warp 0 run their column's chains over
// the current tile (one thread carries both of LayerNorm's chains, so no warp
// diverges); then every thread turns its registers into x̂ and stores them in
// the other buffer; one barrier. The loads' latency hides behind the chains.
constexpr unsigned kColThreads = 256;
constexpr unsigned kCols = 8;                                     // columns per block
constexpr unsigned kTileRows = 256;                               // rows per staged tile
constexpr unsigned kRowStride = kColThreads / kCols;              // 32 rows apart per thread
constexpr unsigned kPerThread = kTileRows / kRowStride;           // 8 cells per array per thread

template <bool Layer>
__global__ void __launch_bounds__(kColThreads) norm_columns_kernel(std::size_t N, std::size_t D, const float* x,
                                                                   const float* mean, const float* rstd,
                                                                   const float* dy, float* dg, float* db) {
  __shared__ float s_dy[2][kTileRows][kCols];
  __shared__ float s_xh[2][kTileRows][kCols];
  const unsigned tid = threadIdx.x;
  const std::size_t col0 = static_cast<std::size_t>(blockIdx.x) * kCols;
  const unsigned c = tid % kCols;
  const std::size_t col = col0 + c;
  const bool col_ok = col < D;
  const unsigned r0 = tid / kCols;  // this thread stages rows r0 + kRowStride·k of a tile
  float r_dy[kPerThread], r_x[kPerThread], r_mean[kPerThread], r_rstd[kPerThread];
  auto load = [&](std::size_t tile_base) {
#pragma unroll
    for (unsigned k = 0; k < kPerThread; ++k) {
      const std::size_t n = tile_base + r0 + k * kRowStride;
      const bool ok = col_ok && n < N;
      const std::size_t idx = n * D + col;
      r_dy[k] = ok ? dy[idx] : 0.0f;
      r_x[k] = ok ? x[idx] : 0.0f;
      r_rstd[k] = ok ? rstd[n] : 0.0f;
      if constexpr (Layer) r_mean[k] = ok ? mean[n] : 0.0f;
    }
  };
  auto store = [&](unsigned buf) {
#pragma unroll
    for (unsigned k = 0; k < kPerThread; ++k) {
      const unsigned r = r0 + k * kRowStride;
      s_dy[buf][r][c] = r_dy[k];
      if constexpr (Layer)
        s_xh[buf][r][c] = __fmul_rn(__fsub_rn(r_x[k], r_mean[k]), r_rstd[k]);
      else
        s_xh[buf][r][c] = __fmul_rn(r_x[k], r_rstd[k]);
    }
  };
  const bool chain = tid < kCols;  // lanes 0..7 of warp 0
  float acc_g = 0.0f, acc_b = 0.0f;
  load(0);
  store(0);
  __syncthreads();
  unsigned buf = 0;
  for (std::size_t base = 0; base < N; base += kTileRows) {
    const bool more = base + kTileRows < N;
    if (more) load(base + kTileRows);  // in flight during the chains
    if (chain) {
      const unsigned len = static_cast<unsigned>(N - base < kTileRows ? N - base : kTileRows);
      const float(*tdy)[kCols] = s_dy[buf];
      const float(*txh)[kCols] = s_xh[buf];
#pragma unroll 16
      for (unsigned r = 0; r < len; ++r) {
        const float d = tdy[r][tid];
        acc_g = fma_rn(d, txh[r][tid], acc_g);
        if constexpr (Layer) acc_b = __fadd_rn(acc_b, d);
      }
    }
    if (more) store(buf ^ 1u);  // the other buffer: no one reads it during this step
    __syncthreads();
    buf ^= 1u;
  }
  if (chain && col_ok) {
    dg[col] = num::reduce::canonical_nan(acc_g);
    if constexpr (Layer) db[col] = acc_b;
  }
}

unsigned row_blocks(std::size_t rows) {
  const std::size_t b = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  if (b > 0x7FFFFFFFu) throw std::invalid_argument("norm: too many rows");
  return static_cast<unsigned>(b);
}

void check_dim(std::size_t D) {
  if (D > num::reduce::kChunk * num::reduce::kChunk)
    throw std::invalid_argument("norm: rows longer than 4096² elements are not supported on the device");
}

template <bool Layer>
void columns(std::size_t N, std::size_t D, const float* x, const float* mean, const float* rstd, const float* dy,
             float* dg, float* db) {
  const std::size_t blocks = (D + kCols - 1) / kCols;
  trace::launched(Layer ? "layernorm_bwd (columns)" : "rmsnorm_bwd (columns)");
  norm_columns_kernel<Layer><<<static_cast<unsigned>(blocks), kColThreads>>>(N, D, x, mean, rstd, dy, dg, db);
  check_launch(Layer ? "layernorm_bwd (columns)" : "rmsnorm_bwd (columns)");
}

}  // namespace

void layernorm_fwd(std::size_t rows, std::size_t dim, float eps, const float* x, const float* g, const float* b,
                   float* y, float* mean, float* rstd) {
  check_dim(dim);
  if (rows == 0) return;
  const bool mutated = mutant() == Mutant::layernorm_fused_mul_add;
  trace::launched(mutated ? "layernorm_fwd (mutant)" : "layernorm_fwd");
  if (mutated)
    layernorm_fwd_kernel<true><<<row_blocks(rows), kRowThreads>>>(rows, dim, eps, x, g, b, y, mean, rstd);
  else
    layernorm_fwd_kernel<false><<<row_blocks(rows), kRowThreads>>>(rows, dim, eps, x, g, b, y, mean, rstd);
  check_launch("layernorm_fwd");
}

void layernorm_bwd(std::size_t rows, std::size_t dim, const float* x, const float* g, const float* mean,
                   const float* rstd, const float* dy, float* dx, float* dg, float* db) {
  check_dim(dim);
  if (rows > 0) {
    trace::launched("layernorm_bwd (rows)");
    layernorm_bwd_rows_kernel<<<row_blocks(rows), kRowThreads>>>(rows, dim, x, g, mean, rstd, dy, dx);
    check_launch("layernorm_bwd (rows)");
  }
  if (dim > 0) columns<true>(rows, dim, x, mean, rstd, dy, dg, db);
}

void rmsnorm_fwd(std::size_t rows, std::size_t dim, float eps, const float* x, const float* w, float* y,
                 float* rstd) {
  check_dim(dim);
  if (rows == 0) return;
  if (rows <= kFewRows && dim <= kRowCtaMaxDim) {
    const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    const bool vec = dim % 4 == 0 && aligned(x) && aligned(w) && aligned(y);
    const bool blocked = mutant() == Mutant::rmsnorm_rows_blocked_lanes;
    const std::size_t smem = (dim + 3) / 4 * sizeof(float4);
    const unsigned grid = static_cast<unsigned>(rows);
    trace::launched(blocked ? "rmsnorm_fwd (a CTA a row, mutant)"
                            : vec ? "rmsnorm_fwd (a CTA a row, 16-byte)" : "rmsnorm_fwd (a CTA a row)");
    const auto kernel = blocked ? rmsnorm_fwd_row_cta_kernel<false, true>
                        : vec   ? rmsnorm_fwd_row_cta_kernel<true, false>
                                : rmsnorm_fwd_row_cta_kernel<false, false>;
    cuda::detail::launch_decode(kernel, dim3(grid), dim3(kRowCtaThreads), smem, dim, eps, x, w, y,
                                rstd);  // PDL unless LOCKSTEP_DECODE_PDL=0
    check_launch("rmsnorm_fwd (a CTA a row)");
    return;
  }
  trace::launched("rmsnorm_fwd");
  cuda::detail::launch_decode(rmsnorm_fwd_kernel, dim3(row_blocks(rows)), dim3(kRowThreads), 0, rows, dim, eps, x, w,
                              y, rstd);  // PDL unless LOCKSTEP_DECODE_PDL=0
  check_launch("rmsnorm_fwd");
}

namespace {
std::atomic<int> g_decode_fusion{-1};
}  // namespace

bool decode_fusion() {
  const int set = g_decode_fusion.load();
  if (set >= 0) return set != 0;
  static const bool env_on = [] {  // read once: the launchers ask several hundred times a pass
    const char* env = std::getenv("LOCKSTEP_DECODE_FUSION");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return env_on;
}
void set_decode_fusion(int on) { g_decode_fusion.store(on < 0 ? -1 : (on != 0 ? 1 : 0)); }

bool rmsnorm_quantize_fused(std::size_t rows, std::size_t dim) {
  return rows > 0 && rows <= kFewRows && dim <= kRowCtaMaxDim;
}

void rmsnorm_quantize_i8(std::size_t rows, std::size_t dim, float eps, const float* x, const float* w, float* y,
                         float* rstd, float floor_x, std::int8_t* codes, float* step) {
  check_dim(dim);
  if (rows == 0) return;
  if (!rmsnorm_quantize_fused(rows, dim)) {  // the two kernels, one after the other: the same bits
    rmsnorm_fwd(rows, dim, eps, x, w, y, rstd);
    row_quantize_i8(y, rows, dim, floor_x, codes, step, nullptr);
    return;
  }
  const auto aligned = [](const void* p, std::uintptr_t a) { return reinterpret_cast<std::uintptr_t>(p) % a == 0; };
  const bool vec = dim % 4 == 0 && aligned(x, 16) && aligned(w, 16) && aligned(y, 16) && aligned(codes, 4);
  const bool stale = mutant() == Mutant::norm_quantize_stale_row;
  const std::size_t smem = (dim + 3) / 4 * sizeof(float4);
  const unsigned grid = static_cast<unsigned>(rows);
  trace::launched(stale ? "rmsnorm_quantize_i8 (a CTA a row, mutant)"
                        : vec ? "rmsnorm_quantize_i8 (a CTA a row, 16-byte)" : "rmsnorm_quantize_i8 (a CTA a row)");
  const auto kernel = stale ? rmsnorm_quantize_row_cta_kernel<false, true>
                      : vec ? rmsnorm_quantize_row_cta_kernel<true, false>
                            : rmsnorm_quantize_row_cta_kernel<false, false>;
  cuda::detail::launch_decode(kernel, dim3(grid), dim3(kRowCtaThreads), smem, dim, eps, x, w, y, rstd, floor_x,
                              codes, step);  // PDL unless LOCKSTEP_DECODE_PDL=0
  check_launch("rmsnorm_quantize_i8 (a CTA a row)");
}

void rmsnorm_bwd(std::size_t rows, std::size_t dim, const float* x, const float* w, const float* rstd,
                 const float* dy, float* dx, float* dw) {
  check_dim(dim);
  if (rows > 0) {
    trace::launched("rmsnorm_bwd (rows)");
    rmsnorm_bwd_rows_kernel<<<row_blocks(rows), kRowThreads>>>(rows, dim, x, w, rstd, dy, dx);
    check_launch("rmsnorm_bwd (rows)");
  }
  if (dim > 0) columns<false>(rows, dim, x, nullptr, rstd, dy, dw, nullptr);
}

}  // namespace lockstep::cuda::launch
