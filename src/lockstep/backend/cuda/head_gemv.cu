// head_gemv v2: ops::Linear's forward on the exact f16 copy of the weights,
// for a few rows — the decode pass's LM head (128256 × 2560 at 2B4T: 657 MB of
// f16, 12% of a batch-1 pass), selected by LOCKSTEP_HEAD_GEMV=v2 | v2wide
// (head_gemv_launch.hpp; the default since session 11, measured on the H200;
// LOCKSTEP_HEAD_GEMV=v1 runs decode_linear.cu's chain_gemv_f16_rows_kernel).
//
// What it computes. y[n, m] = canonical_nan(acc) (+ b[m], canonical again),
// acc = +0, acc = fma(x[n, k], w[m, k], acc) for k ascending — ops::matmul's
// dot_seq (DESIGN.md §1, docs/NUMERICS.md "Matrix products: the sequential fma
// chain over k"), with w[m, k] the f16 value widened exactly to f32. CPU
// reference: ops::matmul_xwt / ops::Linear::forward; the readable device
// reference beside it is decode_linear.cu's chain_gemv_f16_rows_kernel (the
// same chains, the same bias rule). Nothing is reordered: each thread owns one
// output row m and runs that row's chains (one a batch row of the chunk) whole,
// in k order, from +0.
//
// Why it is faster. The old kernel has each thread read its own 5 KB row by
// 16-byte loads, so a warp's load touches 32 rows 5 KB apart (16 bytes of each
// 32-byte sector a request): 2.24 TB/s on the H200. Here a CTA of 128 threads
// (128 rows) streams k tiles of its rows into shared memory by cp.async,
// 16 bytes a copy, 8 (16) consecutive lanes on one row's 128 (256) contiguous
// bytes — whole 128-byte lines, a warp's copy 512 contiguous-by-row bytes —
// through a ring of S stages: while the chains consume tile t, tiles t + 1 ..
// t + S - 1 are in flight (at KT 64, S 4: 48 KB a CTA, 3 CTAs an SM, ~144 KB in
// flight an SM, against ~27 KB for 3.6 TB/s at ~1 µs). One barrier a tile
// (wait for tile t, barrier, refill the stage of tile t - 1, compute). Each
// weight row sits 16 bytes past a multiple of 128 bytes in its stage (rows
// 144 or 272 bytes apart), so a quarter-warp's 16-byte reads of 8 rows at the
// same k hit 8 different bank quads: no conflicts. The batch rows' x tile
// [NB][KT] rides in the same stage (every thread reads the same address: a
// broadcast). Rows past M and k past K are not copied and not read (rows past
// M compute on whatever is there and store nothing). Batch rows beyond a chunk
// of NB (1, 4, 8, 16, 32, as the old kernel) take further passes over the
// weights, as the old kernel's.
//
// The kernel is written with the LS_* hooks so that the host fiber emulator
// (tests/cuda/cuda_host_emu.hpp, tests/cuda/head_gemv_emu_test.cpp) runs it on
// the CPU under shuffled thread orders against ops::matmul_xwt, with shared
// memory poisoned by NaN (a tile read before anybody copied it shows).
#include <cstddef>
#include <cstdint>
#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>

#if !defined(LS_HOST_EMULATOR)
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif

#include "lockstep/backend/cuda/cp_async.cuh"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/env_choice.hpp"
#include "lockstep/backend/cuda/head_gemv_launch.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/reduce.hpp"
#include "lockstep/tensor/convert.hpp"

#include "lockstep/backend/cuda/ls_hooks.cuh"  // LS_SMEM, LS_LAUNCH, LS_SET_SMEM (the host emulator's first)

