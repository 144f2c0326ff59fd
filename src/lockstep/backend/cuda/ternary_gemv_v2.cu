// ternary_gemv v2: ops::BitLinear's forward on the 2-bit codes for a few rows
// (the decode projections), selected by LOCKSTEP_TERNARY_GEMV=v2 | v2pdl
// (decode_linear_launch.hpp: ternary_gemv_version; the default stays the
// warp-a-row kernel of decode_linear.cu until v2 is measured on the device).
// CPU reference: ops::BitLinear::forward (the spec) and
// DecodeBackend<cpu::OpKernels>::linear; bit for bit the same cells as
// decode_linear.cu's kernel.
//
// Why the bits cannot move. DESIGN.md §1 ("Int8 units"): int8 x int8
// products accumulated in int32 are exact, so any correct order of the
// integer sum gives the same int32 (|acc| <= 2·127·K < 2^31 for K <= 96 Ki,
// the launcher's bound), and the epilogue's order is fixed: int32 -> f32, then
// the scale products in the stated order. Here that is ops::BitLinear's
// (f32(acc) * step_n) * scale: __int2float_rn, then two __fmul_rn, exactly
// decode_linear.cu's expression. Everything below reorders only integers.
//
// What changes against the warp-a-row kernel (both read ternary_word.hpp's
// words: field = code + 1 at bits 8i + 2j, so Σ field·x = Σ code·x + Σ x):
//   * a warp owns R output rows (2, or 4 for chunks of 4 and 8 batch rows), a
//     CTA of 4 warps 4R rows: each activation int4 read from shared memory
//     feeds R rows' __dp4a (the shared-memory reads a code byte costs fall
//     R-fold), and the CTA's staged codes serve 4R rows (global reads of x
//     halve at R = 2, quarter at R = 4);
//   * Σ x is no longer a separate pass (a warp a batch row over the staged
//     row, then a second barrier): each lane sums the activation ints it reads
//     anyway (__dp4a with 0x01010101) and subtracts its Σ x from its R
//     partials before the warp's shuffle join — one barrier a chunk, not two;
//   * each lane's first Pre units of each of its R rows (every unit of a row of
//     K <= 32·Pre·64 codes; Pre 2 up to K 4096, 4 up to K 8192) are loaded
//     into registers first, before the wait on the previous kernel and before
//     the staging: with LOCKSTEP_TERNARY_GEMV=v2pdl the launch is a
//     programmatic dependent launch (sm_90), so those weight loads (read-only
//     for the session) are issued while the kernel before it drains, and
//     griddepcontrol.wait orders every read of x and step and every write of y
//     after that kernel's completion;
//   * the join's result is in every lane (xor shuffles), and lane
//     (r·NB + n) mod 32 stores cell (n, r): the stores spread over the warp.
//
// The norm in the prologue (LOCKSTEP_DECODE_NORM_GEMV, TernaryV2Options::norm;
// docs/perf/DECODE_CUDA.md §15): at 1 or 2 rows the decode's RMSNorm + codes
// (norm.cu's rmsnorm_quantize_i8) is a single-CTA launch whose only reader is
// this kernel. With a NormPrologue, each CTA, after its weight prefetch and
// the wait, stages the float rows x itself and runs the norm with row_cta.cuh's
// own functions on its 128 threads (stage_row, norm_scale_staged: rs by
// rms_rstd's canonical tree, y = (x·rs)·w, the CTA's max, RowScale;
// store_codes), the codes into its shared activation buffer and the steps
// into shared memory: the standalone kernel's bits by construction (the same
// calls; the thread count changes no bit, row_cta.cuh). CTA 0 alone also
// writes the norm's global outputs y, rstd, codes and step, so that any other
// reader (LoRA's branch reads y) sees the standalone kernel's bits. Every CTA
// repeats the norm (2560 floats from L2 and two barriers a row against a
// ~5 µs launch of its own); the rows are bounded by kNormGemvMaxRows.
//
// The kernel is written with the LS_* hooks so that the host fiber emulator
// (tests/cuda/cuda_host_emu.hpp, tests/cuda/ternary_gemv_emu_test.cpp) runs it
// on the CPU under shuffled thread orders against ops::BitLinear::forward.
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "lockstep/backend/cuda/decode_linear_launch.hpp"
#include "lockstep/backend/cuda/device.hpp"
#if !defined(LS_HOST_EMULATOR)
#include "lockstep/backend/cuda/pdl_launch.cuh"
#endif
#include "lockstep/backend/cuda/pdl_device.cuh"
#include "lockstep/backend/cuda/row_cta.cuh"
#include "lockstep/backend/cuda/ternary_epilogue.cuh"
#include "lockstep/backend/cuda/ternary_word.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"

