// Causal attention on the device: ops::Attention's float expression
// (ops/attention.hpp), bit for bit with cpu::OpKernels (backend/cpu/attention.cpp).
//
// Every output cell is one chain in the spec's order; the threads only decide
// who computes which chain:
//   * a score s_ij is one thread's fma chain over d ascending (acc = +0),
//     then canonical NaN, then · scale;
//   * the online softmax walks 64-key blocks from key 0; a row's block max is
//     ops::max2's fold in key order (joined across lanes by an exact
//     associative form of that fold), its l = l + p runs on one thread in key
//     order; p = exp(s - m) on the thread that holds s;
//   * acc_d (forward), dq_d: one thread per (row, d) cell, keys ascending;
//   * dk_d, dv_d: one thread per (key, d) cell, heads of the group ascending,
//     then queries ascending. No atomics: each chain has one owner.
// The backward recomputes P from lse. The dk/dv kernel computes s, P, dP and
// dS of each (query tile, key block) tile; on the stored-dS path (the
// default, when the scratch holds the dS tiles of at least one batch
// element: B·Hq·nt(nt+1)/2·16 KB for the whole batch, nt = ceil(T/64)) it
// writes dS^T to the scratch and the dq kernel only runs its chains over it;
// otherwise the dq kernel recomputes s, P, dP and dS of its tiles.
//
// Tiled kernels (key_block 64, head_dim <= 128): a CTA of 256 threads owns 64
// queries (forward, dq) or 64 keys (dk, dv); Q/K/V/dO tiles in shared memory;
// a thread owns a 4×4 patch of the 64×64 score tile and 4 rows × DC d-cells
// of the accumulators (backward: d = d_of<DC>(tx, u), float4 runs along d).
// Tiles move global -> shared as float4 rows where the layout allows
// (rows_v4), all of a thread's loads in flight before its stores. Other
// shapes run the one-thread-per-cell kernels (the same expression, slow, for
// odd key blocks and head sizes).
//
// Grids: blockIdx (x, y, z) = (head, batch, tile), tiles numbered longest
// first; CTAs start in x-fastest order, so every head's longest tiles start
// before any shorter one (no long CTA left for the tail of the launch).
//
// The macros below are the CUDA spellings; a host emulator (thread per lane,
// barrier per CTA) can define them before including this file.
#include "lockstep/backend/cuda/attention_launch.hpp"

#include <cstdint>
#include <stdexcept>

#include "lockstep/backend/cuda/cp_async.cuh"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/num/elementary.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/reduce.hpp"

#include "lockstep/backend/cuda/ls_hooks.cuh"  // LS_SMEM, LS_LAUNCH, LS_SET_SMEM (the host emulator's first)

namespace lockstep::cuda::launch {
namespace {

using num::fma_rn;
using num::reduce::canonical_nan;
using i64 = long long;

constexpr int kTile = 64;      // queries per tile = keys per block (the canonical key block)
constexpr int kThreads = 256;  // 16 × 16
constexpr int kPad = 68;       // row length of [64][64] tiles read as float4 (conflict-free columns)

struct Args {
  const float* q;
  const float* k;
  const float* v;
  const float* o;     // forward output (backward input)
  const float* lse;
  const float* dout;
  float* delta;       // D_i = dot_seq(dO_i, o_i), [B, Hq, T]
  float* out_o;
  float* out_lse;
  float* dq;
  float* dk;
  float* dv;
  float* dsbuf;       // the dS tiles of batch elements b0 .. b0 + gridDim.y - 1 (stored-dS path), else null
  int b0;             // first batch element of this launch
  int B, T, Hq, Hkv, Dh, rep, KB;
  i64 ldq, ldkv;
  float scale;   // dq, dk
  float sscale;  // the scores' factor (== scale; 1 under the attention_drop_scale mutant)
};

__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float dvd(float a, float b) { return __fdiv_rn(a, b); }
// ops::max2: a > b ? a : b (ties and NaN take b, as on the CPU).
__device__ __forceinline__ float max2(float a, float b) { return a > b ? a : b; }
__device__ __forceinline__ void unpack(const float4 v, float (&x)[4]) {
  x[0] = v.x;
  x[1] = v.y;
  x[2] = v.z;
  x[3] = v.w;
}
__device__ __forceinline__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ void st4(float* p, float a, float b, float c, float d) {
  float4 v;
  v.x = a;
  v.y = b;
  v.z = c;
  v.w = d;
  *reinterpret_cast<float4*>(p) = v;
}

__device__ __forceinline__ float4 zero4() { return float4{0.0f, 0.0f, 0.0f, 0.0f}; }

// Row pointers.
__device__ __forceinline__ const float* qrow(const Args& a, int b, int t, int h) {
  return a.q + (static_cast<i64>(b) * a.T + t) * a.ldq + static_cast<i64>(h) * a.Dh;
}
__device__ __forceinline__ i64 kvoff(const Args& a, int b, int t, int g) {
  return (static_cast<i64>(b) * a.T + t) * a.ldkv + static_cast<i64>(g) * a.Dh;
}
__device__ __forceinline__ i64 ooff(const Args& a, int b, int t, int h) {
  return ((static_cast<i64>(b) * a.T + t) * a.Hq + h) * a.Dh;
}
__device__ __forceinline__ i64 lseoff(const Args& a, int b, int h, int t) {
  return (static_cast<i64>(b) * a.Hq + h) * a.T + t;
}
// s_ij = canonical_nan(dot_seq(q_i, k_j)) · sscale.
__device__ __forceinline__ float score_of(const Args& a, const float* qi, const float* kj) {
  return mul(num::reduce::dot_seq(qi, 1, kj, 1, static_cast<std::size_t>(a.Dh)), a.sscale);
}

// ===========================================================================
// D_i = dot_seq(dO_i, o_i): one thread per (b, h, i).
// ===========================================================================
__global__ void delta_kernel(Args a) {
  const i64 n = static_cast<i64>(a.B) * a.Hq * a.T;
  const i64 idx = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n) return;
  const int t = static_cast<int>(idx % a.T), h = static_cast<int>((idx / a.T) % a.Hq);
  const int b = static_cast<int>(idx / (static_cast<i64>(a.T) * a.Hq));
  const i64 off = ooff(a, b, t, h);
  a.delta[idx] = num::reduce::dot_seq(a.dout + off, 1, a.o + off, 1, static_cast<std::size_t>(a.Dh));
}

// D_i staged through shared memory (Dh <= 128): a CTA of kDeltaThreads owns R
// consecutive rows of o / dO in memory order ((b, t, h) flattened, R·Dh <=
// 8192 contiguous floats), moves them coalesced into shared rows of odd pitch
// Dh | 1 (conflict-free row walks), then thread r runs row r's chain,
// dot_seq(dO_r, o_r) exactly as above, and writes D at [b, h, t].
// ===========================================================================
constexpr int kDeltaThreads = 128;
__host__ __device__ inline int delta_rows(int Dh) { return 8192 / Dh < 128 ? 8192 / Dh : 128; }
__host__ __device__ inline int delta_pitch(int Dh) { return Dh | 1; }

template <bool V4>
__global__ void __launch_bounds__(kDeltaThreads) delta_rows_kernel(Args a) {
  LS_SMEM(sm);
  const int Dh = a.Dh, R = delta_rows(Dh), P = delta_pitch(Dh), tid = threadIdx.x;
  float* sd = sm;         // dO rows [R][P]
  float* so = sm + R * P;  // o rows [R][P]
  const i64 rows = static_cast<i64>(a.B) * a.Hq * a.T;
  const i64 r0 = static_cast<i64>(blockIdx.x) * R;
  const int nr = rows - r0 < R ? static_cast<int>(rows - r0) : R;
  const int n = nr * Dh;  // floats of this CTA, contiguous from r0·Dh
  const float* gd = a.dout + r0 * Dh;
  const float* go = a.o + r0 * Dh;
  if constexpr (V4) {  // Dh % 4 == 0, 16-byte aligned bases: a float4 stays in one row
    constexpr int NV = 8192 / 4 / kDeltaThreads;
    const int n4 = n >> 2;
    float4 bd[NV], bo[NV];
#pragma unroll
    for (int u = 0; u < NV; ++u) {
      const int f = tid + u * kDeltaThreads;
      bd[u] = zero4();
      bo[u] = zero4();
      if (f < n4) {
        bd[u] = ld4(gd + 4 * f);
        bo[u] = ld4(go + 4 * f);
      }
    }
#pragma unroll
    for (int u = 0; u < NV; ++u) {
      const int f = tid + u * kDeltaThreads;
      if (f < n4) {
        const int r = (4 * f) / Dh, c = 4 * f - r * Dh, at = r * P + c;
        sd[at] = bd[u].x;
        sd[at + 1] = bd[u].y;
        sd[at + 2] = bd[u].z;
        sd[at + 3] = bd[u].w;
        so[at] = bo[u].x;
        so[at + 1] = bo[u].y;
        so[at + 2] = bo[u].z;
        so[at + 3] = bo[u].w;
      }
    }
  } else {
    for (int e = tid; e < n; e += kDeltaThreads) {
      const int r = e / Dh, c = e - r * Dh;
      sd[r * P + c] = gd[e];
      so[r * P + c] = go[e];
    }
  }
  __syncthreads();
  if (tid < nr) {
    const i64 m = r0 + tid;  // memory row (b·T + t)·Hq + h
    const int h = static_cast<int>(m % a.Hq);
    const i64 bt = m / a.Hq;
    const int t = static_cast<int>(bt % a.T), b = static_cast<int>(bt / a.T);
    a.delta[lseoff(a, b, h, t)] =
        num::reduce::dot_seq(sd + tid * P, 1, so + tid * P, 1, static_cast<std::size_t>(Dh));
  }
}

// ===========================================================================
// One thread per cell (any key block, any head size).
// ===========================================================================
__global__ void fwd_cell_kernel(Args a) {
  const i64 n = static_cast<i64>(a.B) * a.Hq * a.T * a.Dh;
  const i64 idx = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n) return;
  const int d = static_cast<int>(idx % a.Dh);
  const int i = static_cast<int>((idx / a.Dh) % a.T);
  const int h = static_cast<int>((idx / (static_cast<i64>(a.Dh) * a.T)) % a.Hq);
  const int b = static_cast<int>(idx / (static_cast<i64>(a.Dh) * a.T * a.Hq));
  const int g = h / a.rep;
  const float* qi = qrow(a, b, i, h);
  float m = 0.0f, l = 0.0f, acc = 0.0f;
  for (int j0 = 0; j0 <= i; j0 += a.KB) {
    const int j1 = j0 + a.KB < i + 1 ? j0 + a.KB : i + 1;
    float mb = score_of(a, qi, a.k + kvoff(a, b, j0, g));
    for (int j = j0 + 1; j < j1; ++j) mb = max2(mb, score_of(a, qi, a.k + kvoff(a, b, j, g)));
    if (j0 == 0) {
      m = mb;
    } else {
      const float mn = max2(m, mb);
      const float alpha = num::exp(sub(m, mn));
      l = mul(l, alpha);
      acc = mul(acc, alpha);
      m = mn;
    }
    for (int j = j0; j < j1; ++j) {
      const float p = num::exp(sub(score_of(a, qi, a.k + kvoff(a, b, j, g)), m));
      l = add(l, p);
      acc = fma_rn(p, a.v[kvoff(a, b, j, g) + d], acc);
    }
  }
  a.out_o[ooff(a, b, i, h) + d] = dvd(acc, l);
  if (d == 0) a.out_lse[lseoff(a, b, h, i)] = add(m, num::log(l));
}