namespace lockstep::cuda::launch {
namespace {

using i64 = long long;

constexpr int kHeadThreads = 128;  // a thread an output row: 128 rows a CTA

// A stage: the CTA's 128 weight rows × KT f16 (rows KT·2 + 16 bytes apart),
// then the chunk's x tile [NB][KT] f32.
template <int KT>
constexpr int w_row_bytes() {
  return KT * 2 + 16;
}
template <int NB, int KT>
constexpr int stage_bytes() {
  return kHeadThreads * w_row_bytes<KT>() + NB * KT * 4;
}

struct HeadArgs {
  const std::uint16_t* w;  // [M, K] f16 bits
  const float* x;          // [N, K]
  const float* b;          // [M] or null
  float* y;                // [N, M]
  int N, M, K;
  bool mul_add, stage_early, k_descending, plant_no_stage_barrier, plant_refill_before_barrier;
};

// f16 bits widened exactly to f32 (the device's conversion; the host's integer one).
__device__ __forceinline__ float widen_f16(unsigned h) {
#if defined(LS_HOST_EMULATOR)
  return tensor::f16_to_f32(static_cast<std::uint16_t>(h));
#else
  return __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
#endif
}

__device__ __forceinline__ float head_step(float x, float w, float acc, bool mul_add) {
  return mul_add ? __fadd_rn(__fmul_rn(x, w), acc) : num::fma_rn(x, w, acc);
}

// Issues the copies of k tile t (k0 = t·KT) of the CTA's rows and of the
// chunk's x rows into stage `st`, then commits a group (an empty one past the
// last tile, so that the group count stays one a tile).
template <int NB, int KT>
__device__ __forceinline__ void issue_tile(const HeadArgs& a, unsigned char* st, int t, int T, i64 m0, int n0,
                                           int nb, int tid) {
  if (t < T) {
    const int k0 = t * KT, kt = a.K - k0 < KT ? a.K - k0 : KT;  // a multiple of 8
    constexpr int kChunks = KT / 8;                             // 16-byte pieces of a row's tile
    const int kc = kt / 8;
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int c = tid + i * kHeadThreads;
      const int r = c / kChunks, j = c - r * kChunks;  // kChunks consecutive lanes: one row's contiguous bytes
      const i64 m = m0 + r;
      if (m < a.M && j < kc)
        detail::cp_async16_zfill(reinterpret_cast<float*>(st + r * w_row_bytes<KT>() + 16 * j),
                                 reinterpret_cast<const float*>(a.w + m * a.K + k0 + 8 * j), true);
    }
    float* xs = reinterpret_cast<float*>(st + kHeadThreads * w_row_bytes<KT>());
    constexpr int kXChunks = KT / 4;
    const int xc = kt / 4;
    for (int e = tid; e < NB * kXChunks; e += kHeadThreads) {
      const int n = e / kXChunks, j = e - n * kXChunks;
      if (n < nb && j < xc)
        detail::cp_async16_zfill(xs + n * KT + 4 * j, a.x + static_cast<i64>(n0 + n) * a.K + k0 + 4 * j, true);
    }
  }
  detail::cp_async_commit();
}

// The chains of one tile: thread tid's row, k ascending within the tile.
// Planted: the planted bugs' flags are read (a separate instantiation, so the kernel as it is carries
// no test of them in its inner loop).
template <int NB, int KT, bool Planted>
__device__ __forceinline__ void tile_chains(const HeadArgs& a, const unsigned char* st, int kt, int nb, int tid,
                                            float (&acc)[NB]) {
  const bool mul_add = Planted && a.mul_add, k_descending = Planted && a.k_descending;
  const unsigned char* wr = st + tid * w_row_bytes<KT>();
  const float* xs = reinterpret_cast<const float*>(st + kHeadThreads * w_row_bytes<KT>());
  const int kc = kt / 8;
#pragma unroll
  for (int u = 0; u < KT / 8; ++u) {
    if (u >= kc) break;
    const int v = k_descending ? kc - 1 - u : u;  // k_descending: the planted bug (8-k groups backwards)
    const uint4 c = *reinterpret_cast<const uint4*>(wr + 16 * v);
    const unsigned words[4] = {c.x, c.y, c.z, c.w};
    float wv[8];  // k = 8v + i: the low half of a word first (little-endian), widened exactly
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      wv[2 * i] = widen_f16(words[i] & 0xFFFFu);
      wv[2 * i + 1] = widen_f16(words[i] >> 16);
    }
#pragma unroll
    for (int n = 0; n < NB; ++n)
      if (n < nb) {
        const float4 xa = *reinterpret_cast<const float4*>(xs + n * KT + 8 * v);  // broadcast reads
        const float4 xb = *reinterpret_cast<const float4*>(xs + n * KT + 8 * v + 4);
        const float xv[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
        float s = acc[n];
#pragma unroll
        for (int i = 0; i < 8; ++i) s = head_step(xv[i], wv[i], s, mul_add);  // k = 8v + i, ascending
        acc[n] = s;
      }
  }
}

template <int NB, int KT, int S, bool Planted>
__global__ void __launch_bounds__(kHeadThreads) head_gemv_v2_kernel(const HeadArgs a) {
  LS_SMEM(smem_floats);
  unsigned char* smem = reinterpret_cast<unsigned char*>(smem_floats);
  constexpr int kStage = stage_bytes<NB, KT>();
  const int tid = static_cast<int>(threadIdx.x);
  const i64 m0 = static_cast<i64>(blockIdx.x) * kHeadThreads;
  const i64 m = m0 + tid;  // this thread's output row (past M: computes, stores nothing)
  const int T = (a.K + KT - 1) / KT;
  for (int n0 = 0; n0 < a.N; n0 += NB) {
    const int nb = a.N - n0 < NB ? a.N - n0 : NB;
    // The ring's first S - 1 tiles in flight.
#pragma unroll
    for (int s = 0; s < S - 1; ++s) issue_tile<NB, KT>(a, smem + s * kStage, s, T, m0, n0, nb, tid);
    float acc[NB];
#pragma unroll
    for (int n = 0; n < NB; ++n) acc[n] = 0.0f;
    for (int t = 0; t < T; ++t) {
      // Tile t's group done (S - 1 + t committed, at most S - 2 pending); the barrier makes every
      // thread's copies of it visible and says every thread is done with tile t - 1's stage.
      if (Planted && a.stage_early) detail::cp_async_wait<S - 1>();  // the planted bug: one group short
      else detail::cp_async_wait<S - 2>();
#if defined(LS_HOST_EMULATOR)
      // The emulator's planted bugs: the stage of tile t - 1 refilled before the barrier (a slower thread
      // may still read it), or no barrier at all (tile t read before the other threads copied it).
      if (Planted && a.plant_refill_before_barrier)
        issue_tile<NB, KT>(a, smem + ((t + S - 1) % S) * kStage, t + S - 1, T, m0, n0, nb, tid);
      if (!(Planted && a.plant_no_stage_barrier)) __syncthreads();
#else
      __syncthreads();
#endif
#if defined(LS_HOST_EMULATOR)
      if (!(Planted && a.plant_refill_before_barrier))
#endif
        issue_tile<NB, KT>(a, smem + ((t + S - 1) % S) * kStage, t + S - 1, T, m0, n0, nb, tid);
      const int kt = a.K - t * KT < KT ? a.K - t * KT : KT;
      tile_chains<NB, KT, Planted>(a, smem + (t % S) * kStage, kt, nb, tid, acc);
    }
    detail::cp_async_wait<0>();
    __syncthreads();  // the next chunk's first tiles overwrite the stages
    if (m < a.M) {
#pragma unroll
      for (int n = 0; n < NB; ++n)
        if (n < nb) {
          float v = num::reduce::canonical_nan(acc[n]);
          // NaN + b on the GPU is 0x7FFFFFFF, on the CPU the NaN operand: canonical again (as the old kernel).
          if (a.b != nullptr) v = num::reduce::canonical_nan(__fadd_rn(v, a.b[m]));
          a.y[static_cast<i64>(n0 + n) * a.M + m] = v;
        }
    }
  }
}

template <int NB, int KT, int S, bool Planted>
void launch_head_as(const HeadArgs& a, unsigned blocks) {
  constexpr int bytes = S * stage_bytes<NB, KT>();
  auto* kernel = head_gemv_v2_kernel<NB, KT, S, Planted>;
#if !defined(LS_HOST_EMULATOR)
  static bool attribute_set = false;  // past the default 48 KiB of dynamic shared memory
  if (!attribute_set) {
    if (LS_SET_SMEM(kernel, bytes) != cudaSuccess) check_launch("head_gemv v2: setting its shared memory size");
    attribute_set = true;
  }
#endif
  LS_LAUNCH(kernel, dim3(blocks), dim3(kHeadThreads), bytes, a);
}

template <int KT, int S, bool Planted>
void launch_head(const HeadArgs& a, unsigned blocks) {
  const int N = a.N;
  if (N <= 1) launch_head_as<1, KT, S, Planted>(a, blocks);
  else if (N <= 4) launch_head_as<4, KT, S, Planted>(a, blocks);
  else if (N <= 8) launch_head_as<8, KT, S, Planted>(a, blocks);
  else if (N <= 16) launch_head_as<16, KT, S, Planted>(a, blocks);
  else launch_head_as<32, KT, S, Planted>(a, blocks);
}

std::atomic<int> g_head_version{0};  // 0: the environment's

}  // namespace