#include "lockstep/backend/cuda/ls_hooks.cuh"  // LS_SMEM, LS_LAUNCH, LS_SET_SMEM (the host emulator's first)

namespace lockstep::cuda::launch {
namespace {

using i64 = long long;

constexpr int kV2Threads = 128;  // 4 warps
constexpr int kV2Warps = kV2Threads / 32;
constexpr int kV2MaxRows = 16;     // batch rows a chunk (their codes staged in shared memory)
constexpr int kV2SmemCap = 96 * 1024;

// Output rows a warp owns for a chunk of NB batch rows: its partials are R·NB
// ints, and its prefetched units R·Pre uint4, in registers.
constexpr int rows_a_warp(int NB) { return NB == 4 || NB == 8 ? 4 : 2; }

struct V2Parts {
  const uint4* units[kTernaryMaxParts];
  const float* scale[kTernaryMaxParts];
  float* y[kTernaryMaxParts];
  const float* add[kTernaryMaxParts];  // a residual epilogue's other operand (ternary_epilogue.cuh), or null
  float* sum[kTernaryMaxParts];        // its output (null: none)
  int add_first[kTernaryMaxParts];
  int M[kTernaryMaxParts];
  int block0[kTernaryMaxParts];
  int count;
};

struct V2Args {
  V2Parts parts;
  int K, U;  // U: units a row (ternary_units(K))
  const std::int8_t* xq;
  int N;
  const float* step;
  bool drop_last_unit;   // DecodeLinearMutant::ternary_last_unit_dropped
  bool half_warp_join;   // DecodeLinearMutant::ternary_v2_half_warp_join
  bool residual_contracted;  // DecodeLinearMutant::ternary_residual_contracted
  bool plant_no_reuse_barrier;  // the emulator test's planted bug (read only under LS_HOST_EMULATOR)
  NormPrologue norm;            // the norm prologue's operands (kernels with kNormPrologue only)
  bool plant_norm_blocked_lanes;  // the emulator test's planted bug (read only under LS_HOST_EMULATOR)
};

// The kernel's norm flags (its template parameter Norm): the norm prologue, its
// 16-byte path (D % 4 == 0 and x, w, y aligned, codes 4-byte aligned), and the
// mutant Mutant::norm_quantize_stale_row (the codes of x, not of y).
constexpr int kNormPrologue = 1, kNormVec = 2, kNormStale = 4;
constexpr int kNormBlocked = 8;  // the emulator test's planted bug: rs with lanes folding contiguous runs

// The norm prologue's shared memory after the NB·Kp codes: the staged float
// row (D rounded up to 4), then row_cta's partial [kWarps·4], s_rs [4], s_key
// and s_mag [kWarps each] and the rows' steps [4] (floats).
constexpr std::size_t norm_smem_floats(std::size_t D) {
  return (D + 3) / 4 * 4 + cuda::detail::row_cta::kWarps * 4 + 4 + 2 * cuda::detail::row_cta::kWarps + 4;
}

template <class T>
__device__ __forceinline__ T v2_part_of(const T (&v)[kTernaryMaxParts], int p) {
  static_assert(kTernaryMaxParts == 3);
  return p == 0 ? v[0] : p == 1 ? v[1] : v[2];
}

__device__ __forceinline__ std::uint32_t word_of(const uint4& c, int q) {
  return q == 0 ? c.x : q == 1 ? c.y : q == 2 ? c.z : c.w;
}

// Waits for the kernel before this one (its writes visible) when launched as a
// programmatic dependent launch; returns at once otherwise.
__device__ __forceinline__ void wait_for_previous_kernel() { pdl::pdl_wait(); }  // pdl_device.cuh

// One unit column j of the warp's R rows against one batch row's 64 staged
// codes xn (16-byte aligned): acc[r] += Σ field·x, sx += Σ x. The four words
// in an order rotated by rot (lane / 2 mod 4), so that the 8 lanes of a
// 16-byte shared-memory phase (units 64 bytes apart) read 8 different bank
// quads, as decode_linear.cu's unit_dot.
template <int R>
__device__ __forceinline__ void unit_dots(const uint4 (&c)[R], const std::int8_t* xn, int rot, int (&acc)[R],
                                          int& sx) {
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int qq = (q + rot) & 3;
    const int4 x4 = *reinterpret_cast<const int4*>(xn + 16 * qq);
    const int xv[4] = {x4.x, x4.y, x4.z, x4.w};
#pragma unroll
    for (int t = 0; t < 4; ++t) sx = dp4a_s8(xv[t], 0x01010101, sx);
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] += ternary_word_dot(word_of(c[r], qq), xv);
  }
}

