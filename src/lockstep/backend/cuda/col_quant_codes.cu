// Pass 2 of the two-pass column quantizer with its loads overlapped
// (col_quant_launch.hpp: col_steps_codes_overlapped; LOCKSTEP_COL_CODES=v2):
// the same outputs and bits as col_quant.cu's codes_2p ("v1", the default
// until the device has timed both). Per column j of a block's strip of 32:
// the chunk summaries of pass 1 joined in row order (col_fold.hpp; the join is
// associative, so the 8 warps' contiguous runs joined in order are the
// specification's fold), m = max2(fold from +0, floor_x), inv = 127 / m,
// step[j] = m / 127 (the blocks of the first rows write it); then for every
// row n of the block's 512, the CPU's expression of ops::quantize_cols
// (cpu units::quantize_cols_i8), one correctly rounded operation a step:
//   q = min2(max2(floor(x[n, j] · inv + 0.5), -127), 127),
// stored transposed, codes[j · rows + n].
//
// Why a second kernel: v1 runs its block as a chain of ~5 memory latencies
// (the join's L2 reads, then 4 sub-tiles of 128 rows each: load → barrier →
// transposed store → barrier, nothing in flight across them): 7.34 ms of the
// GPT-2 step at 56% of the copy rate. Here the loads are issued ahead:
//   - sub-tile 0's 16 loads a thread (x is all the block reads that matters:
//     64 KB against a few KB of summaries) are issued before the join, so its
//     L2 reads and the first DRAM latency overlap;
//   - sub-tile i + 1's loads are issued (into the other of two register
//     buffers of 16 floats a thread) before sub-tile i is quantized, stored
//     into shared memory and written out, so DRAM always has a sub-tile of
//     the block in flight;
//   - the transposed codes go through two shared tiles, alternating, so a
//     sub-tile needs one barrier (codes written → read for the store), not
//     two: tile i % 2 is written again at sub-tile i + 2, after the barrier of
//     sub-tile i + 1, which every thread reaches only after its store of i.
// A thread loads and quantizes exactly the cells v1's thread does (rows
// warp + 8k of each sub-tile, column lane), so nothing crosses threads but
// the code tiles. The registers are the buffer (no cp.async): a thread reads
// only what it loaded itself, so there is no write-after-read hazard to fence.
//
// Shared: s_val[8][32] floats, s_nan[8][32] flags, s_inv[32], then two code
// tiles of 32 columns × 132 bytes (row stride 132: the lanes' byte stores
// fall in distinct banks), 10,624 bytes. Written with the LS_* hooks:
// tests/cuda/col_quant_codes_emu_test.cpp runs it on the host fiber emulator
// (cuda_host_emu.hpp) against the CPU.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "lockstep/backend/cuda/col_fold.hpp"
#include "lockstep/backend/cuda/col_quant_launch.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/ls_hooks.cuh"
#include "lockstep/backend/cuda/trace_launch.hpp"

