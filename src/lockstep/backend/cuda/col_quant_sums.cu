// Pass 1 of the two-pass column quantizer where the bias gradient wants the
// column sums too (col_quant_launch.hpp: col_maxima_sums_tiled): per column,
// the absmax fold's summary (col_fold.hpp) and the sum chain of
// ops::column_sums, sum = +0 + x[0, j] + x[1, j] + ... in row order, one
// thread a column. The same outputs and bits as col_quant.cu's
// strip_maxima_sums (the "v1" kernel, kept: LOCKSTEP_COL_SUMS=v1).
//
// Why a second kernel: v1 measured 221 µs a call in the GPT-2 step against
// a ~33 µs chain floor (16384 dependent adds at ~4 cycles), ~27 cycles a row.
// Its chain thread also runs the fold (~8 instructions a row from one warp)
// and issues its share of the staging, and the staging is 4-byte cp.async
// through L1 (2048 copies a 256-row tile). Here the work is split by warp so
// that the chain warp does one shared load and one add a row and nothing else.
// A block owns C columns (C = 8, "v2", the default: 96-384 blocks at the GPT-2
// widths; or C = 32, "v3": 128-byte row pieces, a quarter of the blocks):
//   warp 0, lanes 0..C-1: the C column chains of the block, in row order;
//   warps 1..C/8, the fold: lane (c, s) of fold warp f folds the 64-row
//     segment s of the tile for column 8f + c (two halves of 32 interleaved,
//     joined in order), and lane (c, 0) joins the 4 segments in order into
//     the column's running summary (shuffles); contiguous segments joined in
//     row order are the specification's fold (col_fold.hpp: the join is
//     associative);
//   the last 2 warps, the staging: tiles of 256 rows × C columns into a ring
//     of 6 (C 8) or 4 (C 32) shared buffers with 16-byte cp.async (L2 only)
//     where the rows are 16-byte aligned (cols % 4 == 0, x aligned), else
//     4-byte; 5 × 8 KB or 3 × 32 KB in flight a block.
// One barrier a tile: at barrier tt every warp has finished tile tt - 1, so
// its buffer is refilled (with tile tt + stages - 1) right after it, while
// the chain and the fold read tile tt.
//
// Shared layout of a tile: 4 segments of 64 rows × C floats, each segment
// padded by 8 floats (stride 64·C + 8), so a fold warp's 32 lanes (8 columns
// × 4 segments) read 32 distinct banks and the staging's 16-byte stores stay
// aligned.
//
// Written with the LS_* hooks: tests/cuda/col_quant_sums_emu_test.cpp runs it
// on the host fiber emulator (cuda_host_emu.hpp) against the CPU.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "lockstep/backend/cuda/col_fold.hpp"
#include "lockstep/backend/cuda/col_quant_launch.hpp"
#include "lockstep/backend/cuda/cp_async.cuh"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/ls_hooks.cuh"
#include "lockstep/backend/cuda/trace_launch.hpp"

