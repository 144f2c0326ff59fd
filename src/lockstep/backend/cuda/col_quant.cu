// The two-pass column quantizer (col_quant_launch.hpp): the expressions of
// ops::quantize_cols as cpu units::quantize_cols_i8 computes them, and the
// bias gradient's column sums of ops::column_sums, each step one correctly
// rounded operation written with the explicit intrinsics.
//
// Why two passes and not three: quant.cu's col_quantize_i8 reads the matrix
// for the chunk maxima, then walks the maxima with one thread per column (a
// latency-bound launch of cols/256 blocks: 2.9 ms of the 129 ms GPT-2 step),
// then reads the matrix again for the codes. Here every pass-2 block joins the
// chunk summaries of its own 32 columns (a few KB from L2 against the 64 KB of
// x it quantizes), so the steps need no launch of their own. A single pass
// would have to hold a column strip of every row on chip (16384 rows × 8
// columns = 512 KB: more than an SM has), so x is read twice.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "lockstep/backend/cuda/col_fold.hpp"
#include "lockstep/backend/cuda/col_quant_launch.hpp"
#include "lockstep/backend/cuda/cp_async.cuh"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"

namespace lockstep::cuda::launch {
namespace {

using colfold::Summary;

constexpr std::size_t kColChunkRows = 512;  // pass 1: rows per chunk (8 warps × 64 rows)
constexpr int kWarpRows = 64;
constexpr int kCodeRows = 128;   // pass 2: rows per tile in shared memory
constexpr int kCodeTiles = 4;    // pass 2: tiles per block (512 rows)
constexpr int kSumCols = 8;      // with sums: columns per block (one chain thread each)
constexpr int kSumTileRows = 256, kSumStages = 4;  // 4 × 256 × 8 floats = 32 KB in flight per block
constexpr std::uint32_t kEmpty = 2u;  // a segment summary's NaN flag: no rows (skipped, never joined)

__device__ __forceinline__ float min2(float a, float b) { return a < b ? a : b; }  // ops::min2

using ::lockstep::cuda::detail::cp_async4;
using ::lockstep::cuda::detail::cp_async_commit;
using ::lockstep::cuda::detail::cp_async_wait;

// Pass 1 without sums: block (strip of 32 columns, chunk c of 512 rows); warp
// w folds rows [64w, 64w + 64) of the chunk in order, then warp 0 joins the 8
// warp summaries in order: partial[c * cols + j], has_nan[c * cols + j].
__global__ void __launch_bounds__(256) chunk_maxima(const float* __restrict__ x, std::size_t rows, std::size_t cols,
                                                    float* __restrict__ partial, std::uint32_t* __restrict__ has_nan) {
  __shared__ float s_val[8][32];
  __shared__ std::uint32_t s_nan[8][32];
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::size_t j = static_cast<std::size_t>(blockIdx.x) * 32 + lane;
  const std::size_t c = blockIdx.y;
  const std::size_t w0 = c * kColChunkRows + static_cast<std::size_t>(warp) * kWarpRows;
  const std::size_t w1 = w0 + kWarpRows < rows ? w0 + kWarpRows : rows;
  Summary s{0.0f, false};
  if (j < cols && w0 < rows) {
    const float* xc = x + j;
    std::size_t n = w0;
    for (; n + 8 <= w1; n += 8) {  // eight loads in flight, then their fold in row order
      float v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) v[u] = xc[(n + u) * cols];
#pragma unroll
      for (int u = 0; u < 8; ++u) colfold::fold(s, v[u]);
    }
    for (; n < w1; ++n) colfold::fold(s, xc[n * cols]);
  }
  s_val[warp][lane] = s.value;
  s_nan[warp][lane] = w0 < rows ? (s.nan ? 1u : 0u) : kEmpty;
  __syncthreads();
  if (warp != 0 || j >= cols) return;
  Summary t{s_val[0][lane], s_nan[0][lane] == 1u};  // warp 0's rows exist: the chunk starts below rows
  for (int w = 1; w < 8; ++w) {
    if (s_nan[w][lane] == kEmpty) break;  // this warp's rows and every later one's lie past the end
    t = colfold::join(t, Summary{s_val[w][lane], s_nan[w][lane] == 1u});
  }
  partial[c * cols + j] = t.value;
  has_nan[c * cols + j] = t.nan ? 1u : 0u;
}

// Pass 1 with sums, the session-7 kernel ("v1", LOCKSTEP_COL_SUMS=v1; the
// default is col_quant_sums.cu's tiled kernel, the same bits): block of 8
// whole columns; every thread stages tiles of
// 256 rows × 8 columns into a ring of 4 shared buffers with cp.async, and
// threads 0..7 (one per column) run the column's sum chain over every row in
// order, sum = sum + x[n, j] from +0, and its absmax fold. On a full tile the
// fold runs as 4 contiguous segments of 64 rows joined in order (col_fold.hpp),
// so its compare-select chain is a quarter as long as the sum's add chain.
// One summary per column (chunk count 1): partial[j], has_nan[j], sums[j].
__global__ void __launch_bounds__(256) strip_maxima_sums(const float* __restrict__ x, int rows, int cols,
                                                         float* __restrict__ partial,
                                                         std::uint32_t* __restrict__ has_nan,
                                                         float* __restrict__ sums, int planted) {
  __shared__ float tile[kSumStages][kSumTileRows][kSumCols];
  const int t = static_cast<int>(threadIdx.x);
  const int j0 = static_cast<int>(blockIdx.x) * kSumCols;
  const int tiles = (rows + kSumTileRows - 1) / kSumTileRows;
  const int lc = t & (kSumCols - 1), lr = t / kSumCols;  // this thread stages column lc, rows lr, lr + 32, ...
  // Tile tt into buffer tt % kSumStages; one commit group per tile, empty past
  // the end, so the group count is uniform.
  const auto issue = [&](int tt) {
    if (tt < tiles && j0 + lc < cols) {
      const int n0 = tt * kSumTileRows;
      float(*buf)[kSumCols] = tile[tt % kSumStages];
      for (int r = lr; r < kSumTileRows; r += 256 / kSumCols)
        if (n0 + r < rows) cp_async4(&buf[r][lc], x + static_cast<std::size_t>(n0 + r) * cols + j0 + lc);
    }
    cp_async_commit();
  };
  for (int tt = 0; tt < kSumStages - 1; ++tt) issue(tt);
  float sum = 0.0f;
  Summary run{0.0f, false};
  const bool chain = t < kSumCols;
  for (int tt = 0; tt < tiles; ++tt) {
    issue(tt + kSumStages - 1);  // into the buffer tile tt - 1 used: every thread left it at the last barrier
    cp_async_wait<kSumStages - 1>();
    __syncthreads();
    if (chain) {
      const float(*buf)[kSumCols] = tile[tt % kSumStages];
      const int in = rows - tt * kSumTileRows < kSumTileRows ? rows - tt * kSumTileRows : kSumTileRows;
      if (in == kSumTileRows) {
        Summary seg[4] = {{0.0f, false}, {0.0f, false}, {0.0f, false}, {0.0f, false}};
#pragma unroll 4
        for (int i = 0; i < kSumTileRows / 4; ++i) {
          const float a0 = buf[4 * i][t], a1 = buf[4 * i + 1][t], a2 = buf[4 * i + 2][t], a3 = buf[4 * i + 3][t];
          if (planted == kColQuantSumsInPairs) {
            sum = __fadd_rn(sum, __fadd_rn(a0, a1));
            sum = __fadd_rn(sum, __fadd_rn(a2, a3));
          } else {
            sum = __fadd_rn(sum, a0);
            sum = __fadd_rn(sum, a1);
            sum = __fadd_rn(sum, a2);
            sum = __fadd_rn(sum, a3);
          }
#pragma unroll
          for (int g = 0; g < 4; ++g) colfold::fold(seg[g], buf[g * (kSumTileRows / 4) + i][t]);
        }
#pragma unroll
        for (int g = 0; g < 4; ++g) run = colfold::join(run, seg[g]);
      } else {
        for (int r = 0; r < in; ++r) {
          const float v = buf[r][t];
          sum = __fadd_rn(sum, v);
          colfold::fold(run, v);
        }
      }
    }
    __syncthreads();
  }
  cp_async_wait<0>();  // the empty groups past the end
  if (chain && j0 + t < cols) {
    const int j = j0 + t;
    partial[j] = run.value;
    has_nan[j] = run.nan ? 1u : 0u;
    sums[j] = sum;
  }
}

// Pass 2 ("v1", LOCKSTEP_COL_CODES=v1; v2, the default, is col_quant_codes.cu's,
// the same bits with the loads overlapped): block (strip of 32 columns, 512 rows). The chunks' summaries of the
// strip, joined in row order from the fold's start (+0): warp w joins a
// contiguous run of chunks, warp 0 the 8 runs. Then m = max2(fold, floor_x),
// inv = 127 / m, step[j] = m / 127 (written by the blocks of the first rows),
// and the codes of 4 tiles of 128 rows, transposed through shared memory
// (row stride 132 bytes: the lanes' byte stores fall in distinct banks) and
// stored 4 rows to a word where the column's run of codes is word-aligned.
__global__ void __launch_bounds__(256) codes_2p(const float* __restrict__ x, std::size_t rows, std::size_t cols,
                                                std::size_t chunks, const float* __restrict__ partial,
                                                const std::uint32_t* __restrict__ has_nan, float floor_x,
                                                float* __restrict__ step, std::int8_t* __restrict__ codes,
                                                int planted) {
  __shared__ float s_val[8][32];
  __shared__ std::uint32_t s_nan[8][32];
  __shared__ float s_inv[32];
  __shared__ __align__(4) std::int8_t tile[32][kCodeRows + 4];
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::size_t strip = static_cast<std::size_t>(blockIdx.x) * 32, j = strip + lane;
  const std::size_t used = planted == kColQuantLastChunkDropped && chunks > 1 ? chunks - 1 : chunks;
  const std::size_t per = (used + 7) / 8, c0 = warp * per, c1 = c0 + per < used ? c0 + per : used;
  Summary s{0.0f, false};
  bool any = false;
  if (j < cols)
    for (std::size_t c = c0; c < c1; ++c) {
      const Summary p{partial[c * cols + j], has_nan[c * cols + j] != 0u};
      s = any ? colfold::join(s, p) : p;
      any = true;
    }
  s_val[warp][lane] = s.value;
  s_nan[warp][lane] = any ? (s.nan ? 1u : 0u) : kEmpty;
  __syncthreads();
  if (warp == 0) {
    Summary t{0.0f, false};  // the fold's start
    for (int w = 0; w < 8; ++w)
      if (s_nan[w][lane] != kEmpty) t = colfold::join(t, Summary{s_val[w][lane], s_nan[w][lane] == 1u});
    const float m = colfold::max2(t.value, floor_x);
    s_inv[lane] = __fdiv_rn(127.0f, m);
    if (blockIdx.y == 0 && j < cols) step[j] = __fdiv_rn(m, 127.0f);
  }
  __syncthreads();
  const float inv = s_inv[lane];
  for (int sub = 0; sub < kCodeTiles; ++sub) {
    const std::size_t n0 = (static_cast<std::size_t>(blockIdx.y) * kCodeTiles + sub) * kCodeRows;
    if (n0 >= rows) break;  // the same for every thread of the block
#pragma unroll
    for (int i = 0; i < kCodeRows / 8; ++i) {
      const int r = static_cast<int>(warp) + 8 * i;
      const std::size_t n = n0 + r;
      if (n < rows && j < cols) {
        const float q = min2(colfold::max2(floorf(__fadd_rn(__fmul_rn(x[n * cols + j], inv), 0.5f)), -127.0f), 127.0f);
        tile[lane][r] = static_cast<std::int8_t>(q);
      }
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const unsigned col = warp + 8 * k;
      const std::size_t jj = strip + col, n = n0 + 4 * lane;
      if (jj >= cols || n >= rows) continue;
      std::int8_t* dst = codes + jj * rows + n;
      const std::int8_t* src = &tile[col][4 * lane];
      if (n + 4 <= rows && (reinterpret_cast<std::uintptr_t>(dst) & 3u) == 0) {
        *reinterpret_cast<std::uint32_t*>(dst) = *reinterpret_cast<const std::uint32_t*>(src);
      } else {
        for (std::size_t b = 0; b < 4 && n + b < rows; ++b) dst[b] = src[b];
      }
    }
    __syncthreads();  // the tile is rewritten by the next one
  }
}

std::size_t chunks_of(std::size_t rows, bool sums) {
  if (sums) return 1;
  return (rows + kColChunkRows - 1) / kColChunkRows;
}

int g_sums_forced = 0;
int g_codes_forced = 0;

// The kernel the environment variable `var` names, "v1" .. "v<count>" -> 1 ..
// count (unset or empty: `fallback`); anything else is refused, naming `var`.
int kernel_from_env(const char* var, int count, int fallback, const char* what) {
  const char* v = std::getenv(var);
  if (v == nullptr || *v == '\0') return fallback;
  for (int k = 1; k <= count && k <= 9; ++k)
    if (v[0] == 'v' && v[1] == static_cast<char>('0' + k) && v[2] == '\0') return k;
  throw std::invalid_argument(std::string(var) + ": '" + v + "' is not " + what);
}

void force_kernel(int& slot, int kernel, int count, const char* who) {
  if (kernel < 0 || kernel > count)
    throw std::invalid_argument(std::string(who) + ": no kernel " + std::to_string(kernel));
  slot = kernel;
}

}  // namespace