// P_ij and dS_ij of query row i (head h) and key j.
__device__ __forceinline__ void p_ds(const Args& a, int b, int h, int i, int j, float& p, float& ds) {
  const int g = h / a.rep;
  const float* qi = qrow(a, b, i, h);
  const float* doi = a.dout + ooff(a, b, i, h);
  p = num::exp(sub(score_of(a, qi, a.k + kvoff(a, b, j, g)), a.lse[lseoff(a, b, h, i)]));
  const float dp = num::reduce::dot_seq(doi, 1, a.v + kvoff(a, b, j, g), 1, static_cast<std::size_t>(a.Dh));
  ds = mul(p, sub(dp, a.delta[lseoff(a, b, h, i)]));
}

__global__ void dq_cell_kernel(Args a) {
  const i64 n = static_cast<i64>(a.B) * a.Hq * a.T * a.Dh;
  const i64 idx = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n) return;
  const int d = static_cast<int>(idx % a.Dh);
  const int i = static_cast<int>((idx / a.Dh) % a.T);
  const int h = static_cast<int>((idx / (static_cast<i64>(a.Dh) * a.T)) % a.Hq);
  const int b = static_cast<int>(idx / (static_cast<i64>(a.Dh) * a.T * a.Hq));
  const int g = h / a.rep;
  float acc = 0.0f;
  for (int j = 0; j <= i; ++j) {
    float p, ds;
    p_ds(a, b, h, i, j, p, ds);
    acc = fma_rn(ds, a.k[kvoff(a, b, j, g) + d], acc);
  }
  a.dq[(static_cast<i64>(b) * a.T + i) * a.ldq + static_cast<i64>(h) * a.Dh + d] = mul(acc, a.scale);
}

__global__ void dkdv_cell_kernel(Args a) {
  const i64 n = static_cast<i64>(a.B) * a.Hkv * a.T * a.Dh;
  const i64 idx = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n) return;
  const int d = static_cast<int>(idx % a.Dh);
  const int j = static_cast<int>((idx / a.Dh) % a.T);
  const int g = static_cast<int>((idx / (static_cast<i64>(a.Dh) * a.T)) % a.Hkv);
  const int b = static_cast<int>(idx / (static_cast<i64>(a.Dh) * a.T * a.Hkv));
  float ak = 0.0f, av = 0.0f;
  for (int r = 0; r < a.rep; ++r) {
    const int h = g * a.rep + r;
    for (int i = j; i < a.T; ++i) {
      float p, ds;
      p_ds(a, b, h, i, j, p, ds);
      ak = fma_rn(ds, qrow(a, b, i, h)[d], ak);
      av = fma_rn(p, a.dout[ooff(a, b, i, h) + d], av);
    }
  }
  const i64 off = kvoff(a, b, j, g) + d;
  a.dk[off] = mul(ak, a.scale);
  a.dv[off] = av;
}

// ===========================================================================
// Tile loads, global -> shared. All of a thread's loads are issued before its
// first store (one memory latency per tile, not one per element). V4: rows
// are float4-aligned in global memory (Dh, the row strides and the base
// pointers multiples of 4 floats / 16 bytes), so a thread moves float4s.
// ===========================================================================

// Two row-major tiles of 64 rows: d0[r·ldr0 + 0..w0) = s0[r·ld0 + 0..w0) for
// r < n, 0 for n <= r < 64; the same for (d1, s1). NV: float4s per thread and
// tile (64·w/4 <= NV·256).
template <int NV, bool V4>
__device__ __forceinline__ void load_rows2(float* d0, int ldr0, const float* s0, i64 ld0, int w0, float* d1, int ldr1,
                                           const float* s1, i64 ld1, int w1, int n, int tid) {
  if constexpr (V4) {
    const int q0 = w0 >> 2, q1 = w1 >> 2, t0 = kTile * q0, t1 = kTile * q1;
    float4 b0[NV], b1[NV];
#pragma unroll
    for (int u = 0; u < NV; ++u) {
      const int f = tid + u * kThreads;
      b0[u] = zero4();
      b1[u] = zero4();
      if (f < t0) {
        const int r = f / q0, c = f - r * q0;
        if (r < n) b0[u] = ld4(s0 + r * ld0 + 4 * c);
      }
      if (f < t1) {
        const int r = f / q1, c = f - r * q1;
        if (r < n) b1[u] = ld4(s1 + r * ld1 + 4 * c);
      }
    }
#pragma unroll
    for (int u = 0; u < NV; ++u) {
      const int f = tid + u * kThreads;
      if (f < t0) {
        const int r = f / q0, c = f - r * q0;
        *reinterpret_cast<float4*>(d0 + r * ldr0 + 4 * c) = b0[u];
      }
      if (f < t1) {
        const int r = f / q1, c = f - r * q1;
        *reinterpret_cast<float4*>(d1 + r * ldr1 + 4 * c) = b1[u];
      }
    }
  } else {
    for (int e = tid; e < kTile * w0; e += kThreads) {
      const int r = e / w0, d = e - r * w0;
      d0[r * ldr0 + d] = r < n ? s0[r * ld0 + d] : 0.0f;
    }
    for (int e = tid; e < kTile * w1; e += kThreads) {
      const int r = e / w1, d = e - r * w1;
      d1[r * ldr1 + d] = r < n ? s1[r * ld1 + d] : 0.0f;
    }
  }
}

