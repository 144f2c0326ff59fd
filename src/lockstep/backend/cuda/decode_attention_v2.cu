// The cached attention of decoding, v2: ops::CachedAttention's float
// expression (ops::Attention::attend per query over the cached keys), bit for
// bit with v1 (decode.cu's one CTA per (row, head)) and the CPU, spread over
// many CTAs. Selected by LOCKSTEP_DECODE_ATTENTION (decode_launch.hpp:
// decode_attention_version; v1 stays selectable; v2pdl launches the fold as
// a programmatic dependent launch: its V copies start while the scores run).
//
// What the expression allows (ops/attention.hpp's forward, per query):
//   s_j = dot_seq(q, k_j) · scale                    one chain per key, over d
//   block b (keys [b·KB, b·KB + KB), the last cut at n):
//     mb_b = max2 fold of s_j over the block, j ascending
//     m_0 = mb_0; m_b = max2(m_{b-1}, mb_b), alpha_b = exp(m_{b-1} - m_b)   (b >= 1)
//     (the spec computes alpha_b inside its m chain; its inputs are m_{b-1}
//     and m_b only, so computed after the chain it is the same float)
//     p_j = exp(s_j - m_b)
//     l:     l = +0; per block (b >= 1: l = l · alpha_b), then l = l + p_j, j ascending
//     acc_d: acc = +0; per block (b >= 1: acc = acc · alpha_b), then acc = fma(p_j, v_jd, acc), j ascending
//   o_d = acc_d / l.
// Every s_j is its own chain: all of them, of every key and every head, may be
// computed at once, anywhere. mb_b reads only its block's scores. The m chain
// is a prefix fold over the block maxima (n/KB steps). Given m_b, every p_j is
// independent. Only the l chain and each acc_d chain run in key order, and
// each has one owner below (the l chain: computed whole by every lane of the
// head's warp, the same bits in each; acc_d: lane d of that warp). No chain is
// split, reassociated or reordered; there is no merge of partial softmaxes
// (that would be the "split-K flash-decode", a different expression).
//
// Two launches:
//   * scores: a CTA per (32-key chunk, kv head, row): the chunk's K rows and
//     the q rows of the kv head's `rep` query heads staged in shared memory (K
//     read once for the whole group), one thread per (query head, key) chain;
//     the scores go to a scratch [rows, q_heads, ctx] (a CTA whose keys lie
//     past its row's length exits at once: nothing written, nothing read);
//   * fold: a CTA per (32-wide d slice, kv head, row), a warp per query head of
//     the group: the head's scores read back, the block maxima (a lane a
//     block), the m chain (lane 0), p_j (all lanes), then the acc chains (lane
//     = d) and the l chain (every lane) over the blocks in key order, the V
//     slice of the group's rows staged block by block into a ring of shared
//     buffers by cp.async ahead of the chains (V read once for the group).
//     The alpha_b and p_j are computed by all lanes once the m chain (a max2
//     fold of n/KB steps) is done: no exp waits on another.
// At batch 1 on BitNet 2B4T (20 query heads, 5 kv heads, Dh 128) and ctx 512:
// 80 score CTAs and 20 fold CTAs of 128 threads, against v1's 20 CTAs that
// each read their group's K and V again.
//
// v3 (LOCKSTEP_DECODE_ATTENTION=v3; attention_v3_kernel): one launch, the
// fold's grid (a CTA per 32-wide d slice, kv head, row) of 512 threads. Each
// CTA issues its V ring's first copies, then computes every score of its
// group itself — 128-key chunks of K staged (stage_keys_padded), a thread per
// (query head, key) chain (v2_score), straight into the fold's shared score
// array — and then runs the fold (fold_blocks, the same function as v2's fold
// kernel). The four d-slice CTAs of a group compute the same scores (K read
// from L2 four times, 48 KB a CTA at 96 keys): what that buys is the scores
// kernel's launch, its scratch write and the fold's read of it back (two
// dependent global round trips) and no scratch. The same chains, the same
// owners: s_j one thread's chain; the block maxima, m, alpha, p, l and acc as
// in v2's fold.
//
// Written with the LS_* hooks so that the host fiber emulator
// (tests/cuda/cuda_host_emu.hpp, tests/cuda/decode_attention_emu_test.cpp)
// runs the three kernels on the CPU against ops::CachedAttention::forward.
#include <cstddef>
#include <cstdint>

