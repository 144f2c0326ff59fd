// The canonical float GEMM on the device (gemm_launch.hpp): SIMT FFMA,
// register- and shared-memory-tiled, double-buffered.
//
// Every output cell is the chain acc = +0; acc = fma(A(i,k), B(k,j), acc) for
// k ascending (one __fmaf_rn per step, never split over k), so the bits are
// cpu::gemm's. Tiling only decides who computes which cells:
//   * a block of 256 threads owns a 128×128 tile of C and walks k in tiles of
//     8, staging A[128×8] and B[8×128] in shared memory (two buffers: the next
//     tile is fetched into registers while the current one is consumed);
//   * a thread owns 8×8 cells (rows ty*4+{0..3} and 64+ty*4+{0..3}, columns
//     likewise from tx), 64 accumulators in registers;
//   * the 64×64 tile (k tiles of 16, 4×4 cells per thread) and the
//     shape-fitted tiles of gemm_tiled.cu (144/112/48×128, 128×144, and 128×128 with
//     8×4-thread warps and k tiles of 16, the default where 16-byte loads
//     apply) are chosen by choose_tile's measured model: the weight gradients
//     of 768-wide layers have only their cells as parallelism (no split-K);
//   * the last k tile runs only its K % BK steps (padding k with zeros is not
//     neutral: fma(0, 0, -0) = +0), rows and columns past the edge load zeros
//     and are never stored.
// Operands are read along whichever index is contiguous in memory: 16-byte
// loads where the alignment and the extent allow it (checked per launch), else
// scalar loads arranged for coalescing.
//
// Mutants (mutant.hpp, the gates' teeth): when cuda::mutant() names a gemm
// bug, the launcher plants it where the clean product would run: in the tiled
// kernel the rule picked (gemm_tiled_mutant.cu, a separate instantiation), or
// in this file's 128×128 kernel with scalar loads for tiles 1 and 2 (one
// well-predicted branch per launch otherwise; the clean kernels carry no
// mutant code).
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "lockstep/backend/cuda/cp_async.cuh"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gemm_epilogue.cuh"
#include "lockstep/backend/cuda/gemm_launch.hpp"
#include "lockstep/backend/cuda/gemm_tile_rule.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/num/fp.hpp"