// The forward's tiles. Kt [Dh][64] (transposed: key c at column c) from key
// rows; Vn [64][ldv] (row-major) from value rows; rows >= n and Vn's
// columns >= Dh are 0.
template <int NV, bool V4>
__device__ __forceinline__ void load_fwd_kv(float* Kt, float* Vn, int ldv, const float* ks, const float* vs, i64 ld,
                                            int Dh, int n, int tid) {
  if constexpr (V4) {  // ldv == Dh
    const int q4 = Dh >> 2, total = kTile * q4;
    float4 kb[NV], vb[NV];
#pragma unroll
    for (int u = 0; u < NV; ++u) {
      const int f = tid + u * kThreads;
      kb[u] = zero4();
      vb[u] = zero4();
      if (f < total) {
        const int c = f & 63, d4 = f >> 6;  // lanes along keys: conflict-free transposed stores
        if (c < n) kb[u] = ld4(ks + c * ld + 4 * d4);
        const int r = f / q4, c4 = f - r * q4;  // lanes along the row: coalesced
        if (r < n) vb[u] = ld4(vs + r * ld + 4 * c4);
      }
    }
#pragma unroll
    for (int u = 0; u < NV; ++u) {
      const int f = tid + u * kThreads;
      if (f < total) {
        const int c = f & 63, d4 = f >> 6;
        Kt[(4 * d4) * kTile + c] = kb[u].x;
        Kt[(4 * d4 + 1) * kTile + c] = kb[u].y;
        Kt[(4 * d4 + 2) * kTile + c] = kb[u].z;
        Kt[(4 * d4 + 3) * kTile + c] = kb[u].w;
        const int r = f / q4, c4 = f - r * q4;
        *reinterpret_cast<float4*>(Vn + r * ldv + 4 * c4) = vb[u];
      }
    }
  } else {
    for (int e = tid; e < kTile * Dh; e += kThreads) {
      const int c = e & 63, d = e >> 6;
      Kt[d * kTile + c] = c < n ? ks[c * ld + d] : 0.0f;
    }
    for (int e = tid; e < kTile * ldv; e += kThreads) {
      const int c = e / ldv, d = e - c * ldv;
      Vn[e] = c < n && d < Dh ? vs[c * ld + d] : 0.0f;
    }
  }
}

// Qt [Dh][W] (transposed; W = 64 or 128 query columns) from query rows
// (rows >= n: 0). NV: float4s per thread (W·Dh/4 <= NV·256).
template <int NV, bool V4, int W>
__device__ __forceinline__ void load_t(float* Qt, const float* qs, i64 ld, int Dh, int n, int tid) {
  if constexpr (V4) {
    const int total = W * (Dh >> 2);
    float4 qb[NV];
#pragma unroll
    for (int u = 0; u < NV; ++u) {
      const int f = tid + u * kThreads, c = f & (W - 1), d4 = f / W;
      qb[u] = zero4();
      if (f < total && c < n) qb[u] = ld4(qs + c * ld + 4 * d4);
    }
#pragma unroll
    for (int u = 0; u < NV; ++u) {
      const int f = tid + u * kThreads, c = f & (W - 1), d4 = f / W;
      if (f < total) {
        Qt[(4 * d4) * W + c] = qb[u].x;
        Qt[(4 * d4 + 1) * W + c] = qb[u].y;
        Qt[(4 * d4 + 2) * W + c] = qb[u].z;
        Qt[(4 * d4 + 3) * W + c] = qb[u].w;
      }
    }
  } else {
    for (int e = tid; e < W * Dh; e += kThreads) {
      const int c = e & (W - 1), d = e / W;
      Qt[d * W + c] = c < n ? qs[c * ld + d] : 0.0f;
    }
  }
}

// ===========================================================================
// Tiled forward. CTA: (head, batch, query tile) = blockIdx (x, y, z), 256
// threads (tx = tid % 16, ty = tid / 16; a row's 16 score lanes are one
// half-warp). A query tile is RH row halves of 64 (RH = 1: 64 queries, RH = 2:
// 128); half hf holds rows i0 + 64·hf + 4ty + a of thread ty, so every thread
// has rows in every half. Per key block of 64 (loaded once for all halves):
//   * scores: rows 4ty + a of each half, keys 4tx + c, chains over d in registers;
//   * the block max of a row: each lane folds its 4 keys in order, then the
//     16 lanes' folds are joined in key order by a shuffle butterfly (the
//     fold's join is associative, see BlockMax); every lane gets the row's m;
//   * p = exp(s - m) in registers, to the half's Pt [64 keys][64 rows]
//     (XOR-swizzled float4 slots: conflict-free writes by key, reads by row);
//   * l = l·alpha + p_j (keys ascending): one thread per row, beside p·V;
//   * acc: rows 4ty + a, d = DC consecutive cells from DC·tx (DC <= 4) or
//     4tx + {0..3} and 64 + 4tx + {0..3} (DC = 8); V rows as float4.
// A half walks key blocks 0 .. its diagonal block (RH·qt + hf) and skips the
// others (its rows have no keys there: m, l, acc untouched, as in the spec,
// whose rows walk only blocks j0 <= i); a half wholly past T does nothing.
// Shared: Qt [Dh][64·RH], Kt [Dh][64] (transposed: float4 along rows/keys),
// Vn [64][ldv] (ldv = Dh rounded up to 4), Pt RH × [64][64], l, alpha, m [64·RH].
// ===========================================================================
__host__ __device__ inline int ldv_of(int Dh) { return (Dh + 3) & ~3; }
std::size_t fwd_smem_floats(int Dh, int RH) {
  const unsigned rh = static_cast<unsigned>(RH);
  return (64u * rh + 64u) * static_cast<unsigned>(Dh) + 64u * static_cast<unsigned>(ldv_of(Dh)) +
         4096u * rh + 3u * 64u * rh;
}

// ops::max2's left fold over a key block, mb = s_0; mb = max2(mb, s_j), as a
// join of contiguous segments. A segment maps the incoming mb to
//   ident: mb (no key);  open v: mb > v ? mb : v (v = the segment's own fold);
//   closed v: v whatever mb was (the segment holds the block's first key, or a
//   NaN, after which the fold restarts: max2(NaN, s) = s).
// join(L, R) = R if R is closed or L is ident; L if R is ident; else
// (L's kind, L.v > R.v ? L.v : R.v) — the composition of the two maps.
struct BlockMax {
  int kind;  // 0 ident, 1 open, 2 closed
  float v;
};
__device__ __forceinline__ BlockMax join(BlockMax l, BlockMax r) {
  if (r.kind == 0) return l;
  if (l.kind == 0 || r.kind == 2) return r;
  return {l.kind, l.v > r.v ? l.v : r.v};
}

// The DC accumulator columns of lane tx: d_of(tx, u).
template <int DC>
__device__ __forceinline__ int d_of(int tx, int u) {
  if constexpr (DC <= 4) return DC * tx + u;
  else return 64 * (u >> 2) + 4 * tx + (u & 3);
}
// Row c of Vn, the lane's DC cells (ldv is a multiple of 4; cells past Dh are
// padding and feed only accumulators that are never stored).
template <int DC>
__device__ __forceinline__ void load_v(const float* row, int tx, float (&vv)[DC]) {
  if constexpr (DC == 1) {
    vv[0] = row[tx];
  } else if constexpr (DC == 2) {
    const float2 t = *reinterpret_cast<const float2*>(row + 2 * tx);
    vv[0] = t.x;
    vv[1] = t.y;
  } else {
#pragma unroll
    for (int h = 0; h < DC / 4; ++h) {
      float x[4];
      unpack(ld4(row + 64 * h + 4 * tx), x);
#pragma unroll
      for (int e = 0; e < 4; ++e) vv[4 * h + e] = x[e];
    }
  }
}
// Pt's float4 slot of rows 4·g .. 4·g + 3 at key c.
__device__ __forceinline__ int pt_at(int c, int g) { return c * kTile + 4 * (g ^ ((c >> 2) & 15)); }