#include "lockstep/backend/cuda/cp_async.cuh"
#include "lockstep/backend/cuda/decode_launch.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/stage_keys.cuh"
#if !defined(LS_HOST_EMULATOR)
#include "lockstep/backend/cuda/pdl_launch.cuh"
#endif
#include "lockstep/backend/cuda/pdl_device.cuh"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/num/elementary.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/reduce.hpp"

#include "lockstep/backend/cuda/ls_hooks.cuh"  // LS_SMEM, LS_LAUNCH, LS_SET_SMEM (the host emulator's first)

namespace lockstep::cuda::launch {
namespace {

using i64 = long long;

constexpr int kScoreThreads = 128;
constexpr int kScoreKeys = 32;  // keys a score CTA
constexpr int kSlice = 32;      // d a fold CTA (a lane each)
constexpr int kRing = 6;        // V blocks a fold CTA's ring holds (5 in flight ahead of the chains)
constexpr int kMaxRep = 16;     // query heads a kv head (a warp each): 512 threads
constexpr std::size_t kV2MaxSmem = 200 * 1024;
constexpr int kV3Threads = 512;  // v3: 16 warps (a score chunk's (key, 4 heads) items; warps 0..rep-1 the fold's)
constexpr int kV3Chunk = 128;    // v3's keys a score chunk (66 KB of K at Dh 128): 128 × ceil(rep / 4) <= 512 items
constexpr int kV3Heads = 4;      // query heads a v3 score thread (their chains interleaved, each K load used 4 times)

struct V2AttnArgs {
  const float *q, *k, *v;
  const std::int32_t *slot, *pos;
  float* o;
  float* s;  // the scores' scratch [rows, Hq, ctx]
  int Hq, Dh, rep, KB;
  i64 ctx, kvd, ldq;
  float scale;
  bool vec;  // 16-byte copies (Dh, kvd multiples of 4, the caches 16-byte aligned)
  CachedAttentionV2Options plant;
};

__device__ __forceinline__ float v2_max2(float a, float b) { return a > b ? a : b; }  // ops::max2

// One (query head, key) score: num::reduce::dot_seq (acc = +0, fma over d
// ascending, the canonical NaN), then · scale; qs and ks in shared memory.
__device__ __forceinline__ float v2_score(const float* qs, const float* ks, int Dh, float scale) {
  float acc = 0.0f;
#pragma unroll 8
  for (int d = 0; d < Dh; ++d) acc = num::fma_rn(qs[d], ks[d], acc);
  return __fmul_rn(num::reduce::canonical_nan(acc), scale);
}

// v2pdl: the scores kernel lets the fold grid start at once (its CTAs then
// issue their V copies, which read only what the kernels before the scores
// wrote), and the fold waits for the scores kernel's completion (its writes
// visible) before it reads a score. Without a programmatic launch both return at once.
__device__ __forceinline__ void let_dependents_start() { pdl::pdl_trigger(); }  // pdl_device.cuh
__device__ __forceinline__ void wait_for_scores() { pdl::pdl_wait(); }

__global__ void __launch_bounds__(kScoreThreads) attention_scores_kernel(const V2AttnArgs a) {
  LS_SMEM(sm);
  let_dependents_start();
  wait_for_scores();  // PDL (pdl_device.cuh; LOCKSTEP_DECODE_PDL): q, the caches, pos and s after the wait
  const int Dh = a.Dh, rep = a.rep, tid = static_cast<int>(threadIdx.x);
  const int j0 = static_cast<int>(blockIdx.x) * kScoreKeys, g = static_cast<int>(blockIdx.y),
            r = static_cast<int>(blockIdx.z);
  const int n = a.pos[r] + 1;
  if (j0 >= n) return;  // the whole CTA: past the row's keys
  const int nc = n - j0 < kScoreKeys ? n - j0 : kScoreKeys;
  float* qs = sm;                     // [rep][Dh]: the group's query heads, adjacent in the q row
  float* ks = qs + rep * Dh;          // [kScoreKeys][Dh + 1]: a column read without bank conflicts
  const float* qg = a.q + static_cast<i64>(r) * a.ldq + static_cast<i64>(g) * rep * Dh;
  const float* kb = a.k + (static_cast<i64>(a.slot[r]) * a.ctx + j0) * a.kvd + static_cast<i64>(g) * Dh;
  for (int e = tid; e < rep * Dh; e += kScoreThreads) qs[e] = qg[e];
  detail::stage_keys_padded<kScoreThreads>(kb, a.kvd, nc, Dh, a.vec, ks, tid);
  __syncthreads();
  // A warp: one query head, 32 consecutive keys (q broadcast, K rows Dh + 1 apart).
  for (int e = tid; e < rep * kScoreKeys; e += kScoreThreads) {
    const int h = e / kScoreKeys, j = e - h * kScoreKeys;
    if (j < nc)
      a.s[(static_cast<i64>(r) * a.Hq + g * rep + h) * a.ctx + j0 + j] =
          v2_score(qs + h * Dh, ks + j * (Dh + 1), Dh, a.scale);
  }
}

// Copies the V slice of block b (keys j0.., nb of them; d0..d0+31 of the
// group's head) into ring slot `buf` [KB][kSlice], zeros past Dh; then commits
// the thread's copies as one group (also when there is nothing to copy, so
// that every thread's group count is the same).
__device__ __forceinline__ void stage_v_block(const V2AttnArgs& a, const float* vg, int d0, int j0, int nb, float* buf,
                                              int tid, int threads) {
  const i64 kvd = a.kvd;
  if (a.vec) {
    constexpr int c4 = kSlice / 4;
    for (int e = tid; e < nb * c4; e += threads) {
      const int j = e / c4, c = e - j * c4, d = d0 + 4 * c;
      const bool in = d < a.Dh;  // Dh % 4 == 0: a 16-byte chunk is all in or all out
      detail::cp_async16_zfill(buf + j * kSlice + 4 * c, vg + (j0 + j) * kvd + (in ? d : 0), in);
    }
  } else {
    for (int e = tid; e < nb * kSlice; e += threads) {
      const int j = e / kSlice, c = e - j * kSlice, d = d0 + c;
      if (d < a.Dh)
        detail::cp_async4(buf + e, vg + (j0 + j) * kvd + d);
      else
        buf[e] = 0.0f;
    }
  }
  detail::cp_async_commit();
}

// The fold's shared memory (decode_attention_v2's fold and v3): the V ring,
// the group's scores (then p), the block maxima (then m_b) and the alphas.
struct FoldSmem {
  float *ring, *p, *mrun, *alpha;
  int max_blocks;
};
__device__ __forceinline__ FoldSmem fold_layout(float* sm, const V2AttnArgs& a) {
  FoldSmem f;
  f.max_blocks = static_cast<int>((a.ctx + a.KB - 1) / a.KB);
  f.ring = sm;                                          // [kRing][KB][kSlice]
  f.p = f.ring + kRing * a.KB * kSlice;                 // [rep][ctx]: the scores, then p
  f.mrun = f.p + static_cast<i64>(a.rep) * a.ctx;       // [rep][max_blocks]: block maxima, then m_b
  f.alpha = f.mrun + a.rep * f.max_blocks;              // [rep][max_blocks]
  return f;
}

// v3's q rows: past the fold's arrays, rounded up to 16 bytes (the Q4 loads).
__host__ __device__ constexpr std::size_t v3_q_offset(int rep, int KB, i64 ctx) {
  const i64 max_blocks = (ctx + KB - 1) / KB;
  const i64 end = static_cast<i64>(kRing) * KB * kSlice + rep * ctx + 2 * rep * max_blocks;
  return static_cast<std::size_t>((end + 3) / 4 * 4);
}

// The first kRing - 1 V blocks of the slice in flight (issued before the
// scores are computed or read, so that the V round trip overlaps them).
__device__ __forceinline__ void stage_v_prologue(const V2AttnArgs& a, const FoldSmem& f, const float* vg, int d0,
                                                 int n, int tid, int threads) {
  const int KB = a.KB, nblk = (n + KB - 1) / KB;
  for (int b = 0; b < kRing - 1; ++b) {
    const int j0 = b * KB, nb = b < nblk ? (n - j0 < KB ? n - j0 : KB) : 0;
    stage_v_block(a, vg, d0, j0, nb, f.ring + b * KB * kSlice, tid, threads);
  }
}

// The fold of one (d slice d0.., kv head g, row r) over n keys, by `threads`
// threads (at least rep warps; warp w < rep owns query head g·rep + w's
// chains): f.p holds the group's scores [rep][ctx], published by a barrier
// before the call; stage_v_prologue was called first. The block maxima, the m
// chains (a thread a head), alpha_b and p_j (spread over all threads), then
// block by block in key order lane d's acc chain and every lane's copy of the
// l chain; o_d = acc_d / l.
__device__ __forceinline__ void fold_blocks(const V2AttnArgs& a, const FoldSmem& f, const float* vg, int d0, int g,
                                            int r, int n, int tid, int threads) {
  const int KB = a.KB, rep = a.rep, w = tid >> 5, lane = tid & 31, nblk = (n + KB - 1) / KB;
  const i64 ctx = a.ctx;
  const int mb_n = f.max_blocks;
  // mb_b of every (head, block): a fold over the block, keys ascending.
  for (int e = tid; e < rep * nblk; e += threads) {
    const int hh = e / nblk, b = e - hh * nblk;
    const float* ph = f.p + static_cast<i64>(hh) * ctx;
    const int j0 = b * KB, j1 = j0 + KB < n ? j0 + KB : n;
    float mb = ph[j0];
#pragma unroll 8
    for (int j = j0 + 1; j < j1; ++j) mb = v2_max2(mb, ph[j]);
    f.mrun[hh * mb_n + b] = mb;
  }
  __syncthreads();
  // The m chain of each head (thread hh): m_b = max2(m_{b-1}, mb_b) in place of the maxima.
  for (int hh = tid; hh < rep; hh += threads) {
    float* mh = f.mrun + hh * mb_n;
    float m = mh[0];
    for (int b = 1; b < nblk; ++b) {
      m = v2_max2(m, mh[a.plant.max_from_next_block && b + 1 < nblk ? b + 1 : b]);
      mh[b] = m;
    }
  }
  __syncthreads();
  // Given the m_b, every alpha_b = exp(m_{b-1} - m_b) and every p_j = exp(s_j - m_b) is its own.
  if (nblk > 1)
    for (int e = tid; e < rep * (nblk - 1); e += threads) {
      const int hh = e / (nblk - 1), b = e - hh * (nblk - 1) + 1;
      f.alpha[hh * mb_n + b] = num::exp(__fsub_rn(f.mrun[hh * mb_n + b - 1], f.mrun[hh * mb_n + b]));
    }
  for (int e = tid; e < rep * n; e += threads) {
    const int hh = e / n, j = e - hh * n;
    float* pj = f.p + static_cast<i64>(hh) * ctx + j;
    *pj = num::exp(__fsub_rn(*pj, f.mrun[hh * mb_n + j / KB]));
  }
  // (the ring loop's first barrier publishes alpha and p)
  const bool owner = w < rep;  // warps past the group's heads stage V and pass the barriers only
  const float* ph = f.p + static_cast<i64>(owner ? w : 0) * ctx;
  const float* ah = f.alpha + (owner ? w : 0) * mb_n;
  float acc = 0.0f, l = 0.0f;
  for (int b = 0; b < nblk; ++b) {
    {
      const int bs = b + kRing - 1, j0 = bs * KB, nb = bs < nblk ? (n - j0 < KB ? n - j0 : KB) : 0;
      stage_v_block(a, vg, d0, j0, nb, f.ring + (bs % kRing) * KB * kSlice, tid, threads);
    }
    detail::cp_async_wait<kRing - 1>();  // this thread's copies of block b have landed
    __syncthreads();                     // everyone's
    if (owner) {
      const float* vb = f.ring + (b % kRing) * KB * kSlice + lane;
      const float* pb = ph + b * KB;
      const int nb = n - b * KB < KB ? n - b * KB : KB;
      if (b > 0) {
        const float al = ah[b];
        l = __fmul_rn(l, al);
        acc = __fmul_rn(acc, al);
      }
      if (a.plant.acc_keys_reversed) {
        for (int j = 0; j < nb; ++j) l = __fadd_rn(l, pb[j]);
        for (int j = nb - 1; j >= 0; --j) acc = num::fma_rn(pb[j], vb[j * kSlice], acc);
      } else {
#pragma unroll 8
        for (int j = 0; j < nb; ++j) {
          const float pj = pb[j];
          l = __fadd_rn(l, pj);
          acc = num::fma_rn(pj, vb[j * kSlice], acc);
        }
      }
    }
#if defined(LS_HOST_EMULATOR)
    if (a.plant.no_reuse_barrier) continue;  // the emulator test's planted bug
#endif
    __syncthreads();  // block b's slot is restaged by the next iteration
  }
  if (owner && d0 + lane < a.Dh)
    a.o[(static_cast<i64>(r) * a.Hq + g * rep + w) * a.Dh + d0 + lane] = __fdiv_rn(acc, l);
}

__global__ void __launch_bounds__(kMaxRep * 32) attention_fold_kernel(const V2AttnArgs a) {
  LS_SMEM(sm);
  const int rep = a.rep, threads = rep * 32, tid = static_cast<int>(threadIdx.x);
  const int d0 = static_cast<int>(blockIdx.x) * kSlice, g = static_cast<int>(blockIdx.y),
            r = static_cast<int>(blockIdx.z);
  let_dependents_start();                     // PDL: the next kernel may launch now;
  if (a.plant.wait_first) wait_for_scores();  // LOCKSTEP_DECODE_PDL: the V copies after rope_store's completion
  const int n = a.pos[r] + 1;
  const FoldSmem f = fold_layout(sm, a);
  const float* vg = a.v + static_cast<i64>(a.slot[r]) * a.ctx * a.kvd + static_cast<i64>(g) * a.Dh;
  stage_v_prologue(a, f, vg, d0, n, tid, threads);  // the first V blocks in flight while the scores are read
  const float* sg = a.s + (static_cast<i64>(r) * a.Hq + g * rep) * a.ctx;  // the group's heads are adjacent
  wait_for_scores();
  for (int e = tid; e < rep * n; e += threads) {
    const int hh = e / n, j = e - hh * n;
    f.p[static_cast<i64>(hh) * a.ctx + j] = sg[static_cast<i64>(hh) * a.ctx + j];
  }
  __syncthreads();
  fold_blocks(a, f, vg, d0, g, r, n, tid, threads);
}

// v3: the scores and the fold in one launch. A CTA per (32-wide d slice, kv
// head, row), kV3Threads threads: the V prologue first (its copies in flight
// during the scores), then every score of the group's rep query heads over the
// row's keys computed here (each d slice's CTA computes the same scores: K is
// read from L2 once per slice instead of a scratch round trip), chunk by chunk
// of v3_chunk keys: the chunk's K rows staged (stage_keys_padded), one thread
// per (query head, key) chain (v2_score), the scores into f.p; then
// fold_blocks, v2's fold itself.
//
// The scores of nh <= kV3Heads query heads (rows Dh apart at qs) over one key
// row kr: each head's own dot_seq chain (acc = +0, fma over d ascending, the
// canonical NaN) · scale — v2_score's expression — the nh chains interleaved in
// one thread so that each K load of the column feeds nh fmas; Q4: q read as
// 16-byte broadcasts (Dh % 4 == 0, qs 16-byte aligned), the same d order.
// Shared memory per chain step: (1 + nh / 4) / nh loads against v2_score's 2.
template <bool Q4>
__device__ __forceinline__ void v3_scores(const float* qs, int Dh, const float* kr, int nh, float scale, float* out) {
  float acc[kV3Heads] = {0.0f, 0.0f, 0.0f, 0.0f};
  if constexpr (Q4) {
#pragma unroll 2
    for (int d = 0; d < Dh; d += 4) {
      const float k0 = kr[d], k1 = kr[d + 1], k2 = kr[d + 2], k3 = kr[d + 3];
#pragma unroll
      for (int i = 0; i < kV3Heads; ++i)
        if (i < nh) {
          const float4 qv = *reinterpret_cast<const float4*>(qs + i * Dh + d);
          acc[i] = num::fma_rn(qv.x, k0, acc[i]);
          acc[i] = num::fma_rn(qv.y, k1, acc[i]);
          acc[i] = num::fma_rn(qv.z, k2, acc[i]);
          acc[i] = num::fma_rn(qv.w, k3, acc[i]);
        }
    }
  } else {
#pragma unroll 4
    for (int d = 0; d < Dh; ++d) {
      const float kd = kr[d];
#pragma unroll
      for (int i = 0; i < kV3Heads; ++i)
        if (i < nh) acc[i] = num::fma_rn(qs[i * Dh + d], kd, acc[i]);
    }
  }
#pragma unroll
  for (int i = 0; i < kV3Heads; ++i) out[i] = __fmul_rn(num::reduce::canonical_nan(acc[i]), scale);
}
// The planted bug (DecodeAttentionMutant::score_d_descending): one head's chain over d descending.
__device__ __forceinline__ float v3_score_d_descending(const float* qs, const float* ks, int Dh, float scale) {
  float acc = 0.0f;
  for (int d = Dh - 1; d >= 0; --d) acc = num::fma_rn(qs[d], ks[d], acc);
  return __fmul_rn(num::reduce::canonical_nan(acc), scale);
}

__global__ void __launch_bounds__(kV3Threads) attention_v3_kernel(const V2AttnArgs a) {
  LS_SMEM(sm);
  const int Dh = a.Dh, rep = a.rep, tid = static_cast<int>(threadIdx.x);
  const int d0 = static_cast<int>(blockIdx.x) * kSlice, g = static_cast<int>(blockIdx.y),
            r = static_cast<int>(blockIdx.z);
  let_dependents_start();  // PDL (pdl_device.cuh; LOCKSTEP_DECODE_PDL): the next kernel may launch now;
  wait_for_scores();       // q, the caches and pos (rope_store's writes) only after the wait
  const int n = a.pos[r] + 1, C = kV3Chunk, groups = (rep + kV3Heads - 1) / kV3Heads;
  const FoldSmem f = fold_layout(sm, a);
  float* qs = sm + v3_q_offset(a.rep, a.KB, a.ctx);  // [rep][Dh]: the group's query heads, 16-byte aligned
  float* ks = qs + rep * Dh;                           // [C][Dh + 1]: a chunk's keys (a column read without bank conflicts)
  const bool q4 = Dh % 4 == 0;
  const i64 base = static_cast<i64>(a.slot[r]) * a.ctx * a.kvd + static_cast<i64>(g) * Dh;
  const float* vg = a.v + base;
  const float* kg = a.k + base;
  stage_v_prologue(a, f, vg, d0, n, tid, kV3Threads);
  const float* qg = a.q + static_cast<i64>(r) * a.ldq + static_cast<i64>(g) * rep * Dh;
  for (int e = tid; e < rep * Dh; e += kV3Threads) qs[e] = qg[e];
  for (int j0 = 0; j0 < n; j0 += C) {
    const int nc = n - j0 < C ? n - j0 : C;
#if defined(LS_HOST_EMULATOR)
    if (!a.plant.no_chunk_barrier)
#endif
      if (j0 > 0) __syncthreads();  // the previous chunk's chains have read ks
    detail::stage_keys_padded<kV3Threads>(kg + j0 * a.kvd, a.kvd, nc, Dh, a.vec, ks, tid);
    __syncthreads();  // (the first: qs too)
    // A thread: one key, up to 4 query heads; a warp: 32 consecutive keys (q broadcast, K rows Dh + 1 apart).
    for (int e = tid; e < groups * C; e += kV3Threads) {
      const int hg = e / C, j = e - hg * C, h0 = hg * kV3Heads;
      const int nh = rep - h0 < kV3Heads ? rep - h0 : kV3Heads;
      if (j < nc) {
        const float* qh = qs + h0 * Dh;
        const float* kj = ks + j * (Dh + 1);
        float sc[kV3Heads];
        if (q4)
          v3_scores<true>(qh, Dh, kj, nh, a.scale, sc);
        else
          v3_scores<false>(qh, Dh, kj, nh, a.scale, sc);
#pragma unroll
        for (int i = 0; i < kV3Heads; ++i)  // constant indices: sc stays in registers
          if (i < nh)
            f.p[static_cast<i64>(h0 + i) * a.ctx + j0 + j] =
                a.plant.score_d_descending ? v3_score_d_descending(qh + i * Dh, kj, Dh, a.scale) : sc[i];
      }
    }
  }
  __syncthreads();  // the scores published
  fold_blocks(a, f, vg, d0, g, r, n, tid, kV3Threads);
}

std::size_t scores_smem(const CachedAttentionShape& s) {
  const std::size_t rep = s.q_heads / s.kv_heads;
  return (rep * s.head_dim + kScoreKeys * (s.head_dim + 1)) * sizeof(float);
}
std::size_t fold_smem(const CachedAttentionShape& s) {
  const std::size_t rep = s.q_heads / s.kv_heads, blocks = (s.ctx + s.key_block - 1) / s.key_block;
  return (kRing * s.key_block * kSlice + rep * s.ctx + 2 * rep * blocks) * sizeof(float);
}
std::size_t v3_smem(const CachedAttentionShape& s) {
  const std::size_t rep = s.q_heads / s.kv_heads;
  const std::size_t q0 = v3_q_offset(static_cast<int>(rep), static_cast<int>(s.key_block), static_cast<i64>(s.ctx));
  return (q0 + rep * s.head_dim + static_cast<std::size_t>(kV3Chunk) * (s.head_dim + 1)) * sizeof(float);
}

V2AttnArgs args_of(const CachedAttentionShape& s, const float* q, const float* k_cache, const float* v_cache,
                   const std::int32_t* slot, const std::int32_t* pos, float* o, float* scores,
                   const CachedAttentionV2Options& options) {
  V2AttnArgs a{};
  a.q = q;
  a.k = k_cache;
  a.v = v_cache;
  a.slot = slot;
  a.pos = pos;
  a.o = o;
  a.s = scores;
  a.Hq = static_cast<int>(s.q_heads);
  a.Dh = static_cast<int>(s.head_dim);
  a.rep = static_cast<int>(s.q_heads / s.kv_heads);
  a.KB = static_cast<int>(s.key_block);
  a.ctx = static_cast<i64>(s.ctx);
  a.kvd = static_cast<i64>(s.kv_heads * s.head_dim);
  a.ldq = static_cast<i64>(s.ldq);
  a.scale = s.scale;
  a.vec = s.head_dim % 4 == 0 && (s.kv_heads * s.head_dim) % 4 == 0 &&
          reinterpret_cast<std::uintptr_t>(k_cache) % 16 == 0 && reinterpret_cast<std::uintptr_t>(v_cache) % 16 == 0;
  a.plant = options;
  return a;
}

bool planted(const CachedAttentionV2Options& o) {
  return o.max_from_next_block || o.acc_keys_reversed || o.no_reuse_barrier || o.score_d_descending ||
         o.no_chunk_barrier;
}

}  // namespace

bool cached_attention_v2_fits(const CachedAttentionShape& s) {
  if (s.kv_heads == 0 || s.q_heads % s.kv_heads != 0 || s.key_block == 0) return false;
  const std::size_t rep = s.q_heads / s.kv_heads;
  return rep <= static_cast<std::size_t>(kMaxRep) && scores_smem(s) <= kV2MaxSmem && fold_smem(s) <= kV2MaxSmem &&
         s.ctx <= 0x7FFFFFFFu && s.rows <= 65535 && s.kv_heads <= 65535 && s.q_heads * s.head_dim <= 0x7FFFFFFFu;
}

void cached_attention_v2(const CachedAttentionShape& s, const float* q, const float* k_cache, const float* v_cache,
                         const std::int32_t* slot, const std::int32_t* pos, float* o, float* scores,
                         const CachedAttentionV2Options& options) {
  if (s.rows == 0) return;
  const V2AttnArgs a = args_of(s, q, k_cache, v_cache, slot, pos, o, scores, options);
  const int sbytes = static_cast<int>(scores_smem(s)), fbytes = static_cast<int>(fold_smem(s));
  const dim3 sgrid(static_cast<unsigned>((s.ctx + kScoreKeys - 1) / kScoreKeys), static_cast<unsigned>(s.kv_heads),
                   static_cast<unsigned>(s.rows));
  const dim3 fgrid(static_cast<unsigned>((s.head_dim + kSlice - 1) / kSlice), static_cast<unsigned>(s.kv_heads),
                   static_cast<unsigned>(s.rows));
  const dim3 fthreads(static_cast<unsigned>(a.rep * 32));
#if !defined(LS_HOST_EMULATOR)
  // The shared memory attributes, once per kernel and size (not at every launch).
  static int attribute_bytes[2] = {48 * 1024, 48 * 1024};
  if (sbytes > attribute_bytes[0]) {
    if (LS_SET_SMEM(attention_scores_kernel, sbytes) != cudaSuccess)
      check_launch("cached attention v2 (scores): shared memory");
    attribute_bytes[0] = sbytes;
  }
  if (fbytes > attribute_bytes[1]) {
    if (LS_SET_SMEM(attention_fold_kernel, fbytes) != cudaSuccess)
      check_launch("cached attention v2 (fold): shared memory");
    attribute_bytes[1] = fbytes;
  }
#endif
  const bool mutant = planted(options);
  const bool pdl = options.pdl;
  // Traced so that the launch trace and the step profile see both.
  trace::launched(mutant ? "cached_attention v2 (decode, scores, mutant)" : "cached_attention v2 (decode, scores)");
  LS_LAUNCH_PDL(attention_scores_kernel, sgrid, dim3(kScoreThreads), sbytes, a);  // PDL unless LOCKSTEP_DECODE_PDL=0
  check_launch("cached attention v2 (scores)");
  trace::launched(mutant ? (pdl ? "cached_attention v2 (decode, fold, PDL, mutant)" : "cached_attention v2 (decode, fold, mutant)")
                         : (pdl ? "cached_attention v2 (decode, fold, PDL)" : "cached_attention v2 (decode, fold)"));
#if defined(LS_HOST_EMULATOR)
  LS_LAUNCH(attention_fold_kernel, fgrid, fthreads, fbytes, a);
#else
  if (!pdl) {
    LS_LAUNCH_PDL(attention_fold_kernel, fgrid, fthreads, fbytes, a);  // programmatic unless LOCKSTEP_DECODE_PDL=0
  } else if (detail::launch_programmatic(attention_fold_kernel, fgrid, fthreads, static_cast<std::size_t>(fbytes), a) !=
             cudaSuccess) {
    check_launch("cached attention v2 (fold, PDL)");
  }
#endif
  check_launch("cached attention v2 (fold)");
}

bool cached_attention_v3_fits(const CachedAttentionShape& s) {
  return cached_attention_v2_fits(s) && v3_smem(s) <= kV2MaxSmem;
}

void cached_attention_v3(const CachedAttentionShape& s, const float* q, const float* k_cache, const float* v_cache,
                         const std::int32_t* slot, const std::int32_t* pos, float* o,
                         const CachedAttentionV2Options& options) {
  if (s.rows == 0) return;
  const V2AttnArgs a = args_of(s, q, k_cache, v_cache, slot, pos, o, nullptr, options);
  const int bytes = static_cast<int>(v3_smem(s));
  const dim3 grid(static_cast<unsigned>((s.head_dim + kSlice - 1) / kSlice), static_cast<unsigned>(s.kv_heads),
                  static_cast<unsigned>(s.rows));
#if !defined(LS_HOST_EMULATOR)
  static int attribute_bytes = 48 * 1024;  // the shared memory attribute, once per size
  if (bytes > attribute_bytes) {
    if (LS_SET_SMEM(attention_v3_kernel, bytes) != cudaSuccess) check_launch("cached attention v3: shared memory");
    attribute_bytes = bytes;
  }
#endif
  trace::launched(planted(options) ? "cached_attention v3 (decode, one launch, mutant)"
                                   : "cached_attention v3 (decode, one launch)");
  LS_LAUNCH_PDL(attention_v3_kernel, grid, dim3(kV3Threads), bytes, a);  // PDL unless LOCKSTEP_DECODE_PDL=0
  check_launch("cached attention v3");
}

}  // namespace lockstep::cuda::launch