namespace lockstep::cuda::launch {
namespace {

using colfold::Summary;

constexpr int kTiledSegRows = 64, kTiledSegs = 4;       // a tile: 4 segments of 64 rows
constexpr int kTiledRows = kTiledSegRows * kTiledSegs;  // 256
constexpr int kTiledStagers = 64;                       // 2 warps
constexpr std::uint32_t kNoRows = 2u;  // a segment's code: no rows (skipped in the join)

// The block of C columns (8 or 32): one chain warp (lanes 0..C-1), C / 8 fold
// warps (8 columns × 4 segments each), 2 staging warps; a ring of S tiles.
template <int C>
struct Tiled {
  static constexpr int kSegStride = kTiledSegRows * C + 8;  // floats; +8: the segments' banks differ
  static constexpr int kTileFloats = kTiledSegs * kSegStride;
  static constexpr int kStages = C == 8 ? 6 : 4;             // 5 × 8 KB or 3 × 32 KB in flight
  static constexpr int kFoldWarps = C / 8;
  static constexpr int kThreads = 32 * (1 + kFoldWarps) + kTiledStagers;
  static constexpr int kSmemBytes = kStages * kTileFloats * 4;  // 49,920 B (C 8), 131,584 B (C 32)
  static constexpr int seg_offset(int r) { return (r / kTiledSegRows) * kSegStride + (r % kTiledSegRows) * C; }
};

struct TiledArgs {
  const float* x;
  int rows, cols;
  float* partial;
  std::uint32_t* has_nan;
  float* sums;
  int planted;
  bool wide;  // 16-byte copies: cols % 4 == 0 and x 16-byte aligned
};

using ::lockstep::cuda::detail::cp_async16_zfill;
using ::lockstep::cuda::detail::cp_async4;
using ::lockstep::cuda::detail::cp_async_commit;
using ::lockstep::cuda::detail::cp_async_wait;

// The chain through a full tile's 256 rows in order, 16 rows a block: the
// next block's 16 shared loads are issued before this block's 16 adds, so
// the adds never wait for a load (one add every ~4 cycles, the floor).
constexpr int kChainBlock = 16;
template <int C>
__device__ __forceinline__ float chain_full_tile(const float* col, float sum) {
  constexpr int kBlocks = kTiledRows / kChainBlock, kPerSeg = kTiledSegRows / kChainBlock;
  float v[kChainBlock];
#pragma unroll
  for (int i = 0; i < kChainBlock; ++i) v[i] = col[i * C];
#pragma unroll
  for (int b = 0; b < kBlocks; ++b) {
    float w[kChainBlock];
    if (b + 1 < kBlocks) {
      const float* p = col + ((b + 1) / kPerSeg) * Tiled<C>::kSegStride + ((b + 1) % kPerSeg) * kChainBlock * C;
#pragma unroll
      for (int i = 0; i < kChainBlock; ++i) w[i] = p[i * C];
    }
#pragma unroll
    for (int i = 0; i < kChainBlock; ++i) sum = __fadd_rn(sum, v[i]);
    if (b + 1 < kBlocks) {
#pragma unroll
      for (int i = 0; i < kChainBlock; ++i) v[i] = w[i];
    }
  }
  return sum;
}

template <int C>
__global__ void __launch_bounds__(Tiled<C>::kThreads) col_maxima_sums_tiled_kernel(const TiledArgs a) {
  using L = Tiled<C>;
  LS_SMEM(ring);
  const int t = static_cast<int>(threadIdx.x), warp = t >> 5, lane = t & 31;
  const int j0 = static_cast<int>(blockIdx.x) * C;
  const int tail = a.rows % kTiledRows;
  int tiles = (a.rows + kTiledRows - 1) / kTiledRows;
  if (a.planted == kColQuantSumsLastTileDropped && tail != 0) --tiles;  // the planted bug: a partial last tile lost

  // Tile tt into buffer tt % kStages by the 64 staging threads; one commit
  // group a tile, empty past the end, so the count is uniform.
  const auto stage = [&](int tt) {
    if (tt < tiles) {
      const int n0 = tt * kTiledRows;
      const int in = a.rows - n0 < kTiledRows ? a.rows - n0 : kTiledRows;
      float* buf = ring + (tt % L::kStages) * L::kTileFloats;
      const int p = t - (L::kThreads - kTiledStagers);
      if (a.wide) {  // C / 4 copies of 16 bytes a row
        constexpr int kPerRow = C / 4;
        for (int u = p; u < in * kPerRow; u += kTiledStagers) {
          const int r = u / kPerRow, h = u % kPerRow;
          if (j0 + 4 * h < a.cols)
            cp_async16_zfill(buf + L::seg_offset(r) + 4 * h,
                             a.x + static_cast<std::size_t>(n0 + r) * a.cols + j0 + 4 * h, true);
        }
      } else {
        for (int u = p; u < in * C; u += kTiledStagers) {
          const int r = u / C, c = u % C;
          if (j0 + c < a.cols) cp_async4(buf + L::seg_offset(r) + c, a.x + static_cast<std::size_t>(n0 + r) * a.cols + j0 + c);
        }
      }
    }
    cp_async_commit();
  };

  const bool stager = warp > L::kFoldWarps;
  if (stager)
    for (int tt = 0; tt < L::kStages - 1; ++tt) stage(tt);

  float sum = 0.0f;          // warp 0, lane < C: column j0 + lane's chain
  Summary run{0.0f, false};  // fold warp f, lanes 0..7: column j0 + 8f + lane's fold so far
  const int f = warp - 1, c = 8 * f + (lane & 7), s = lane >> 3;  // fold warps: column in the block, segment
  for (int tt = 0; tt < tiles; ++tt) {
    if (stager) cp_async_wait<L::kStages - 2>();  // this thread's copies of tile tt have landed
    __syncthreads();  // and everyone's; every warp is done with tile tt - 1
    const float* buf = ring + (tt % L::kStages) * L::kTileFloats;
    const int in = a.rows - tt * kTiledRows < kTiledRows ? a.rows - tt * kTiledRows : kTiledRows;
    if (stager) {
      stage(tt + L::kStages - 1);  // into tile tt - 1's buffer
    } else if (warp == 0) {
      if (lane < C) {
        const float* col = buf + lane;
        if (in == kTiledRows && a.planted == kColQuantClean) {
          sum = chain_full_tile<C>(col, sum);
        } else if (in == kTiledRows && a.planted == kColQuantSumsTileRowsSwapped) {
          for (int g = 0; g < kTiledSegs; ++g) {  // the planted bug: a full tile's first two segments swapped
            const float* p = col + (g < 2 ? 1 - g : g) * L::kSegStride;
            for (int i = 0; i < kTiledSegRows; ++i) sum = __fadd_rn(sum, p[i * C]);
          }
        } else if (a.planted == kColQuantSumsInPairs) {  // the planted bug: (x0 + x1) + ..., reassociated
          int r = 0;
          for (; r + 2 <= in; r += 2) sum = __fadd_rn(sum, __fadd_rn(col[L::seg_offset(r)], col[L::seg_offset(r + 1)]));
          if (r < in) sum = __fadd_rn(sum, col[L::seg_offset(r)]);
        } else {
          for (int r = 0; r < in; ++r) sum = __fadd_rn(sum, col[L::seg_offset(r)]);
        }
      }
    } else {  // a fold warp
      const float* p = buf + s * L::kSegStride + c;
      Summary seg{0.0f, false};
      std::uint32_t code = kNoRows;
      if (in == kTiledRows) {
        Summary lo{0.0f, false}, hi{0.0f, false};
#pragma unroll 8
        for (int i = 0; i < kTiledSegRows / 2; ++i) {
          colfold::fold(lo, p[i * C]);
          colfold::fold(hi, p[(i + kTiledSegRows / 2) * C]);
        }
        seg = colfold::join(lo, hi);
        code = seg.nan ? 1u : 0u;
      } else {
        const int r0 = s * kTiledSegRows, r1 = in < r0 + kTiledSegRows ? in : r0 + kTiledSegRows;
        for (int r = r0; r < r1; ++r) colfold::fold(seg, p[(r - r0) * C]);
        if (r0 < r1) code = seg.nan ? 1u : 0u;
      }
      // Lane (column, segment 0) joins the tile's segments 0..3 in row order.
      for (int g = 0; g < kTiledSegs; ++g) {
        const float v = __shfl_sync(0xFFFFFFFFu, seg.value, (lane & 7) + 8 * g);
        const std::uint32_t k = __shfl_sync(0xFFFFFFFFu, code, (lane & 7) + 8 * g);
        if (s == 0 && k != kNoRows) run = colfold::join(run, Summary{v, k == 1u});
      }
    }
  }
  if (stager) cp_async_wait<0>();  // the empty groups past the end
  if (warp == 0 && lane < C && j0 + lane < a.cols) a.sums[j0 + lane] = sum;
  if (warp >= 1 && warp <= L::kFoldWarps && s == 0 && j0 + c < a.cols) {
    a.partial[j0 + c] = run.value;
    a.has_nan[j0 + c] = run.nan ? 1u : 0u;
  }
}

template <int C>
void launch_tiled(const TiledArgs& a) {
  using L = Tiled<C>;
  const unsigned blocks = static_cast<unsigned>((static_cast<std::size_t>(a.cols) + C - 1) / C);
  auto* kernel = col_maxima_sums_tiled_kernel<C>;
#if !defined(LS_HOST_EMULATOR)
  // Past the default 48 KB of shared memory. Set at every launch (as
  // attention.cu does): the attribute is the current device's, and a process
  // may train on more than one.
  if (LS_SET_SMEM(kernel, L::kSmemBytes) != cudaSuccess)
    check_launch("col_quantize_i8 2-pass: setting the tiled sums kernel's shared memory size");
#endif
  LS_LAUNCH(kernel, dim3(blocks), dim3(L::kThreads), L::kSmemBytes, a);
}

}  // namespace

void col_maxima_sums_tiled(const float* x, std::size_t rows, std::size_t cols, float* partial,
                           std::uint32_t* has_nan, float* sums, int planted, int block_cols) {
  if (cols == 0) return;
  if (block_cols != 8 && block_cols != 32)
    throw std::invalid_argument("col_maxima_sums_tiled: " + std::to_string(block_cols) + " columns a block (8 or 32)");
  if (rows > 0x7FFFFFFFu - kTiledRows || cols > 0x7FFFFFFFu - 32)
    throw std::invalid_argument("col_maxima_sums_tiled: " + std::to_string(rows) + " x " + std::to_string(cols) +
                                ": beyond int");
  const TiledArgs a{x, static_cast<int>(rows), static_cast<int>(cols), partial, has_nan, sums, planted,
                    cols % 4 == 0 && (reinterpret_cast<std::uintptr_t>(x) & 15u) == 0};
  static const char* const names[2][2] = {
      {"col_quantize_i8 2-pass (column maxima and sums, tiled 8 columns, 4B)",
       "col_quantize_i8 2-pass (column maxima and sums, tiled 8 columns, 16B)"},
      {"col_quantize_i8 2-pass (column maxima and sums, tiled 32 columns, 4B)",
       "col_quantize_i8 2-pass (column maxima and sums, tiled 32 columns, 16B)"}};
  trace::launched(names[block_cols == 32 ? 1 : 0][a.wide ? 1 : 0]);
  if (block_cols == 32)
    launch_tiled<32>(a);
  else
    launch_tiled<8>(a);
  check_launch("col_quantize_i8 2-pass: column maxima and sums (tiled)");
}

}  // namespace lockstep::cuda::launch