namespace lockstep::cuda::launch {
namespace {

constexpr int kOvRows = 128;               // rows a sub-tile
constexpr int kOvSubs = 4;                 // sub-tiles a block (512 rows)
constexpr int kOvPer = kOvRows / 8;        // a thread's cells a sub-tile (rows warp + 8k)
constexpr int kOvStride = kOvRows + 4;     // bytes a column of a code tile
constexpr int kOvTileBytes = 32 * kOvStride;
constexpr int kOvTileAt = 256 + 256 + 32;  // floats before the code tiles
constexpr int kOvSmemBytes = kOvTileAt * 4 + 2 * kOvTileBytes;  // 10,624
constexpr std::uint32_t kOvEmpty = 2u;     // a warp's run of summaries: no chunks (skipped)

struct CodesArgs {
  const float* x;
  std::size_t rows, cols, chunks;
  const float* partial;
  const std::uint32_t* has_nan;
  float floor_x;
  float* step;
  std::int8_t* codes;
  int planted;
};

__device__ __forceinline__ float ov_min2(float a, float b) { return a < b ? a : b; }  // ops::min2

// Sub-tile `sub`'s cells of this thread into v (0 where outside the matrix).
__device__ __forceinline__ void ov_load(const CodesArgs& a, std::size_t n0, unsigned warp, std::size_t j,
                                        float (&v)[kOvPer]) {
  const bool in_col = j < a.cols;
#pragma unroll
  for (int i = 0; i < kOvPer; ++i) {
    const std::size_t n = n0 + warp + 8 * static_cast<unsigned>(i);
    v[i] = in_col && n < a.rows ? a.x[n * a.cols + j] : 0.0f;
  }
}

// Sub-tile `sub`: issue the next one's loads into `next`, quantize this one's
// (already in flight in `cur`) into code tile sub % 2, barrier, store it
// transposed. Plantable: the instance the emulator test's planted bugs run
// (the device launches the clean one unless a bug is planted).
template <bool Plantable>
__device__ __forceinline__ void ov_sub_tile(const CodesArgs& a, int sub, std::int8_t* tiles, float inv,
                                            unsigned lane, unsigned warp, std::size_t strip, float (&cur)[kOvPer],
                                            float (&next)[kOvPer]) {
  const std::size_t n0 = (static_cast<std::size_t>(blockIdx.y) * kOvSubs + sub) * kOvRows;
  if (n0 >= a.rows) return;  // the same for every thread of the block, and for every later sub-tile
  const std::size_t j = strip + lane;
  // The planted bugs: sub-tile i >= 1 quantized from the registers of
  // sub-tile i - 1 (its own loads issued only after); one code tile, so
  // sub-tile i + 1's codes overwrite it while i's store still reads it.
  const bool stale = Plantable && a.planted == kColQuantCodesStaleSubTile && sub > 0;
  const bool one_tile = Plantable && a.planted == kColQuantCodesOneTile;
  if (sub + 1 < kOvSubs && !stale) ov_load(a, n0 + kOvRows, warp, j, next);
  std::int8_t* tile = tiles + (one_tile ? 0 : sub & 1) * kOvTileBytes;
#pragma unroll
  for (int i = 0; i < kOvPer; ++i) {
    const int r = static_cast<int>(warp) + 8 * i;
    if (n0 + r < a.rows && j < a.cols) {
      const float v = stale ? next[i] : cur[i];
      const float q = ov_min2(colfold::max2(floorf(__fadd_rn(__fmul_rn(v, inv), 0.5f)), -127.0f), 127.0f);
      tile[lane * kOvStride + r] = static_cast<std::int8_t>(q);
    }
  }
  if (stale && sub + 1 < kOvSubs) ov_load(a, n0 + kOvRows, warp, j, next);
  __syncthreads();  // this sub-tile's codes are in the tile
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const unsigned col = warp + 8 * k;
    const std::size_t jj = strip + col, n = n0 + 4 * lane;
    if (jj >= a.cols || n >= a.rows) continue;
    std::int8_t* dst = a.codes + jj * a.rows + n;
    const std::int8_t* src = tile + col * kOvStride + 4 * lane;
    if (n + 4 <= a.rows && (reinterpret_cast<std::uintptr_t>(dst) & 3u) == 0) {
      *reinterpret_cast<std::uint32_t*>(dst) = *reinterpret_cast<const std::uint32_t*>(src);
    } else {
      for (std::size_t b = 0; b < 4 && n + b < a.rows; ++b) dst[b] = src[b];
    }
  }
  // No barrier: tile sub % 2 is rewritten at sub + 2, past sub + 1's barrier,
  // which a thread reaches only after this store.
}

template <bool Plantable>
__global__ void __launch_bounds__(256) codes_overlapped_kernel(const CodesArgs a) {
  LS_SMEM(sm);
  float* s_val = sm;
  std::uint32_t* s_nan = reinterpret_cast<std::uint32_t*>(sm + 256);
  float* s_inv = sm + 512;
  std::int8_t* tiles = reinterpret_cast<std::int8_t*>(sm + kOvTileAt);
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::size_t strip = static_cast<std::size_t>(blockIdx.x) * 32, j = strip + lane;

  float va[kOvPer], vb[kOvPer];
  // Sub-tile 0's loads first: in flight during the join.
  ov_load(a, static_cast<std::size_t>(blockIdx.y) * kOvSubs * kOvRows, warp, j, va);

  // The join, as v1's: warp w joins a contiguous run of chunks, warp 0 the 8 runs in order.
  const std::size_t used = a.planted == kColQuantLastChunkDropped && a.chunks > 1 ? a.chunks - 1 : a.chunks;
  const std::size_t per = (used + 7) / 8, c0 = warp * per, c1 = c0 + per < used ? c0 + per : used;
  colfold::Summary s{0.0f, false};
  bool any = false;
  if (j < a.cols)
    for (std::size_t c = c0; c < c1; ++c) {
      const colfold::Summary p{a.partial[c * a.cols + j], a.has_nan[c * a.cols + j] != 0u};
      s = any ? colfold::join(s, p) : p;
      any = true;
    }
  s_val[warp * 32 + lane] = s.value;
  s_nan[warp * 32 + lane] = any ? (s.nan ? 1u : 0u) : kOvEmpty;
  __syncthreads();
  if (warp == 0) {
    colfold::Summary t{0.0f, false};  // the fold's start
    for (int w = 0; w < 8; ++w)
      if (s_nan[w * 32 + lane] != kOvEmpty) t = colfold::join(t, colfold::Summary{s_val[w * 32 + lane], s_nan[w * 32 + lane] == 1u});
    const float m = colfold::max2(t.value, a.floor_x);
    s_inv[lane] = __fdiv_rn(127.0f, m);
    if (blockIdx.y == 0 && j < a.cols) a.step[j] = __fdiv_rn(m, 127.0f);
  }
  __syncthreads();
  const float inv = s_inv[lane];
  ov_sub_tile<Plantable>(a, 0, tiles, inv, lane, warp, strip, va, vb);
  ov_sub_tile<Plantable>(a, 1, tiles, inv, lane, warp, strip, vb, va);
  ov_sub_tile<Plantable>(a, 2, tiles, inv, lane, warp, strip, va, vb);
  ov_sub_tile<Plantable>(a, 3, tiles, inv, lane, warp, strip, vb, va);
}

}  // namespace