template <int DC, bool V4, int RH>
__global__ void __launch_bounds__(kThreads, DC <= 4 ? 4 - RH : 1) fwd_tiled_kernel(Args a) {
  LS_SMEM(sm);
  constexpr int W = kTile * RH;  // query rows of the tile
  const int Dh = a.Dh, T = a.T, ldv = ldv_of(Dh);
  float* Qt = sm;
  float* Kt = Qt + Dh * W;
  float* Vn = Kt + Dh * kTile;
  float* Pt = Vn + kTile * ldv;  // half hf's at Pt + hf·4096
  float* l_s = Pt + RH * kTile * kTile;
  float* al_s = l_s + W;
  float* m_s = al_s + W;

  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4, half = tid & 16;
  const int qt = static_cast<int>(gridDim.z) - 1 - static_cast<int>(blockIdx.z);  // long tiles first
  const int h = blockIdx.x, b = blockIdx.y, g = h / a.rep;
  const int i0 = qt * W;
  // Key blocks up to the last row's (row min(i0 + W, T) - 1); half hf's
  // diagonal block is RH·qt + hf.
  const int last_row = (i0 + W < T ? i0 + W : T) - 1;
  const int nkb = last_row / kTile + 1;

  load_t<RH * DC, V4, W>(Qt, qrow(a, b, i0, h), a.ldq, Dh, T - i0, tid);

  float acc[RH][4][DC], m[RH][4];
#pragma unroll
  for (int hf = 0; hf < RH; ++hf)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      m[hf][r] = 0.0f;
#pragma unroll
      for (int u = 0; u < DC; ++u) acc[hf][r][u] = 0.0f;
    }

  for (int kb = 0; kb < nkb; ++kb) {
    const int j0 = kb * kTile;
    // act: the half's rows walk this block (uniform over the CTA); diag: it is their diagonal block.
    bool act[RH], diag[RH];
#pragma unroll
    for (int hf = 0; hf < RH; ++hf) {
      act[hf] = kb <= RH * qt + hf && i0 + kTile * hf < T;
      diag[hf] = kb == RH * qt + hf;
    }
    __syncthreads();  // the previous block's readers of Kt, Vn, Pt are done
    load_fwd_kv<DC, V4>(Kt, Vn, ldv, a.k + kvoff(a, b, j0, g), a.v + kvoff(a, b, j0, g), a.ldkv, Dh, T - j0, tid);
    __syncthreads();

    // Scores of the 4×4 patches: chains over d ascending.
    float s[RH][4][4];
#pragma unroll
    for (int hf = 0; hf < RH; ++hf)
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) s[hf][r][c] = 0.0f;
    for (int d = 0; d < Dh; ++d) {
      float qa[RH][4], ka[4];
#pragma unroll
      for (int hf = 0; hf < RH; ++hf) unpack(ld4(Qt + d * W + kTile * hf + 4 * ty), qa[hf]);
      unpack(ld4(Kt + d * kTile + 4 * tx), ka);
#pragma unroll
      for (int hf = 0; hf < RH; ++hf)
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
          for (int c = 0; c < 4; ++c) s[hf][r][c] = fma_rn(qa[hf][r], ka[c], s[hf][r][c]);
    }

    // The block max of each row (keys j0 .. min(j0 + 63, i)), the new m, and
    // alpha's exponent m_old - m_new (0 where no rescale happens).
    float alpha[RH][4];
#pragma unroll
    for (int hf = 0; hf < RH; ++hf)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        alpha[hf][r] = 0.0f;
        if (!act[hf]) continue;
        BlockMax f{0, 0.0f};
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          s[hf][r][c] = mul(canonical_nan(s[hf][r][c]), a.sscale);
          const int key = 4 * tx + c;
          if (!diag[hf] || key <= 4 * ty + r) {
            const bool closed = key == 0 || s[hf][r][c] != s[hf][r][c];
            f = join(f, BlockMax{closed ? 2 : 1, s[hf][r][c]});
          }
        }
#pragma unroll
        for (int off = 1; off < 16; off <<= 1) {
          const BlockMax o{__shfl_xor_sync(0xffffffffu, f.kind, off), __shfl_xor_sync(0xffffffffu, f.v, off)};
          f = (tx & off) ? join(o, f) : join(f, o);
        }
        const float mb = f.v;
        if (kb == 0) {
          m[hf][r] = mb;
        } else {
          const float mn = max2(m[hf][r], mb);
          alpha[hf][r] = sub(m[hf][r], mn);  // the exponent; exp below, one row per lane
          m[hf][r] = mn;
        }
      }
    if (kb > 0) {
      // alpha = exp(m_old - m_new): lane tx computes row (tx >> 2) & (RH - 1), tx & 3 of
      // its half-warp's 4·RH rows, then shares.
      const int mine = tx & 3, mh = (tx >> 2) & (RH - 1);
      float x = 0.0f;
#pragma unroll
      for (int hf = 0; hf < RH; ++hf)
        if (hf == mh) x = mine == 0 ? alpha[hf][0] : mine == 1 ? alpha[hf][1] : mine == 2 ? alpha[hf][2] : alpha[hf][3];
      const float e = num::exp(x);
#pragma unroll
      for (int hf = 0; hf < RH; ++hf)
#pragma unroll
        for (int r = 0; r < 4; ++r) alpha[hf][r] = __shfl_sync(0xffffffffu, e, half + 4 * hf + r);
      if (tx == 0) {
#pragma unroll
        for (int hf = 0; hf < RH; ++hf)
          if (act[hf]) {
#pragma unroll
            for (int r = 0; r < 4; ++r) al_s[kTile * hf + 4 * ty + r] = alpha[hf][r];
          }
      }
    }

    // p = exp(s - m) to Pt (cells past the causal edge: 0, never read).
#pragma unroll
    for (int hf = 0; hf < RH; ++hf) {
      if (!act[hf]) continue;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int key = 4 * tx + c;
        float p[4];
#pragma unroll
        for (int r = 0; r < 4; ++r)
          p[r] = (!diag[hf] || key <= 4 * ty + r) ? num::exp(sub(s[hf][r][c], m[hf][r])) : 0.0f;
        st4(Pt + kTile * kTile * hf + pt_at(key, ty), p[0], p[1], p[2], p[3]);
      }
    }
    __syncthreads();

    // l = l·alpha, then l = l + p_j in key order: a thread per row.
    if (tid < W) {
      const int hf = tid / kTile, r = tid & (kTile - 1);
      bool on = act[0], dg = diag[0];
#pragma unroll
      for (int x = 1; x < RH; ++x)
        if (hf == x) {
          on = act[x];
          dg = diag[x];
        }
      if (on) {
        const int n = dg ? r + 1 : kTile;
        const float* P = Pt + kTile * kTile * hf;
        float l = kb == 0 ? 0.0f : mul(l_s[tid], al_s[tid]);
        for (int c = 0; c < n; ++c) l = add(l, P[pt_at(c, r >> 2) + (r & 3)]);
        l_s[tid] = l;
      }
    }
    // acc = acc · alpha, then acc = fma(p_j, v_jd, acc), keys ascending.
    if (kb > 0) {
#pragma unroll
      for (int hf = 0; hf < RH; ++hf)
        if (act[hf]) {
#pragma unroll
          for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int u = 0; u < DC; ++u) acc[hf][r][u] = mul(acc[hf][r][u], alpha[hf][r]);
        }
    }
    int last = -1;  // the last key any of this thread's rows takes
#pragma unroll
    for (int hf = 0; hf < RH; ++hf)
      if (act[hf]) {
        const int lh = diag[hf] ? 4 * ty + 3 : kTile - 1;
        last = lh > last ? lh : last;
      }
    for (int c = 0; c <= last; ++c) {
      float vv[DC];
      load_v<DC>(Vn + c * ldv, tx, vv);
#pragma unroll
      for (int hf = 0; hf < RH; ++hf) {
        if (!act[hf]) continue;
        float p[4];
        unpack(ld4(Pt + kTile * kTile * hf + pt_at(c, ty)), p);
        if (!diag[hf] || c <= 4 * ty) {
#pragma unroll
          for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int u = 0; u < DC; ++u) acc[hf][r][u] = fma_rn(p[r], vv[u], acc[hf][r][u]);
        } else {
#pragma unroll
          for (int r = 0; r < 4; ++r)
            if (c <= 4 * ty + r) {
#pragma unroll
              for (int u = 0; u < DC; ++u) acc[hf][r][u] = fma_rn(p[r], vv[u], acc[hf][r][u]);
            }
        }
      }
    }
  }
  if (tx == 0) {
#pragma unroll
    for (int hf = 0; hf < RH; ++hf)
#pragma unroll
      for (int r = 0; r < 4; ++r) m_s[kTile * hf + 4 * ty + r] = m[hf][r];
  }
  __syncthreads();

#pragma unroll
  for (int hf = 0; hf < RH; ++hf)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int i = i0 + kTile * hf + 4 * ty + r;
      if (i >= T) continue;
      const float l = l_s[kTile * hf + 4 * ty + r];
      float* orow = a.out_o + ooff(a, b, i, h);