int col_quant_sums_kernel() {
  if (g_sums_forced != 0) return g_sums_forced;
  static const int from_env = kernel_from_env("LOCKSTEP_COL_SUMS", 3, 2,
                                              "a column-sums kernel (v1: the strip kernel, v2: tiled, 8 columns a "
                                              "block, v3: tiled, 32 columns a block)");
  return from_env;
}

void col_quant_sums_kernel_force(int kernel) { force_kernel(g_sums_forced, kernel, 3, "col_quant_sums_kernel_force"); }

int col_quant_codes_kernel() {
  if (g_codes_forced != 0) return g_codes_forced;
  // v2 by default since session 17 (H100: the units step 126.6/126.5 -> 124.9/125.2 ms, alternated runs;
  // per call faster at every GPT-2 shape; docs/perf/TRAIN_CUDA.md)
  static const int from_env = kernel_from_env("LOCKSTEP_COL_CODES", 2, 2,
                                              "a steps-and-codes kernel (v1: sub-tiles one after another, v2: the "
                                              "next sub-tile's loads overlapped)");
  return from_env;
}

void col_quant_codes_kernel_force(int kernel) { force_kernel(g_codes_forced, kernel, 2, "col_quant_codes_kernel_force"); }

std::size_t col_quantize_2p_scratch(std::size_t rows, std::size_t cols) {
  const std::size_t chunks = chunks_of(rows, false);
  return 2 * (chunks > 0 ? chunks : 1) * cols;  // partials, then NaN flags (the sums' case needs 2 * cols)
}