int head_gemv_version() {
  if (const int set = g_head_version.load(); set != 0) return set;
  // Read once; unset: v2 (session 11 on the H200: 289.7 -> 179.2 us at 1 row, 1036 -> 486 at 8, 5823 -> 1790 at
  // 32, the CPU's bits in the kernel and whole-model tests; docs/perf/DECODE_CUDA.md §19).
  static const int from_env =
      std::getenv("LOCKSTEP_HEAD_GEMV") == nullptr ? 2 : env_choice("LOCKSTEP_HEAD_GEMV", {"v1", "v2", "v2wide"});
  return from_env;
}

void set_head_gemv_version(int version) {
  if (version < 0 || version > 3)
    throw std::invalid_argument("set_head_gemv_version(" + std::to_string(version) + "): expected 0 to 3");
  g_head_version.store(version);
}

void head_gemv_v2(const std::uint16_t* w16, const float* x, const float* b, std::size_t N, std::size_t M,
                  std::size_t K, float* y, const HeadGemvOptions& options) {
  if (M == 0 || N == 0) return;
  if (K % 8 != 0 || N > 0x7FFFFFFFu || M > 0x7FFFFFFFu || K > 0x7FFFFFFFu)
    throw std::invalid_argument("head_gemv v2: N " + std::to_string(N) + ", M " + std::to_string(M) + ", K " +
                                std::to_string(K) + ": K % 8 == 0 and int extents expected");
  HeadArgs a{};
  a.w = w16;
  a.x = x;
  a.b = b;
  a.y = y;
  a.N = static_cast<int>(N);
  a.M = static_cast<int>(M);
  a.K = static_cast<int>(K);
  a.mul_add = options.mul_add;
  a.stage_early = options.stage_early;
  a.k_descending = options.k_descending;
  a.plant_no_stage_barrier = options.plant_no_stage_barrier;
  a.plant_refill_before_barrier = options.plant_refill_before_barrier;
  const bool mutant = options.mul_add || options.stage_early || options.k_descending ||
                      options.plant_no_stage_barrier || options.plant_refill_before_barrier;
  static constexpr const char* kNames[2][2] = {{"head_gemv v2 (staged rows, KT 64)", "head_gemv v2 (staged rows, KT 128)"},
                                               {"head_gemv v2 (mutant, KT 64)", "head_gemv v2 (mutant, KT 128)"}};
  trace::launched(kNames[mutant ? 1 : 0][options.wide ? 1 : 0]);
  const auto blocks = static_cast<unsigned>((M + kHeadThreads - 1) / kHeadThreads);
  if (options.wide) {
    if (mutant) launch_head<128, 3, true>(a, blocks);
    else launch_head<128, 3, false>(a, blocks);
  } else {
    if (mutant) launch_head<64, 4, true>(a, blocks);
    else launch_head<64, 4, false>(a, blocks);
  }
  check_launch("head_gemv v2");
}

}  // namespace lockstep::cuda::launch