#pragma unroll
      for (int u = 0; u < DC; ++u) {
        const int d = d_of<DC>(tx, u);
        if (d < Dh) orow[d] = dvd(acc[hf][r][u], l);
      }
    }
  if (tid < W && i0 + tid < T) a.out_lse[lseoff(a, b, h, i0 + tid)] = add(m_s[tid], num::log(l_s[tid]));
}

// Row length of the row-major tiles of the backward: Dh rounded up to 4, + 4
// (float4-aligned rows; 16 rows read as float4 at one column take the minimum
// 2 wavefronts).
__host__ __device__ inline int ldr_of(int Dh) { return ((Dh + 3) & ~3) + 4; }

// The score-phase chains of a 4×4 patch: s[r][c] = fma over d ascending of
// A row ra(r) and B row rb(c) (A rows broadcast across the half-warp, B rows
// 16 distinct), two products at once: (A1, B1) and (A2, B2).
__device__ __forceinline__ void patch_chains(const float* A1, const float* B1, const float* A2, const float* B2,
                                             int ldr, int Dh, int ra0, int rb0, float (&s1)[4][4],
                                             float (&s2)[4][4]) {
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) s1[r][c] = s2[r][c] = 0.0f;
  const int D4 = Dh >> 2;
  for (int d4 = 0; d4 < D4; ++d4) {
    {
      float a[4][4], bb[4][4];
#pragma unroll
      for (int r = 0; r < 4; ++r) unpack(ld4(A1 + (ra0 + r) * ldr + 4 * d4), a[r]);
#pragma unroll
      for (int c = 0; c < 4; ++c) unpack(ld4(B1 + (rb0 + 16 * c) * ldr + 4 * d4), bb[c]);
#pragma unroll
      for (int e = 0; e < 4; ++e)
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
          for (int c = 0; c < 4; ++c) s1[r][c] = fma_rn(a[r][e], bb[c][e], s1[r][c]);
    }
    {
      float a[4][4], bb[4][4];
#pragma unroll
      for (int r = 0; r < 4; ++r) unpack(ld4(A2 + (ra0 + r) * ldr + 4 * d4), a[r]);
#pragma unroll
      for (int c = 0; c < 4; ++c) unpack(ld4(B2 + (rb0 + 16 * c) * ldr + 4 * d4), bb[c]);
#pragma unroll
      for (int e = 0; e < 4; ++e)
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
          for (int c = 0; c < 4; ++c) s2[r][c] = fma_rn(a[r][e], bb[c][e], s2[r][c]);
    }
  }
  for (int d = 4 * D4; d < Dh; ++d) {
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        s1[r][c] = fma_rn(A1[(ra0 + r) * ldr + d], B1[(rb0 + 16 * c) * ldr + d], s1[r][c]);
        s2[r][c] = fma_rn(A2[(ra0 + r) * ldr + d], B2[(rb0 + 16 * c) * ldr + d], s2[r][c]);
      }
  }
}

// The stored-dS path: the dk/dv kernel writes each (query tile, key block)
// tile of dS^T ([64 keys][64 queries], 4096 floats) of batch element
// b0 + bz, head h; the dq kernel reads it instead of recomputing s, P and dP.
// Tiles of (bz, h): query tile qb, key block kb <= qb at pair qb(qb+1)/2 + kb.
__device__ __forceinline__ i64 ds_tile(const Args& a, int bz, int h, int qb, int kb) {
  const i64 nt = (a.T + kTile - 1) / kTile, pairs = nt * (nt + 1) / 2;
  return ((static_cast<i64>(bz) * a.Hq + h) * pairs + static_cast<i64>(qb) * (qb + 1) / 2 + kb) * (kTile * kTile);
}

// ===========================================================================
// Tiled dk, dv. CTA: (kv head, batch - b0, key tile). Scores transposed: keys
// 4ty + a, queries tx + 16c. Accumulators: keys 4ty + a, d = d_of<DC>(tx, u).
// Shared, row-major [64][ldr] (float4 along d): Kn, Vn (the CTA's keys), Qn,
// dOn (a query tile); Ps, dSs [64 queries][68] (float4 of 4 keys); lse, D.
// ===========================================================================
std::size_t dkdv_smem_floats(int Dh) {
  return 4u * 64u * static_cast<unsigned>(ldr_of(Dh)) + 2u * 64u * kPad + 128u + 64u;  // + 64: DC = 8 over-read
}

// FIXED (v5): a tile off the diagonal with 64 queries runs the accumulation
// as a fixed 64-step loop unrolled by 4, the same chains in the same order
// (queries ascending); other tiles, and every tile when !FIXED, v4's loop.
template <int DC, bool V4, bool STORE, bool FIXED>
__global__ void __launch_bounds__(kThreads, DC <= 4 ? 2 : 1) dkdv_tiled_kernel(Args a) {
  LS_SMEM(sm);
  const int Dh = a.Dh, T = a.T, ldr = ldr_of(Dh), ts = kTile * ldr;
  float* Kn = sm;
  float* Vn = Kn + ts;
  float* Qn = Vn + ts;
  float* dOn = Qn + ts;
  float* Ps = dOn + ts;
  float* dSs = Ps + kTile * kPad;
  float* lse_s = dSs + kTile * kPad;
  float* D_s = lse_s + kTile;

  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  const int j0 = static_cast<int>(blockIdx.z) * kTile;  // blockIdx.z 0 (the longest) first
  const int g = blockIdx.x, b = a.b0 + static_cast<int>(blockIdx.y);
  const int nk = T - j0 < kTile ? T - j0 : kTile;

  load_rows2<DC, V4>(Kn, ldr, a.k + kvoff(a, b, j0, g), a.ldkv, Dh, Vn, ldr, a.v + kvoff(a, b, j0, g), a.ldkv, Dh,
                     nk, tid);

  float ak[4][DC], av[4][DC];
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int u = 0; u < DC; ++u) ak[r][u] = av[r][u] = 0.0f;

  const i64 ldo = static_cast<i64>(a.Hq) * Dh;
  for (int rr = 0; rr < a.rep; ++rr) {
    const int h = g * a.rep + rr;
    for (int i0 = j0; i0 < T; i0 += kTile) {
      const bool diag = i0 == j0;
      const int nq = T - i0 < kTile ? T - i0 : kTile;
      __syncthreads();  // the previous tile's readers are done
      load_rows2<DC, V4>(Qn, ldr, qrow(a, b, i0, h), a.ldq, Dh, dOn, ldr, a.dout + ooff(a, b, i0, h), ldo, Dh, nq,
                         tid);
      if (tid < kTile) {
        const bool in = tid < nq;
        lse_s[tid] = in ? a.lse[lseoff(a, b, h, i0 + tid)] : 0.0f;
        D_s[tid] = in ? a.delta[lseoff(a, b, h, i0 + tid)] : 0.0f;
      }
      __syncthreads();

      // s (q·k) and dP (dO·v) of keys 4ty + r, queries tx + 16c; then P, dS.
      {
        float s[4][4], dp[4][4];
        patch_chains(Kn, Qn, Vn, dOn, ldr, Dh, 4 * ty, tx, s, dp);
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int qi = tx + 16 * c;
          const float ls = lse_s[qi], Di = D_s[qi];
          float p[4], ds[4];
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            p[r] = num::exp(sub(mul(canonical_nan(s[r][c]), a.sscale), ls));
            ds[r] = mul(p[r], sub(canonical_nan(dp[r][c]), Di));
          }
          st4(Ps + qi * kPad + 4 * ty, p[0], p[1], p[2], p[3]);
          st4(dSs + qi * kPad + 4 * ty, ds[0], ds[1], ds[2], ds[3]);
          if constexpr (STORE) {
            // dS^T tile [64 keys][64 queries] for the dq kernel (cells past the
            // causal edge or T: never read).
            float* t = a.dsbuf + ds_tile(a, static_cast<int>(blockIdx.y), h, i0 / kTile, j0 / kTile);
#pragma unroll
            for (int r = 0; r < 4; ++r) t[(4 * ty + r) * kTile + qi] = ds[r];
          }
        }
      }
      __syncthreads();

      // dk_j += dS_ij · q_i, dv_j += P_ij · dO_i, queries ascending (i >= j).
      if (FIXED && !diag && nq == kTile) {
        // A whole tile off the diagonal: a fixed 64-step loop, unrolled (the
        // next steps' shared loads issue beside this step's fma).
#pragma unroll 4
        for (int qi = 0; qi < kTile; ++qi) {
          float p[4], ds[4], qd[DC], od[DC];
          unpack(ld4(Ps + qi * kPad + 4 * ty), p);
          unpack(ld4(dSs + qi * kPad + 4 * ty), ds);
          load_v<DC>(Qn + qi * ldr, tx, qd);
          load_v<DC>(dOn + qi * ldr, tx, od);
#pragma unroll
          for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int u = 0; u < DC; ++u) {
              ak[r][u] = fma_rn(ds[r], qd[u], ak[r][u]);
              av[r][u] = fma_rn(p[r], od[u], av[r][u]);
            }
        }
        continue;
      }
      const int first = diag ? 4 * ty : 0;
      for (int qi = first; qi < nq; ++qi) {
        float p[4], ds[4], qd[DC], od[DC];
        unpack(ld4(Ps + qi * kPad + 4 * ty), p);
        unpack(ld4(dSs + qi * kPad + 4 * ty), ds);
        load_v<DC>(Qn + qi * ldr, tx, qd);
        load_v<DC>(dOn + qi * ldr, tx, od);
        if (!diag || qi >= 4 * ty + 3) {
#pragma unroll
          for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int u = 0; u < DC; ++u) {
              ak[r][u] = fma_rn(ds[r], qd[u], ak[r][u]);
              av[r][u] = fma_rn(p[r], od[u], av[r][u]);
            }
        } else {
#pragma unroll
          for (int r = 0; r < 4; ++r)
            if (qi >= 4 * ty + r) {
#pragma unroll
              for (int u = 0; u < DC; ++u) {
                ak[r][u] = fma_rn(ds[r], qd[u], ak[r][u]);
                av[r][u] = fma_rn(p[r], od[u], av[r][u]);
              }
            }
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int j = j0 + 4 * ty + r;
    if (j >= T) continue;
    const i64 off = kvoff(a, b, j, g);
#pragma unroll
    for (int u = 0; u < DC; ++u) {
      const int d = d_of<DC>(tx, u);
      if (d < Dh) {
        a.dk[off + d] = mul(ak[r][u], a.scale);
        a.dv[off + d] = av[r][u];
      }
    }
  }
}