// The norm prologue (see the head comment): rows n < nb of the norm's x
// [nb, K] normalized and quantized as rmsnorm_quantize_i8's CTA path does,
// their codes into xs [nb][Kp] (zero past K) and steps into the returned
// shared array; CTA 0 also writes y, rstd, codes and step. after: the shared
// memory past xs. The caller synchronizes before reading xs or the steps.
template <int Norm>
__device__ __forceinline__ const float* norm_prologue(const NormPrologue& nm, int K, int Kp, int nb,
                                                      std::int8_t* xs, float* after) {
  namespace rc = cuda::detail::row_cta;
  constexpr bool Vec = (Norm & kNormVec) != 0, Stale = (Norm & kNormStale) != 0, Blocked = (Norm & kNormBlocked) != 0;
  constexpr unsigned T = static_cast<unsigned>(kV2Threads);
  const std::size_t D = static_cast<std::size_t>(K);
  float4* row = reinterpret_cast<float4*>(after);
  float* partial = after + (D + 3) / 4 * 4;
  float* s_rs = partial + rc::kWarps * 4;
  auto* s_key = reinterpret_cast<std::int32_t*>(s_rs + 4);
  auto* s_mag = reinterpret_cast<std::uint32_t*>(s_key + rc::kWarps);
  float* s_step = reinterpret_cast<float*>(s_mag + rc::kWarps);
  const int tid = static_cast<int>(threadIdx.x);
  const bool first = blockIdx.x == 0;
  const int pad = Kp - K;  // codes past K: 0 (their fields multiply nothing)
  for (int e = tid; e < nb * pad; e += kV2Threads) xs[static_cast<i64>(e / pad) * Kp + K + e % pad] = 0;
  for (int n = 0; n < nb; ++n) {
    if (n > 0) __syncthreads();  // (row n - 1's shared scalars and staged row are done with)
    rc::stage_row<Vec, T>(nm.x + static_cast<i64>(n) * K, D, row, [](float) {});
    __syncthreads();
    const rc::RowScale sc = rc::norm_scale_staged<Vec, Stale, T, true, Blocked>(
        row, D, nm.eps, nm.w, first ? nm.y + static_cast<i64>(n) * K : nullptr, first ? nm.rstd + n : nullptr,
        nm.floor_x, partial, s_rs, s_key, s_mag);
    rc::store_codes<std::int8_t, false, Vec, T>(row, D, sc, xs + static_cast<i64>(n) * Kp, nullptr);
    if (first) rc::store_codes<std::int8_t, false, Vec, T>(row, D, sc, nm.codes + static_cast<i64>(n) * K, nullptr);
    if (tid == 0) {
      s_step[n] = sc.st;
      if (first) nm.step[n] = sc.st;
    }
  }
  return s_step;
}