void col_steps_codes_overlapped(const float* x, std::size_t rows, std::size_t cols, std::size_t chunks,
                                const float* partial, const std::uint32_t* has_nan, float floor_x, float* step,
                                std::int8_t* codes, int planted) {
  if (cols == 0) return;
  constexpr std::size_t kBlockRows = static_cast<std::size_t>(kOvRows) * kOvSubs;
  const std::size_t blocks = (rows + kBlockRows - 1) / kBlockRows;
  if (blocks > 65535)
    throw std::invalid_argument("col_steps_codes_overlapped: " + std::to_string(rows) + " rows: beyond the launch grid");
  const CodesArgs a{x, rows, cols, chunks, partial, has_nan, floor_x, step, codes, planted};
  trace::launched("col_quantize_i8 2-pass (steps and codes, transposed, loads overlapped)");
  const dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>(blocks > 0 ? blocks : 1));
  if (planted == kColQuantCodesStaleSubTile || planted == kColQuantCodesOneTile)
    LS_LAUNCH(codes_overlapped_kernel<true>, grid, dim3(256), kOvSmemBytes, a);
  else
    LS_LAUNCH(codes_overlapped_kernel<false>, grid, dim3(256), kOvSmemBytes, a);
  check_launch("col_quantize_i8 2-pass: steps and codes (loads overlapped)");
}

}  // namespace lockstep::cuda::launch