// ===========================================================================
// Tiled dq. CTA: (head, batch - b0, query tile). Scores: queries 4ty + a, keys
// tx + 16c. Accumulators: queries 4ty + a, d = d_of<DC>(tx, u).
// Shared, row-major [64][ldr]: Qn, dOn (the CTA's queries), Kn, Vn (a key
// block); dSt [64 keys][68] (float4 of 4 queries); lse, D [64].
// ===========================================================================
std::size_t dq_smem_floats(int Dh) {
  return 4u * 64u * static_cast<unsigned>(ldr_of(Dh)) + 64u * kPad + 128u + 64u;
}

template <int DC, bool V4>
__global__ void __launch_bounds__(kThreads, DC <= 4 ? 2 : 1) dq_tiled_kernel(Args a) {
  LS_SMEM(sm);
  const int Dh = a.Dh, T = a.T, ldr = ldr_of(Dh), ts = kTile * ldr;
  float* Qn = sm;
  float* dOn = Qn + ts;
  float* Kn = dOn + ts;
  float* Vn = Kn + ts;
  float* dSt = Vn + ts;
  float* lse_s = dSt + kTile * kPad;
  float* D_s = lse_s + kTile;

  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  const int qb = static_cast<int>(gridDim.z) - 1 - static_cast<int>(blockIdx.z);  // long tiles first
  const int h = blockIdx.x, b = a.b0 + static_cast<int>(blockIdx.y), g = h / a.rep;
  const int i0 = qb * kTile;
  const int nq = T - i0 < kTile ? T - i0 : kTile;

  const i64 ldo = static_cast<i64>(a.Hq) * Dh;
  load_rows2<DC, V4>(Qn, ldr, qrow(a, b, i0, h), a.ldq, Dh, dOn, ldr, a.dout + ooff(a, b, i0, h), ldo, Dh, nq, tid);
  if (tid < kTile) {
    const bool in = tid < nq;
    lse_s[tid] = in ? a.lse[lseoff(a, b, h, i0 + tid)] : 0.0f;
    D_s[tid] = in ? a.delta[lseoff(a, b, h, i0 + tid)] : 0.0f;
  }

  float acc[4][DC];
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int u = 0; u < DC; ++u) acc[r][u] = 0.0f;

  for (int kb = 0; kb <= qb; ++kb) {
    const int j0 = kb * kTile;
    const bool diag = kb == qb;
    const int nk = T - j0 < kTile ? T - j0 : kTile;
    __syncthreads();
    load_rows2<DC, V4>(Kn, ldr, a.k + kvoff(a, b, j0, g), a.ldkv, Dh, Vn, ldr, a.v + kvoff(a, b, j0, g), a.ldkv, Dh,
                     nk, tid);
    __syncthreads();

    {
      float s[4][4], dp[4][4];
      patch_chains(Qn, Kn, dOn, Vn, ldr, Dh, 4 * ty, tx, s, dp);
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int kc = tx + 16 * c;
        float ds[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int qi = 4 * ty + r;
          const float p = num::exp(sub(mul(canonical_nan(s[r][c]), a.sscale), lse_s[qi]));
          ds[r] = mul(p, sub(canonical_nan(dp[r][c]), D_s[qi]));
        }
        st4(dSt + kc * kPad + 4 * ty, ds[0], ds[1], ds[2], ds[3]);
      }
    }
    __syncthreads();

    // dq_i += dS_ij · k_j, keys ascending (j <= i).
    const int last = diag ? 4 * ty + 3 : kTile - 1;
    for (int c = 0; c <= last; ++c) {
      float ds[4], kd[DC];
      unpack(ld4(dSt + c * kPad + 4 * ty), ds);
      load_v<DC>(Kn + c * ldr, tx, kd);
      if (!diag || c <= 4 * ty) {
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
          for (int u = 0; u < DC; ++u) acc[r][u] = fma_rn(ds[r], kd[u], acc[r][u]);
      } else {
#pragma unroll
        for (int r = 0; r < 4; ++r)
          if (c <= 4 * ty + r) {
#pragma unroll
            for (int u = 0; u < DC; ++u) acc[r][u] = fma_rn(ds[r], kd[u], acc[r][u]);
          }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int i = i0 + 4 * ty + r;
    if (i >= T) continue;
    float* dqr = a.dq + (static_cast<i64>(b) * T + i) * a.ldq + static_cast<i64>(h) * Dh;
#pragma unroll
    for (int u = 0; u < DC; ++u) {
      const int d = d_of<DC>(tx, u);
      if (d < Dh) dqr[d] = mul(acc[r][u], a.scale);
    }
  }
}

// ===========================================================================
// dq from stored dS. CTA: (head, batch - b0, query tile). Accumulators as in
// dq_tiled_kernel; per key block: Kn [64][ldr] and the dS^T tile dSt
// [64 keys][68] (float4 of 4 queries). Two stages: key block kb + 1's tiles
// are copied (cp.async, 16 bytes, L2 only; rows past nk zero-filled) while
// block kb's chains run; one barrier per key block. Without float4 rows
// (rows_v4) the next stage is filled by plain loads at the same place.
// ===========================================================================
__host__ __device__ inline int dq_stored_stage_floats(int Dh) { return kTile * ldr_of(Dh) + kTile * kPad; }
std::size_t dq_stored_smem_floats(int Dh) { return 2u * static_cast<unsigned>(dq_stored_stage_floats(Dh)) + 64u; }

// Key block kb's K rows and dS^T tile into a stage (Kn at st, dSt after it).
template <bool V4>
__device__ __forceinline__ void dq_stored_fill(const Args& a, float* st, int b, int bz, int g, int h, int qb, int kb,
                                               int tid) {
  const int Dh = a.Dh, T = a.T, ldr = ldr_of(Dh), j0 = kb * kTile;
  const int nk = T - j0 < kTile ? T - j0 : kTile;
  float* Kn = st;
  float* dSt = st + kTile * ldr;
  const float* ks = a.k + kvoff(a, b, j0, g);
  const float* ds = a.dsbuf + ds_tile(a, bz, h, qb, kb);
  if constexpr (V4) {
    const int q4 = Dh >> 2, tk = kTile * q4;
    for (int f = tid; f < tk; f += kThreads) {
      const int r = f / q4, c = f - r * q4;
      detail::cp_async16_zfill(Kn + r * ldr + 4 * c, r < nk ? ks + r * a.ldkv + 4 * c : ks, r < nk);
    }
    // (dS rows past nk are never read; zero-filled like the K rows.)
#pragma unroll
    for (int u = 0; u < kTile * kTile / 4 / kThreads; ++u) {
      const int f = tid + u * kThreads, r = f >> 4, c = f & 15;
      detail::cp_async16_zfill(dSt + r * kPad + 4 * c, r < nk ? ds + r * kTile + 4 * c : ds, r < nk);
    }
    detail::cp_async_commit();
  } else {
    load_rows2<4, false>(Kn, ldr, ks, a.ldkv, Dh, dSt, kPad, ds, kTile, kTile, nk, tid);
  }
}