namespace lockstep::cuda::launch {
namespace {

constexpr int kThreads = 256;

using detail::kAssign;
using detail::kClean;
using detail::kNoBarrier;
using detail::kNoGuard;
using detail::kSkipLast;

// Tile configurations. S = 2: a 128×128 block tile walked in k steps of 8,
// 8×8 cells per thread (the large-output shape). S = 1: 64×64 walked in k steps
// of 16, 4×4 cells per thread, for outputs too small to fill the device with
// 128×128 tiles (weight gradients dW = dyᵀ·x of 768-wide layers: no split-K,
// so the parallelism is the output's cells).
template <int S>
struct Cfg {
  static constexpr int BM = 64 * S;       // rows (and columns) of a block tile
  static constexpr int BK = S == 2 ? 8 : 16;
  static constexpr int LDS = BM + 4;      // padded staged row: 16-byte aligned
  static constexpr int R = 4 * S;         // cells per thread along each side
  static_assert(BM * BK == 4 * kThreads, "each thread stages 4 elements of each operand");
};

using detail::epilogue_cell;
using detail::Epi;
using detail::store_four;

// One operand tile: rows r0..r0+BM-1 of the operand's outer index (i of A, j
// of B) by k0..k0+BK-1. KC: element (r, k) at p[r*ld + k] (k contiguous),
// else at p[k*ld + r]. Each thread fetches 4 elements (zeros outside the
// matrix) and stores them at their transposed place S[k*LDS + r]; element e
// sits at (r + dr(e), k + dk(e)).
template <int S, bool KC, bool VEC, int MUT>
struct Tile {
  using C = Cfg<S>;
  int r, k;
  static constexpr int dr(int e) {
    if constexpr (KC && VEC) return 0;
    else if constexpr (KC) return (kThreads / C::BK) * e;
    else if constexpr (VEC) return e;
    else return 32 * (e % (C::BM / 32));
  }
  static constexpr int dk(int e) {
    if constexpr (KC && VEC) return e;
    else if constexpr (KC) return 0;
    else if constexpr (VEC) return 0;
    else return 8 * (e / (C::BM / 32));
  }
  __device__ __forceinline__ void init(int tid) {
    if constexpr (KC && VEC) {
      r = tid / (C::BK / 4), k = (tid % (C::BK / 4)) * 4;
    } else if constexpr (KC) {
      r = tid / C::BK, k = tid % C::BK;
    } else if constexpr (VEC) {
      r = (tid % (C::BM / 4)) * 4, k = tid / (C::BM / 4);
    } else {
      r = tid & 31, k = tid >> 5;
    }
  }
  __device__ __forceinline__ void load(const float* __restrict__ p, std::size_t ld, int R, int K, int r0, int k0,
                                       float (&v)[4]) const {
    if constexpr (VEC) {
      const int rr = r0 + r, kk = k0 + k;
      if (rr < R && kk < K) {
        const float4 q = *reinterpret_cast<const float4*>(
            p + (KC ? static_cast<std::size_t>(rr) * ld + kk : static_cast<std::size_t>(kk) * ld + rr));
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
      } else {
        v[0] = v[1] = v[2] = v[3] = 0.0f;
      }
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int rr = r0 + r + dr(e), kk = k0 + k + dk(e);
        if constexpr (MUT == kNoGuard && KC) {
          // The bug: no k guard, so the tail reads on into the next row
          // (clamped to the matrix so the read itself stays in bounds).
          const std::size_t last = static_cast<std::size_t>(R - 1) * ld + static_cast<std::size_t>(K - 1);
          std::size_t at = static_cast<std::size_t>(rr) * ld + kk;
          at = at < last ? at : last;
          v[e] = rr < R ? p[at] : 0.0f;
        } else {
          v[e] = (rr < R && kk < K)
                     ? p[KC ? static_cast<std::size_t>(rr) * ld + kk : static_cast<std::size_t>(kk) * ld + rr]
                     : 0.0f;
        }
      }
    }
  }
  __device__ __forceinline__ void store(float* St, const float (&v)[4]) const {
    if constexpr (!KC && VEC) {
      *reinterpret_cast<float4*>(St + k * C::LDS + r) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) St[(k + dk(e)) * C::LDS + r + dr(e)] = v[e];
    }
  }
};

// k steps [0, steps) of one staged tile pair into the accumulators. Thread
// (tx, ty) owns rows q*64 + ty*4 + {0..3} and columns q*64 + tx*4 + {0..3}.
template <int S, int MUT, bool FULL>
__device__ __forceinline__ void mac_tile(const float* __restrict__ As, const float* __restrict__ Bs, int tx, int ty,
                                         int steps, float (&acc)[4 * S][4 * S]) {
  using C = Cfg<S>;
#pragma unroll
  for (int kk = 0; kk < C::BK; ++kk) {
    if (!FULL && kk >= steps) break;
    float a[C::R], b[C::R];
#pragma unroll
    for (int q = 0; q < S; ++q) {
      const float4 av = *reinterpret_cast<const float4*>(As + kk * C::LDS + q * 64 + ty * 4);
      const float4 bv = *reinterpret_cast<const float4*>(Bs + kk * C::LDS + q * 64 + tx * 4);
      a[4 * q] = av.x, a[4 * q + 1] = av.y, a[4 * q + 2] = av.z, a[4 * q + 3] = av.w;
      b[4 * q] = bv.x, b[4 * q + 1] = bv.y, b[4 * q + 2] = bv.z, b[4 * q + 3] = bv.w;
    }
#pragma unroll
    for (int r = 0; r < C::R; ++r)
#pragma unroll
      for (int c = 0; c < C::R; ++c) {
        if constexpr (MUT == kAssign)
          acc[r][c] = __fmul_rn(a[r], b[c]);
        else
          acc[r][c] = __fmaf_rn(a[r], b[c], acc[r][c]);
      }
  }
}