void col_quantize_i8_2p(const float* x, std::size_t rows, std::size_t cols, float floor_x, std::int8_t* codes,
                        float* step, float* scratch, float* col_sums, int planted) {
  if (cols == 0) return;
  const bool sums = col_sums != nullptr;
  const std::size_t chunks = rows == 0 && !sums ? 0 : chunks_of(rows, sums);
  constexpr std::size_t kBlockRows = static_cast<std::size_t>(kCodeRows) * kCodeTiles;
  const std::size_t code_blocks = (rows + kBlockRows - 1) / kBlockRows;
  if (chunks > 65535 || code_blocks > 65535)
    throw std::invalid_argument("col_quantize_i8_2p: " + std::to_string(rows) + " rows: beyond the launch grid");
  if (sums && (rows > 0x7FFFFFFFu || cols > 0x7FFFFFFFu - kSumCols))
    throw std::invalid_argument("col_quantize_i8_2p: " + std::to_string(rows) + " x " + std::to_string(cols) +
                                " with column sums: beyond int");
  float* partial = scratch;
  std::uint32_t* has_nan = reinterpret_cast<std::uint32_t*>(scratch + (chunks > 0 ? chunks : 1) * cols);
  const unsigned strips = static_cast<unsigned>((cols + 31) / 32);
  if (sums && col_quant_sums_kernel() >= 2) {
    col_maxima_sums_tiled(x, rows, cols, partial, has_nan, col_sums, planted, col_quant_sums_kernel() == 3 ? 32 : 8);
  } else if (sums) {
    trace::launched("col_quantize_i8 2-pass (column maxima and sums)");
    strip_maxima_sums<<<static_cast<unsigned>((cols + kSumCols - 1) / kSumCols), 256>>>(
        x, static_cast<int>(rows), static_cast<int>(cols), partial, has_nan, col_sums, planted);
    check_launch("col_quantize_i8 2-pass: column maxima and sums");
  } else if (chunks > 0) {
    trace::launched("col_quantize_i8 2-pass (chunk maxima)");
    chunk_maxima<<<dim3(strips, static_cast<unsigned>(chunks)), 256>>>(x, rows, cols, partial, has_nan);
    check_launch("col_quantize_i8 2-pass: chunk maxima");
  }
  // The v2 kernel's own planted bug (Mutant::col_quant_codes_stale_subtile) runs v2 whichever is selected:
  // the mutant exists to be caught by the gates, and only v2 can carry it.
  if (col_quant_codes_kernel() == 2 || planted == kColQuantCodesStaleSubTile) {
    col_steps_codes_overlapped(x, rows, cols, chunks, partial, has_nan, floor_x, step, codes, planted);
    return;
  }
  trace::launched("col_quantize_i8 2-pass (steps and codes, transposed)");
  codes_2p<<<dim3(strips, static_cast<unsigned>(code_blocks > 0 ? code_blocks : 1)), 256>>>(
      x, rows, cols, chunks, partial, has_nan, floor_x, step, codes, planted);
  check_launch("col_quantize_i8 2-pass: steps and codes");
}

}  // namespace lockstep::cuda::launch