template <int DC, bool V4>
__global__ void __launch_bounds__(kThreads) dq_stored_kernel(Args a) {
  LS_SMEM(sm);
  const int Dh = a.Dh, ldr = ldr_of(Dh), T = a.T;
  const int stage = dq_stored_stage_floats(Dh);

  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  const int qb = static_cast<int>(gridDim.z) - 1 - static_cast<int>(blockIdx.z);  // long tiles first
  const int h = blockIdx.x, bz = static_cast<int>(blockIdx.y), b = a.b0 + bz, g = h / a.rep;
  const int i0 = qb * kTile;

  float acc[4][DC];
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int u = 0; u < DC; ++u) acc[r][u] = 0.0f;

  dq_stored_fill<V4>(a, sm, b, bz, g, h, qb, 0, tid);
  for (int kb = 0; kb <= qb; ++kb) {
    const bool diag = kb == qb;
    if constexpr (V4) detail::cp_async_wait<0>();  // this thread's copies of block kb landed
    __syncthreads();  // everyone's copies of block kb landed; block kb - 1's readers are done
    if (!diag) dq_stored_fill<V4>(a, sm + ((kb + 1) & 1) * stage, b, bz, g, h, qb, kb + 1, tid);
    const float* Kn = sm + (kb & 1) * stage;
    const float* dSt = Kn + kTile * ldr;

    // dq_i += dS_ij · k_j, keys ascending (j <= i).
    if (!diag) {
#pragma unroll 4
      for (int c = 0; c < kTile; ++c) {
        float ds[4], kd[DC];
        unpack(ld4(dSt + c * kPad + 4 * ty), ds);
        load_v<DC>(Kn + c * ldr, tx, kd);
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
          for (int u = 0; u < DC; ++u) acc[r][u] = fma_rn(ds[r], kd[u], acc[r][u]);
      }
    } else {
      const int last = 4 * ty + 3;
      for (int c = 0; c <= last; ++c) {
        float ds[4], kd[DC];
        unpack(ld4(dSt + c * kPad + 4 * ty), ds);
        load_v<DC>(Kn + c * ldr, tx, kd);
        if (c <= 4 * ty) {
#pragma unroll
          for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int u = 0; u < DC; ++u) acc[r][u] = fma_rn(ds[r], kd[u], acc[r][u]);
        } else {
#pragma unroll
          for (int r = 0; r < 4; ++r)
            if (c <= 4 * ty + r) {
#pragma unroll
              for (int u = 0; u < DC; ++u) acc[r][u] = fma_rn(ds[r], kd[u], acc[r][u]);
            }
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int i = i0 + 4 * ty + r;
    if (i >= T) continue;
    float* dqr = a.dq + (static_cast<i64>(b) * T + i) * a.ldq + static_cast<i64>(h) * Dh;
#pragma unroll
    for (int u = 0; u < DC; ++u) {
      const int d = d_of<DC>(tx, u);
      if (d < Dh) dqr[d] = mul(acc[r][u], a.scale);
    }
  }
}

// ===========================================================================
// Launch helpers.
// ===========================================================================
Args args_of(const AttentionShape& s) {
  if (s.kv_heads == 0 || s.q_heads % s.kv_heads != 0)
    throw std::invalid_argument("attention: kv_heads must divide q_heads");
  if (s.key_block == 0) throw std::invalid_argument("attention: key_block must be > 0");
  Args a{};
  a.B = static_cast<int>(s.batch);
  a.T = static_cast<int>(s.seq);
  a.Hq = static_cast<int>(s.q_heads);
  a.Hkv = static_cast<int>(s.kv_heads);
  a.Dh = static_cast<int>(s.head_dim);
  a.rep = a.Hq / a.Hkv;
  a.KB = static_cast<int>(s.key_block);
  a.ldq = static_cast<i64>(s.ldq);
  a.ldkv = static_cast<i64>(s.ldkv);
  a.scale = s.scale;
  a.sscale = mutant() == Mutant::attention_drop_scale ? 1.0f : s.scale;
  return a;
}

unsigned blocks_for(i64 n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// The launch trace's name of a tiled path (trace.hpp): the kernel, its head
// chunking DC (head_dim <= 16·DC) and its row loads.
const char* tiled_path(const char* kernel, int dc, bool v4) {
  const char* dh = dc == 1 ? "16" : dc == 2 ? "32" : dc == 4 ? "64" : "128";
  return trace::compose(kernel, " (head_dim <= ", dh, v4 ? ", float4 rows)" : ", scalar rows)");
}

// The tiles' global rows can be moved as float4s: Dh and the row strides
// multiples of 4 floats, the base pointers 16-byte aligned.
bool rows_v4(const Args& a) {
  const auto al = [](const float* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  return a.Dh % 4 == 0 && a.ldq % 4 == 0 && a.ldkv % 4 == 0 && al(a.q) && al(a.k) && al(a.v) && al(a.dout);
}

int fwd_tile_forced = 0;  // attention_fwd_tile_override (0: the rule)

template <int DC, int RH>
void fwd_tiled_rh(const Args& a) {
  const int bytes = static_cast<int>(fwd_smem_floats(a.Dh, RH) * sizeof(float));
  auto* const kernel = rows_v4(a) ? fwd_tiled_kernel<DC, true, RH> : fwd_tiled_kernel<DC, false, RH>;
  static const char* const name = RH == 1 ? "attention_fwd tiled" : "attention_fwd tiled, 128 queries";
  static const char* const path[2] = {tiled_path(name, DC, false), tiled_path(name, DC, true)};
  trace::launched(path[rows_v4(a) ? 1 : 0]);
  LS_SET_SMEM(kernel, bytes);
  const dim3 grid(static_cast<unsigned>(a.Hq), static_cast<unsigned>(a.B),
                  static_cast<unsigned>((a.T + kTile * RH - 1) / (kTile * RH)));
  LS_LAUNCH(kernel, grid, dim3(kThreads), bytes, a);
}

template <int DC>
void fwd_tiled(const Args& a) {
  if constexpr (DC <= 4) {
    if (fwd_tile_forced != kTile) {
      fwd_tiled_rh<DC, 2>(a);
      return;
    }
  }
  fwd_tiled_rh<DC, 1>(a);
}

// chunk > 0: the stored-dS path, batch elements in chunks of `chunk` (the dS
// tiles of one chunk fill a.dsbuf); 0: dq recomputes s, P and dP.
bool dkdv_v4_forced = false;  // attention_bwd_dkdv_v4_override

// FIXED: the dk/dv kernel's fixed, unrolled accumulation loop on whole tiles
// off the diagonal (v5, float4 rows); false: v4's one loop for every tile.
template <int DC, bool V4, bool FIXED>
void bwd_tiled_v(Args a, int chunk) {
  constexpr bool named_v4 = V4 && !FIXED;  // forced off the rule: its own trace path
  const unsigned tiles = static_cast<unsigned>((a.T + kTile - 1) / kTile);
  const int kv_bytes = static_cast<int>(dkdv_smem_floats(a.Dh) * sizeof(float));
  if (chunk == 0) {
    auto* const kv_kernel = dkdv_tiled_kernel<DC, V4, false, FIXED>;
    auto* const q_kernel = dq_tiled_kernel<DC, V4>;
    static const char* const kv_path = tiled_path(
        named_v4 ? "attention_bwd dk dv, recomputing dS, v4 loop" : "attention_bwd dk dv, recomputing dS", DC, V4);
    static const char* const q_path = tiled_path("attention_bwd dq, recomputing dS", DC, V4);
    LS_SET_SMEM(kv_kernel, kv_bytes);
    trace::launched(kv_path);
    LS_LAUNCH(kv_kernel, dim3(static_cast<unsigned>(a.Hkv), static_cast<unsigned>(a.B), tiles), dim3(kThreads),
              kv_bytes, a);
    check_launch("attention_bwd (dk, dv)");
    const int q_bytes = static_cast<int>(dq_smem_floats(a.Dh) * sizeof(float));
    LS_SET_SMEM(q_kernel, q_bytes);
    trace::launched(q_path);
    LS_LAUNCH(q_kernel, dim3(static_cast<unsigned>(a.Hq), static_cast<unsigned>(a.B), tiles), dim3(kThreads),
              q_bytes, a);
    return;
  }
  auto* const kv_kernel = dkdv_tiled_kernel<DC, V4, true, FIXED>;
  auto* const q_kernel = dq_stored_kernel<DC, V4>;
  const int q_bytes = static_cast<int>(dq_stored_smem_floats(a.Dh) * sizeof(float));
  LS_SET_SMEM(kv_kernel, kv_bytes);
  LS_SET_SMEM(q_kernel, q_bytes);
  // A batch beyond the first chunk is its own path: the kernels offset by b0.
  static const char* const kv_path[2] = {
      tiled_path(named_v4 ? "attention_bwd dk dv, storing dS, v4 loop" : "attention_bwd dk dv, storing dS", DC, V4),
      tiled_path(named_v4 ? "attention_bwd dk dv, storing dS, later chunk, v4 loop"
                          : "attention_bwd dk dv, storing dS, later chunk",
                 DC, V4)};
  static const char* const q_path[2] = {tiled_path("attention_bwd dq from stored dS", DC, V4),
                                        tiled_path("attention_bwd dq from stored dS, later chunk", DC, V4)};
  for (int b0 = 0; b0 < a.B; b0 += chunk) {
    a.b0 = b0;
    const unsigned nb = static_cast<unsigned>(a.B - b0 < chunk ? a.B - b0 : chunk);
    trace::launched(kv_path[b0 > 0 ? 1 : 0]);
    LS_LAUNCH(kv_kernel, dim3(static_cast<unsigned>(a.Hkv), nb, tiles), dim3(kThreads), kv_bytes, a);
    check_launch("attention_bwd (dk, dv, dS)");
    trace::launched(q_path[b0 > 0 ? 1 : 0]);
    LS_LAUNCH(q_kernel, dim3(static_cast<unsigned>(a.Hq), nb, tiles), dim3(kThreads), q_bytes, a);
    check_launch("attention_bwd (dq from dS)");
  }
}

template <int DC>
void bwd_tiled(const Args& a, int chunk) {
  // Scalar rows keep v4's loop (the fixed loop spills there at DC 4).
  if (!rows_v4(a)) bwd_tiled_v<DC, false, false>(a, chunk);
  else if (dkdv_v4_forced) bwd_tiled_v<DC, true, false>(a, chunk);
  else bwd_tiled_v<DC, true, true>(a, chunk);
}

// Where the dS tiles start in the scratch: after D_i, 64-float aligned.
std::size_t ds_offset(std::size_t rows) { return (rows + 63) / 64 * 64; }
// Floats of dS tiles one batch element needs (stored-dS path).
std::size_t ds_floats_per_batch(const AttentionShape& s) {
  const std::size_t nt = (s.seq + kTile - 1) / kTile;
  return s.q_heads * (nt * (nt + 1) / 2) * kTile * kTile;
}

}  // namespace

bool attention_tiled(const AttentionShape& s) { return s.key_block == kTile && s.head_dim >= 1 && s.head_dim <= 128; }

void attention_fwd_tile_override(int rows) {
  if (rows != 0 && rows != kTile && rows != 2 * kTile)
    throw std::invalid_argument("attention_fwd_tile_override: rows must be 0, 64 or 128");
  fwd_tile_forced = rows;
}

void attention_bwd_dkdv_v4_override(bool on) { dkdv_v4_forced = on; }

int attention_fwd_tile(const AttentionShape& s) {
  if (!attention_tiled(s)) return 0;
  return s.head_dim <= 64 && fwd_tile_forced != kTile ? 2 * kTile : kTile;
}

void attention_fwd(const AttentionShape& s, const float* q, const float* k, const float* v, float* o, float* lse) {
  Args a = args_of(s);
  if (a.B == 0 || a.T == 0 || a.Hq == 0 || a.Dh == 0) return;
  a.q = q;
  a.k = k;
  a.v = v;
  a.out_o = o;
  a.out_lse = lse;
  if (attention_tiled(s)) {
    if (a.Dh <= 16) fwd_tiled<1>(a);
    else if (a.Dh <= 32) fwd_tiled<2>(a);
    else if (a.Dh <= 64) fwd_tiled<4>(a);
    else fwd_tiled<8>(a);
  } else {
    const i64 n = static_cast<i64>(a.B) * a.Hq * a.T * a.Dh;
    trace::launched("attention_fwd cell");
    LS_LAUNCH(fwd_cell_kernel, dim3(blocks_for(n)), dim3(kThreads), 0, a);
  }
  check_launch("attention_fwd");
}

std::size_t attention_bwd_scratch_floats(const AttentionShape& s, std::size_t max_ds_bytes) {
  const std::size_t rows = s.batch * s.q_heads * s.seq;
  if (!attention_tiled(s) || s.batch == 0 || s.seq == 0) return rows;
  const std::size_t per_b = ds_floats_per_batch(s), fit = max_ds_bytes / sizeof(float) / per_b;
  return fit == 0 ? rows : ds_offset(rows) + (fit < s.batch ? fit : s.batch) * per_b;
}

void attention_bwd(const AttentionShape& s, const float* q, const float* k, const float* v, const float* o,
                   const float* lse, const float* dout, float* dq, float* dk, float* dv, float* scratch,
                   std::size_t scratch_floats) {
  Args a = args_of(s);
  if (a.B == 0 || a.T == 0 || a.Hq == 0 || a.Dh == 0) return;
  a.q = q;
  a.k = k;
  a.v = v;
  a.o = o;
  a.lse = lse;
  a.dout = dout;
  const std::size_t rows_n = s.batch * s.q_heads * s.seq;
  if (scratch_floats < rows_n) throw std::invalid_argument("attention_bwd: scratch smaller than batch·q_heads·seq");
  a.delta = scratch;
  a.dsbuf = scratch + ds_offset(rows_n);  // float4 reads: 16-byte aligned (scratch is)
  a.dq = dq;
  a.dk = dk;
  a.dv = dv;
  const i64 rows = static_cast<i64>(a.B) * a.Hq * a.T;
  if (a.Dh <= 128) {
    const int R = delta_rows(a.Dh), dbytes = static_cast<int>(2u * R * delta_pitch(a.Dh) * sizeof(float));
    const bool v4 = a.Dh % 4 == 0 && reinterpret_cast<std::uintptr_t>(a.o) % 16 == 0 &&
                    reinterpret_cast<std::uintptr_t>(a.dout) % 16 == 0;
    auto* const dkernel = v4 ? delta_rows_kernel<true> : delta_rows_kernel<false>;
    trace::launched(v4 ? "attention_bwd D rows (float4)" : "attention_bwd D rows (scalar)");
    LS_SET_SMEM(dkernel, dbytes);
    LS_LAUNCH(dkernel, dim3(static_cast<unsigned>((rows + R - 1) / R)), dim3(kDeltaThreads), dbytes, a);
  } else {
    trace::launched("attention_bwd D (head_dim > 128)");
    LS_LAUNCH(delta_kernel, dim3(blocks_for(rows)), dim3(kThreads), 0, a);
  }
  check_launch("attention_bwd (D)");
  if (attention_tiled(s)) {
    const std::size_t per_b = ds_floats_per_batch(s);
    const std::size_t fit = scratch_floats > ds_offset(rows_n) ? (scratch_floats - ds_offset(rows_n)) / per_b : 0;
    const int chunk = static_cast<int>(fit < s.batch ? fit : s.batch);
    if (a.Dh <= 16) bwd_tiled<1>(a, chunk);
    else if (a.Dh <= 32) bwd_tiled<2>(a, chunk);
    else if (a.Dh <= 64) bwd_tiled<4>(a, chunk);
    else bwd_tiled<8>(a, chunk);
  } else {
    const i64 nq = static_cast<i64>(a.B) * a.Hq * a.T * a.Dh;
    const i64 nkv = static_cast<i64>(a.B) * a.Hkv * a.T * a.Dh;
    trace::launched("attention_bwd dk dv cell");
    LS_LAUNCH(dkdv_cell_kernel, dim3(blocks_for(nkv)), dim3(kThreads), 0, a);
    check_launch("attention_bwd (dk, dv)");
    trace::launched("attention_bwd dq cell");
    LS_LAUNCH(dq_cell_kernel, dim3(blocks_for(nq)), dim3(kThreads), 0, a);
  }
  check_launch("attention_bwd");
}

}  // namespace lockstep::cuda::launch