template <int S, bool AKC, bool BKC, bool VA, bool VB, int MUT>
__global__ void __launch_bounds__(kThreads, S == 2 ? 2 : 4)
    gemm_kernel(int I, int J, int K, const float* __restrict__ A, std::size_t lda, const float* __restrict__ B,
                std::size_t ldb, float* __restrict__ C, std::size_t ldc, Epi epi) {
  using Cf = Cfg<S>;
  constexpr int BK = Cf::BK;
  __shared__ __align__(16) float As[2][BK * Cf::LDS];
  __shared__ __align__(16) float Bs[2][BK * Cf::LDS];
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid & 15, ty = tid >> 4;
  const int i0 = static_cast<int>(blockIdx.y) * Cf::BM, j0 = static_cast<int>(blockIdx.x) * Cf::BM;

  Tile<S, AKC, VA, MUT> ta;
  Tile<S, BKC, VB, MUT> tb;
  ta.init(tid);
  tb.init(tid);

  float acc[Cf::R][Cf::R];
#pragma unroll
  for (int r = 0; r < Cf::R; ++r)
#pragma unroll
    for (int c = 0; c < Cf::R; ++c) acc[r][c] = 0.0f;

  const int tiles = (K + BK - 1) / BK;
  float va[4], vb[4];
  if (tiles > 0) {
    ta.load(A, lda, I, K, i0, 0, va);
    tb.load(B, ldb, J, K, j0, 0, vb);
    ta.store(As[0], va);
    tb.store(Bs[0], vb);
    __syncthreads();
  }
  for (int t = 0; t < tiles; ++t) {
    const int cur = MUT == kNoBarrier ? 0 : (t & 1);
    const bool more = t + 1 < tiles;
    if (more) {
      ta.load(A, lda, I, K, i0, (t + 1) * BK, va);
      tb.load(B, ldb, J, K, j0, (t + 1) * BK, vb);
    }
    if constexpr (MUT == kNoBarrier) {
      // The bug: one buffer and no barrier before the overwrite, so the next
      // tile lands on the current one before it is used.
      if (more) {
        ta.store(As[0], va);
        tb.store(Bs[0], vb);
      }
    }
    const int steps = MUT == kNoGuard ? BK : K - t * BK;
    if (steps >= BK)
      mac_tile<S, MUT, true>(As[cur], Bs[cur], tx, ty, BK, acc);
    else
      mac_tile<S, MUT, false>(As[cur], Bs[cur], tx, ty, steps, acc);
    if (more) {
      if constexpr (MUT != kNoBarrier) {
        ta.store(As[cur ^ 1], va);
        tb.store(Bs[cur ^ 1], vb);
      }
      __syncthreads();
    }
  }

  // Epilogue: canonical NaN, then the bias or the scales, then the store.
  const int jlimit = MUT == kSkipLast ? J - 1 : J;
  const bool vec_store = (ldc & 3) == 0 && (reinterpret_cast<std::uintptr_t>(C) & 15) == 0;
  const float scale = epi.row_scale != nullptr ? *epi.scale : 0.0f;
#pragma unroll
  for (int r = 0; r < Cf::R; ++r) {
    const int i = i0 + (r / 4) * 64 + ty * 4 + (r % 4);
    if (i >= I) continue;
    const float rs = epi.row_scale != nullptr ? epi.row_scale[i] : 0.0f;
    float* crow = C + static_cast<std::size_t>(i) * ldc;
#pragma unroll
    for (int h = 0; h < S; ++h) {
      const int jb = j0 + h * 64 + tx * 4;
      float v[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) v[c] = epilogue_cell(acc[r][h * 4 + c], epi, jb + c, J, rs, scale);
      store_four(crow, jb, v, vec_store, jlimit);
    }
  }
}