// Norm: 0, the codes xq and steps read from global memory; kNormPrologue (|
// kNormVec, | kNormStale): the norm prologue makes them (one chunk: N <= NB).
template <int NB, int Pre, int Norm = 0>
__global__ void __launch_bounds__(kV2Threads) ternary_gemv_v2_kernel(const V2Args a) {
  constexpr int R = rows_a_warp(NB);
  pdl::pdl_trigger();  // PDL (pdl_device.cuh; v2pdl, LOCKSTEP_DECODE_PDL): the next kernel may launch now
  LS_SMEM(smem_floats);
  std::int8_t* xs = reinterpret_cast<std::int8_t*>(smem_floats);  // [NB][Kp], zero past K
  const int K = a.K, U = a.U, Kp = U * 64, N = a.N;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int block = static_cast<int>(blockIdx.x);
  int p = 0;
#pragma unroll
  for (int i = 1; i < static_cast<int>(kTernaryMaxParts); ++i)
    if (i < a.parts.count && block >= a.parts.block0[i]) p = i;
  const uint4* __restrict__ units = v2_part_of(a.parts.units, p);
  float* y = v2_part_of(a.parts.y, p);  // (may be the residual's sum: not __restrict__)
  const float* add = v2_part_of(a.parts.add, p);
  float* sum = v2_part_of(a.parts.sum, p);
  const bool add_first = v2_part_of(a.parts.add_first, p) != 0;
  const int M = v2_part_of(a.parts.M, p);
  const int m0 = (block - v2_part_of(a.parts.block0, p)) * (kV2Warps * R) + warp * R;
  const bool active = m0 < M;  // a warp past the part's rows still stages and meets the barriers
  const int U_used = a.drop_last_unit ? U - 1 : U;
  const int rot = (lane >> 1) & 3;
  // The warp's row r reads row min(m0 + r, M - 1): rows past M compute a copy nobody stores.
  const uint4* wr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) wr[r] = units + static_cast<i64>(active ? (m0 + r < M ? m0 + r : M - 1) : 0) * U;
  // The weight units first: read-only for the session, so they may be in flight before the wait.
  uint4 pre[Pre][R];