template <int S, bool AKC, bool BKC, bool VA, bool VB, int MUT>
void launch_one(int I, int J, int K, const float* A, std::size_t lda, const float* B, std::size_t ldb, float* C,
                std::size_t ldc, const Epi& epi) {
  constexpr int BM = Cfg<S>::BM;
  const dim3 grid(static_cast<unsigned>((J + BM - 1) / BM), static_cast<unsigned>((I + BM - 1) / BM));
  static const char* const path = detail::gemm_path(S, AKC, BKC, VA, VB, MUT != kClean);
  trace::launched(path);
  gemm_kernel<S, AKC, BKC, VA, VB, MUT><<<grid, kThreads>>>(I, J, K, A, lda, B, ldb, C, ldc, epi);
}

int g_tile_override = 0;

// The block tile from the output's shape: gemm_tile_rule.hpp's model, on this
// device's multiprocessor count (or the override).
int choose_tile(int I, int J, bool vec) {
  if (g_tile_override >= 1 && g_tile_override <= kGemmTiles) return g_tile_override;
  static const long sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      return 132L;
    return static_cast<long>(n);
  }();
  return tile_rule(I, J, vec, sms);
}

template <int S, bool AKC, bool BKC>
void dispatch_clean(int I, int J, int K, const float* A, std::size_t lda, const float* B, std::size_t ldb, float* C,
                    std::size_t ldc, const Epi& epi) {
  // 16-byte loads: the pointer aligned, the row stride and the extent along
  // the contiguous index multiples of 4 (so a vector is wholly in or out).
  const auto aligned = [](const float* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15) == 0; };
  const bool va = aligned(A) && lda % 4 == 0 && (AKC ? K % 4 == 0 : I % 4 == 0);
  const bool vb = aligned(B) && ldb % 4 == 0 && (BKC ? K % 4 == 0 : J % 4 == 0);
  if (va && vb) return launch_one<S, AKC, BKC, true, true, kClean>(I, J, K, A, lda, B, ldb, C, ldc, epi);
  if (va) return launch_one<S, AKC, BKC, true, false, kClean>(I, J, K, A, lda, B, ldb, C, ldc, epi);
  if (vb) return launch_one<S, AKC, BKC, false, true, kClean>(I, J, K, A, lda, B, ldb, C, ldc, epi);
  return launch_one<S, AKC, BKC, false, false, kClean>(I, J, K, A, lda, B, ldb, C, ldc, epi);
}

long g_tile_launches[kGemmTiles + 1] = {};

// The gemm bug a mutant names (detail::Mut), kClean for none or another
// family's.
int gemm_mut(Mutant m) {
  switch (m) {
    case Mutant::gemm_assign_not_accumulate: return kAssign;
    case Mutant::gemm_no_bounds_guard: return kNoGuard;
    case Mutant::gemm_skip_last_column: return kSkipLast;
    case Mutant::gemm_missing_barrier: return kNoBarrier;
    default: return kClean;
  }
}

// gemm.cu's 128×128 kernel with scalar loads and the bug `mut` planted.
template <bool AKC, bool BKC>
void launch_mutant(int mut, int I, int J, int K, const float* A, std::size_t lda, const float* B, std::size_t ldb,
                   float* C, std::size_t ldc, const Epi& epi) {
  switch (mut) {
    case kAssign: return launch_one<2, AKC, BKC, false, false, kAssign>(I, J, K, A, lda, B, ldb, C, ldc, epi);
    case kNoGuard: return launch_one<2, AKC, BKC, false, false, kNoGuard>(I, J, K, A, lda, B, ldb, C, ldc, epi);
    case kSkipLast: return launch_one<2, AKC, BKC, false, false, kSkipLast>(I, J, K, A, lda, B, ldb, C, ldc, epi);
    default: return launch_one<2, AKC, BKC, false, false, kNoBarrier>(I, J, K, A, lda, B, ldb, C, ldc, epi);
  }
}