#pragma unroll
  for (int i = 0; i < Pre; ++i) {
    const int j = lane + 32 * i;
#pragma unroll
    for (int r = 0; r < R; ++r) pre[i][r] = active && j < U_used ? wr[r][j] : make_uint4(0u, 0u, 0u, 0u);
  }
  wait_for_previous_kernel();
  const float sc = v2_part_of(a.parts.scale, p)[0];
  const std::int8_t* __restrict__ xq = a.xq;
  const bool vec = K % 16 == 0 && (reinterpret_cast<std::uintptr_t>(xq) & 15u) == 0;
  for (int n0 = 0; n0 < N; n0 += NB) {
    const int nb = N - n0 < NB ? N - n0 : NB;
    const float* step = a.step + n0;
    // Stage the chunk's activation codes (16-byte loads where K allows; zero past K).
    if constexpr ((Norm & kNormPrologue) != 0) {
      step = norm_prologue<Norm>(a.norm, K, Kp, nb, xs, smem_floats + static_cast<i64>(NB) * Kp / 4);
    } else if (vec) {
      const int vk = K / 16, vp = Kp / 16;
      for (int e = tid; e < nb * vp; e += kV2Threads) {
        const int n = e / vp, v = e - n * vp;
        int4 val = make_int4(0, 0, 0, 0);
        if (v < vk) val = reinterpret_cast<const int4*>(xq + static_cast<i64>(n0 + n) * K)[v];
        reinterpret_cast<int4*>(xs + static_cast<i64>(n) * Kp)[v] = val;
      }
    } else {
      for (int e = tid; e < nb * Kp; e += kV2Threads) {
        const int n = e / Kp, k = e - n * Kp;
        xs[e] = k < K ? xq[static_cast<i64>(n0 + n) * K + k] : static_cast<std::int8_t>(0);
      }
    }
    __syncthreads();
    if (active) {
      int acc[NB][R], sx[NB];
#pragma unroll
      for (int n = 0; n < NB; ++n) {
        sx[n] = 0;
#pragma unroll
        for (int r = 0; r < R; ++r) acc[n][r] = 0;
      }
#pragma unroll
      for (int i = 0; i < Pre; ++i) {
        const int j = lane + 32 * i;
        if (j >= U_used) break;
#pragma unroll
        for (int n = 0; n < NB; ++n)
          if (n < nb) unit_dots<R>(pre[i], xs + static_cast<i64>(n) * Kp + j * 64, rot, acc[n], sx[n]);
      }
#pragma unroll 2
      for (int j = lane + 32 * Pre; j < U_used; j += 32) {
        uint4 c[R];
#pragma unroll
        for (int r = 0; r < R; ++r) c[r] = wr[r][j];
#pragma unroll
        for (int n = 0; n < NB; ++n)
          if (n < nb) unit_dots<R>(c, xs + static_cast<i64>(n) * Kp + j * 64, rot, acc[n], sx[n]);
      }
      // The join: each lane's Σ field·x − Σ x, summed over the warp (exact: integers).
      const int first = a.half_warp_join ? 8 : 16;
#pragma unroll
      for (int n = 0; n < NB; ++n) {
        if (n >= nb) break;
        const float st = step[n];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          int v = acc[n][r] - sx[n];
          for (int off = first; off >= 1; off /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, off);
          const int m = m0 + r;
          if (lane == ((r * NB + n) & 31) && m < M)
            ternary_cell_store(y, static_cast<i64>(n0 + n) * M + m, v, st, sc, add, sum, add_first,
                               a.residual_contracted);
        }
      }
    }
#if defined(LS_HOST_EMULATOR)
    if (a.plant_no_reuse_barrier) continue;  // the emulator test's planted bug
#endif
    __syncthreads();  // the next chunk overwrites xs
  }
}

template <int NB, int Pre, int Norm = 0>
void launch_v2_as(const V2Args& a, unsigned blocks, bool pdl) {
  const int bytes = NB * a.U * 64 +
                    (Norm != 0 ? static_cast<int>(norm_smem_floats(static_cast<std::size_t>(a.K)) * sizeof(float)) : 0);
  auto* kernel = ternary_gemv_v2_kernel<NB, Pre, Norm>;
#if defined(LS_HOST_EMULATOR)
  (void)pdl;
  LS_LAUNCH(kernel, dim3(blocks), dim3(kV2Threads), bytes, a);
#else
  static bool attribute_set = false;  // up to 96 KiB of activation codes need more than the default 48 KiB
  if (!attribute_set) {
    if (LS_SET_SMEM(kernel, kV2SmemCap) != cudaSuccess) check_launch("ternary_gemv v2: setting its shared memory size");
    attribute_set = true;
  }
  if (!pdl) {
    LS_LAUNCH_PDL(kernel, dim3(blocks), dim3(kV2Threads), bytes, a);  // programmatic unless LOCKSTEP_DECODE_PDL=0
  } else if (detail::launch_programmatic(kernel, dim3(blocks), dim3(kV2Threads), static_cast<std::size_t>(bytes), a) !=
             cudaSuccess) {
    check_launch("ternary_gemv v2 (PDL)");
  }
#endif
}