template <bool AKC, bool BKC>
void dispatch(int I, int J, int K, const float* A, std::size_t lda, const float* B, std::size_t ldb, float* C,
              std::size_t ldc, const Epi& epi) {
  const auto aligned = [](const float* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15) == 0; };
  const bool va = aligned(A) && lda % 4 == 0 && (AKC ? K % 4 == 0 : I % 4 == 0);
  const bool vb = aligned(B) && ldb % 4 == 0 && (BKC ? K % 4 == 0 : J % 4 == 0);
  const int tile = choose_tile(I, J, va && vb);
  const detail::TiledArgs args{I,   J,   K,   A,     lda,      B,        ldb, C, ldc, AKC, BKC, va && vb, va && vb,
                               epi.bias, epi.row_scale, epi.scale};
  const int mut = gemm_mut(mutant());
  if (mut != kClean) [[unlikely]] {
    // The bug goes where the clean product would run: into the tiled kernel
    // the rule (or the override) picked, with the same loads; tiles 1 and 2
    // (and a tiled shape that cannot launch) run this file's 128×128 kernel
    // with scalar loads.
    if (tile >= 3 && detail::gemm_tiled_mutant(tile, args, mut)) {
      ++g_tile_launches[tile];
      return;
    }
    ++g_tile_launches[2];
    return launch_mutant<AKC, BKC>(mut, I, J, K, A, lda, B, ldb, C, ldc, epi);
  }
  if (tile == 1) {
    ++g_tile_launches[1];
    return dispatch_clean<1, AKC, BKC>(I, J, K, A, lda, B, ldb, C, ldc, epi);
  }
  if (tile >= 3 && detail::gemm_tiled(tile, args)) {
    ++g_tile_launches[tile];
    return;
  }
  ++g_tile_launches[2];
  dispatch_clean<2, AKC, BKC>(I, J, K, A, lda, B, ldb, C, ldc, epi);
}

int checked_int(std::size_t n, const char* what) {
  if (n > 0x7FFFFFFFu) throw std::invalid_argument(std::string("cuda gemm: ") + what + " exceeds 2^31 - 1");
  return static_cast<int>(n);
}

// column_sums: each column's sum is one sequential chain over the rows
// (ops::column_sums), so a column is one thread's work and the time floor is
// the chain: N dependent adds (~4 cycles each). A block owns 32 columns; warp 0
// runs the 32 chains, and all 8 warps keep the next tiles of 64 rows × 32
// columns in flight with cp.async into a ring of kSumStages shared buffers, so
// the chain never waits for memory. (The previous form loaded a tile, then
// summed it, with no overlap: 0.35 ms at N 16384 against a ~35 µs chain.)
constexpr int kSumRows = 64, kSumStages = 5;  // 5 × 64 × 33 floats = 42 KB of shared memory

using ::lockstep::cuda::detail::cp_async4;
using ::lockstep::cuda::detail::cp_async_commit;
using ::lockstep::cuda::detail::cp_async_wait;

__global__ void __launch_bounds__(256) column_sums_kernel(const float* __restrict__ a, int N, int D,
                                                          float* __restrict__ out) {
  __shared__ float tile[kSumStages][kSumRows][33];
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int j = static_cast<int>(blockIdx.x) * 32 + lane;
  const int tiles = (N + kSumRows - 1) / kSumRows;
  // Tile t into buffer t % kSumStages: rows warp, warp + 8, ... of it. One
  // commit group per tile, empty past the end, so the group count is uniform.
  const auto issue = [&](int t) {
    if (t < tiles) {
      const int n0 = t * kSumRows;
      float(*buf)[33] = tile[t % kSumStages];
      for (int r = warp; r < kSumRows; r += 8)
        if (n0 + r < N && j < D) cp_async4(&buf[r][lane], a + static_cast<std::size_t>(n0 + r) * D + j);
    }
    cp_async_commit();
  };
  for (int t = 0; t < kSumStages - 1; ++t) issue(t);
  float acc = 0.0f;
  for (int t = 0; t < tiles; ++t) {
    // Into the buffer tile t - 1 used: every warp left it at the barrier
    // ending the previous iteration.
    issue(t + kSumStages - 1);
    cp_async_wait<kSumStages - 1>();  // this thread's copies of tile t have landed (groups complete in order)
    __syncthreads();                  // and everyone's
    if (warp == 0) {
      const int rows = N - t * kSumRows < kSumRows ? N - t * kSumRows : kSumRows;
      const float(*buf)[33] = tile[t % kSumStages];
      // The chain, one add per row in order; unrolled so the shared-memory
      // loads run ahead of the adds.
#pragma unroll 16
      for (int r = 0; r < rows; ++r) acc = __fadd_rn(acc, buf[r][lane]);
    }
    __syncthreads();
  }
  if (warp == 0 && j < D) out[j] = acc;
}

}  // namespace

void gemm(std::size_t I, std::size_t J, std::size_t K, const float* A, std::size_t sai, std::size_t sak,
          const float* B, std::size_t sbk, std::size_t sbj, float* C, std::size_t ldc, const GemmEpilogue& e) {
  if (I == 0 || J == 0) return;
  const int i = checked_int(I, "I"), j = checked_int(J, "J"), k = checked_int(K, "K");
  const Epi epi{e.bias, e.row_scale, e.scale};
  const bool akc = sak == 1, bkc = sbk == 1;
  if (!akc && sai != 1) throw std::invalid_argument("cuda gemm: A needs a unit stride");
  if (!bkc && sbj != 1) throw std::invalid_argument("cuda gemm: B needs a unit stride");
  const std::size_t lda = akc ? sai : sak, ldb = bkc ? sbj : sbk;
  if (akc && bkc)
    dispatch<true, true>(i, j, k, A, lda, B, ldb, C, ldc, epi);
  else if (akc)
    dispatch<true, false>(i, j, k, A, lda, B, ldb, C, ldc, epi);
  else if (!bkc)
    dispatch<false, false>(i, j, k, A, lda, B, ldb, C, ldc, epi);
  else
    dispatch<false, true>(i, j, k, A, lda, B, ldb, C, ldc, epi);
  check_launch("gemm");
}

void gemm_xwt(std::size_t N, std::size_t M, std::size_t K, const float* X, const float* W, float* Y,
              const GemmEpilogue& epi) {
  gemm(N, M, K, X, K, 1, W, 1, K, Y, M, epi);
}
void gemm_dyw(std::size_t N, std::size_t M, std::size_t K, const float* dY, const float* W, float* dX) {
  gemm(N, K, M, dY, M, 1, W, K, 1, dX, K);
}
void gemm_dytx(std::size_t N, std::size_t M, std::size_t K, const float* dY, const float* X, float* dW) {
  gemm(M, K, N, dY, 1, M, X, K, 1, dW, K);
}

namespace detail {
const char* gemm_path(int tile, bool akc, bool bkc, bool va, bool vb, bool mutant) {
  static const char* const digits[] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
  return trace::compose("gemm tile ", digits[tile >= 0 && tile <= 9 ? tile : 0], " [A ", akc ? "k" : "i", "-major ",
                        va ? "16B" : "4B", ", B ", bkc ? "k" : "j", "-major ", vb ? "16B" : "4B", "]",
                        mutant ? " (mutant)" : "");
}
}  // namespace detail

void gemm_tile_override(int tile) { g_tile_override = tile; }
long gemm_tile_launches(int tile) { return tile >= 1 && tile <= kGemmTiles ? g_tile_launches[tile] : 0; }
void gemm_tile_launches_reset() {
  for (long& n : g_tile_launches) n = 0;
}

void column_sums(const float* a, std::size_t N, std::size_t D, float* out) {
  if (D == 0) return;
  const int n = checked_int(N, "N"), d = checked_int(D, "D");
  trace::launched("column_sums");
  column_sums_kernel<<<static_cast<unsigned>((d + 31) / 32), 256>>>(a, n, d, out);
  check_launch("column_sums");
}

}  // namespace lockstep::cuda::launch