template <int NB, int Norm = 0>
void launch_v2(const V2Args& a, unsigned blocks, bool pdl) {
  if (a.U <= 64) launch_v2_as<NB, 2, Norm>(a, blocks, pdl);
  else launch_v2_as<NB, 4, Norm>(a, blocks, pdl);
}

// The norm prologue's launch: nb (1 or 2) rows, the flags of x, w, y, codes.
template <int NB>
void launch_v2_norm(const V2Args& a, unsigned blocks, bool pdl, bool stale) {
  const NormPrologue& nm = a.norm;
  const auto aligned = [](const void* p, std::uintptr_t n) { return reinterpret_cast<std::uintptr_t>(p) % n == 0; };
  const bool vec = a.K % 4 == 0 && aligned(nm.x, 16) && aligned(nm.w, 16) && aligned(nm.y, 16) && aligned(nm.codes, 4);
#if defined(LS_HOST_EMULATOR)
  if (a.plant_norm_blocked_lanes) return launch_v2<NB, kNormPrologue | kNormBlocked>(a, blocks, pdl);
#endif
  if (stale) launch_v2<NB, kNormPrologue | kNormStale>(a, blocks, pdl);
  else if (vec) launch_v2<NB, kNormPrologue | kNormVec>(a, blocks, pdl);
  else launch_v2<NB, kNormPrologue>(a, blocks, pdl);
}

}  // namespace

void ternary_gemv_parts_v2(const TernaryPart* parts, std::size_t count, std::size_t K, const std::int8_t* xq,
                           std::size_t N, const float* step, const TernaryV2Options& options) {
  // The caller (ternary_gemv_parts) has checked count, K, N and each M against the int extents.
  if (count == 0 || N == 0) return;
  const std::size_t U = ternary_units(K), Kp = U * 64;
  const NormPrologue* norm = options.norm;
  if (norm != nullptr && !norm_gemv_fits(N, K))
    throw std::invalid_argument("ternary_gemv v2 (norm prologue): rows or K outside norm_gemv_fits");
  // Batch rows per chunk: the largest of 1, 2, 4, 8, 16 whose codes fit 96 KiB, and no larger than N needs.
  std::size_t cap = static_cast<std::size_t>(kV2SmemCap - (norm != nullptr ? norm_smem_floats(K) * sizeof(float) : 0)) / Kp;
  if (cap > static_cast<std::size_t>(kV2MaxRows)) cap = kV2MaxRows;
  std::size_t nb = 1;
  while (nb * 2 <= cap && nb < N) nb *= 2;
  const std::size_t rows_a_cta = static_cast<std::size_t>(kV2Warps * rows_a_warp(static_cast<int>(nb)));
  V2Args a{};
  std::size_t blocks = 0;
  for (std::size_t p = 0; p < count; ++p) {
    a.parts.units[p] = reinterpret_cast<const uint4*>(parts[p].words);
    a.parts.scale[p] = parts[p].scale;
    a.parts.y[p] = parts[p].y;
    a.parts.add[p] = parts[p].sum != nullptr ? parts[p].add : nullptr;
    a.parts.sum[p] = parts[p].add != nullptr ? parts[p].sum : nullptr;
    a.parts.add_first[p] = parts[p].add_first ? 1 : 0;
    a.parts.M[p] = static_cast<int>(parts[p].M);
    a.parts.block0[p] = static_cast<int>(blocks);
    blocks += (parts[p].M + rows_a_cta - 1) / rows_a_cta;
  }
  a.parts.count = static_cast<int>(count);
  if (blocks == 0) return;
  a.K = static_cast<int>(K);
  a.U = static_cast<int>(U);
  a.xq = xq;
  a.N = static_cast<int>(N);
  a.step = step;
  a.drop_last_unit = options.drop_last_unit;
  a.half_warp_join = options.half_warp_join;
  a.residual_contracted = options.residual_contracted;
  a.plant_no_reuse_barrier = options.plant_no_reuse_barrier;
  if (norm != nullptr) {
    a.norm = *norm;
    a.plant_norm_blocked_lanes = options.plant_norm_blocked_lanes;
    const bool mutant = options.drop_last_unit || options.half_warp_join || options.residual_contracted ||
                        options.norm_stale_row || options.plant_norm_blocked_lanes;
    bool residual = false;
    for (std::size_t p = 0; p < count; ++p) residual = residual || a.parts.sum[p] != nullptr;
    static const char* const kParts[kTernaryMaxParts] = {"", ", 2 parts", ", 3 parts"};
    trace::launched(trace::compose("ternary_gemv v2 (norm prologue", mutant ? ", mutant" : "",
                                   options.pdl ? ", PDL" : "", kParts[count - 1], residual ? ", + residual" : "",
                                   ")"));
    const unsigned g = static_cast<unsigned>(blocks);
    if (nb == 1) launch_v2_norm<1>(a, g, options.pdl, options.norm_stale_row);
    else launch_v2_norm<2>(a, g, options.pdl, options.norm_stale_row);
    check_launch("ternary_gemv v2 (norm prologue)");
    return;
  }
  static constexpr const char* kNames[2][2][kTernaryMaxParts] = {
      {{"ternary_gemv v2 (rows a warp)", "ternary_gemv v2 (rows a warp, 2 parts)",
        "ternary_gemv v2 (rows a warp, 3 parts)"},
       {"ternary_gemv v2 (rows a warp, PDL)", "ternary_gemv v2 (rows a warp, PDL, 2 parts)",
        "ternary_gemv v2 (rows a warp, PDL, 3 parts)"}},
      {{"ternary_gemv v2 (mutant)", "ternary_gemv v2 (mutant, 2 parts)", "ternary_gemv v2 (mutant, 3 parts)"},
       {"ternary_gemv v2 (mutant, PDL)", "ternary_gemv v2 (mutant, PDL, 2 parts)",
        "ternary_gemv v2 (mutant, PDL, 3 parts)"}}};
  static constexpr const char* kResidualNames[2][2][kTernaryMaxParts] = {
      {{"ternary_gemv v2 (rows a warp, + residual)", "ternary_gemv v2 (rows a warp, 2 parts, + residual)",
        "ternary_gemv v2 (rows a warp, 3 parts, + residual)"},
       {"ternary_gemv v2 (rows a warp, PDL, + residual)", "ternary_gemv v2 (rows a warp, PDL, 2 parts, + residual)",
        "ternary_gemv v2 (rows a warp, PDL, 3 parts, + residual)"}},
      {{"ternary_gemv v2 (mutant, + residual)", "ternary_gemv v2 (mutant, 2 parts, + residual)",
        "ternary_gemv v2 (mutant, 3 parts, + residual)"},
       {"ternary_gemv v2 (mutant, PDL, + residual)", "ternary_gemv v2 (mutant, PDL, 2 parts, + residual)",
        "ternary_gemv v2 (mutant, PDL, 3 parts, + residual)"}}};
  const bool mutant = options.drop_last_unit || options.half_warp_join || options.plant_no_reuse_barrier ||
                      options.residual_contracted;
  bool residual = false;
  for (std::size_t p = 0; p < count; ++p) residual = residual || a.parts.sum[p] != nullptr;
  trace::launched((residual ? kResidualNames : kNames)[mutant ? 1 : 0][options.pdl ? 1 : 0][count - 1]);
  const unsigned g = static_cast<unsigned>(blocks);
  if (nb == 1) launch_v2<1>(a, g, options.pdl);
  else if (nb == 2) launch_v2<2>(a, g, options.pdl);
  else if (nb == 4) launch_v2<4>(a, g, options.pdl);
  else if (nb == 8) launch_v2<8>(a, g, options.pdl);
  else launch_v2<16>(a, g, options.pdl);
  check_launch("ternary_gemv v2");
}

}  // namespace lockstep::cuda::launch
