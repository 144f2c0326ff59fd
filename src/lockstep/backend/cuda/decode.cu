// The KV-cache attention of decoding on the device: ops::CachedAttention's
// float expression (ops::Attention::attend per query over the cached keys),
// bit for bit with the CPU's (backend/cpu/decode.cpp).
//
// One CTA per (query row, head). Every chain has one owner, in the spec's
// order:
//   * s_j = dot_seq(q, k_j) · scale: one thread per key of the 64-key block
//     (its fma chain over d ascending, canonical NaN, as the training kernels);
//   * the block max (ops::max2's fold in key order), the running m, alpha
//     and l = l · alpha, then l = l + p in key order: thread 0;
//   * p_j = exp(s_j - m): the thread of key j;
//   * acc_d = acc_d · alpha (blocks after the first), then fma(p_j, v_jd,
//     acc_d) over the block's keys ascending: one thread per d;
//   * o_d = acc_d / l.
// Which rows share the launch, how many, and their lengths change no chain.
// Each block's K and V rows are staged in shared memory first (all threads,
// 16-byte loads in flight together), so the chains wait on shared memory.
//
// This is v1 (LOCKSTEP_DECODE_ATTENTION=v1); cached_attention launches v2
// (decode_attention_v2.cu: the same chains spread over many CTAs, K and V
// read once a kv head) or v3 (the same file: one launch) when chosen
// (decode_launch.hpp: decode_attention_version, auto_decode_attention) and
// the shape fits them.
#include "lockstep/backend/cuda/decode_launch.hpp"
#include "lockstep/backend/cuda/batched_copy.cuh"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/pdl.hpp"
#include "lockstep/backend/cuda/pdl_device.cuh"
#include "lockstep/backend/cuda/pdl_launch.cuh"
#include "lockstep/backend/cuda/stage_keys.cuh"
#include "lockstep/backend/cuda/trace_launch.hpp"

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "lockstep/num/elementary.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/reduce.hpp"

namespace lockstep::cuda::launch {
namespace {

using num::fma_rn;
using i64 = long long;

constexpr int kThreads = 128;
constexpr std::size_t kStagedMaxSmem = 160 * 1024;  // the staged blocks' K and V: head_dim <= 312 at 64-key blocks

struct Args {
  const float *q, *k, *v;
  const std::int32_t *slot, *pos;
  float* o;
  int Hq, Dh, rep, KB;
  i64 ctx, kvd, ldq;
  float scale;
  bool vec;  // the cache rows' heads and the staged V block are 16-byte aligned (the staging's 16-byte copies)
};

__device__ __forceinline__ float max2(float a, float b) { return a > b ? a : b; }

// num::reduce::dot_seq(q, 1, k, 1, Dh): acc = +0, acc = fma(q_d, k_d, acc) for d
// ascending, the canonical NaN (q and k in shared memory or global).
__device__ __forceinline__ float score_chain(const float* qs, const float* k, int Dh) {
  float acc = 0.0f;
#pragma unroll 8
  for (int d = 0; d < Dh; ++d) acc = fma_rn(qs[d], k[d], acc);
  return num::reduce::canonical_nan(acc);
}

// Staged: each 64-key block's K and V rows are first copied into shared memory
// by all threads (16-byte loads where a.vec, all of a thread's in flight
// together), so that the score chains (a thread a key) and the p·v chains (a
// thread a dimension) wait on shared memory, not on a global load each step.
// K rows are Dh + 1 floats apart (the score threads read a column: no bank
// conflicts). The chains and their order are the same either way.
template <bool Staged>
__global__ void __launch_bounds__(kThreads) cached_attention_kernel(Args a) {
  pdl::pdl_trigger();  // PDL (pdl_device.cuh): the next kernel may launch now;
  pdl::pdl_wait();     // nothing here is a weight: every read and write after the wait
  extern __shared__ __align__(16) float sm[];
  float* qs = sm;           // [Dh] the query
  float* acc = qs + a.Dh;   // [Dh] the accumulators
  float* s = acc + a.Dh;    // [KB] the block's scores, then its p
  float* ks = s + a.KB;                                // Staged: [KB][Dh + 1] the block's keys
  float* vs = ks + static_cast<i64>(a.KB) * (a.Dh + 1);  // Staged: [KB][Dh] its values
  __shared__ float m_sh, alpha_sh, l_sh;
  const int h = static_cast<int>(blockIdx.x), r = static_cast<int>(blockIdx.y), tid = static_cast<int>(threadIdx.x);
  const i64 base = static_cast<i64>(a.slot[r]) * a.ctx * a.kvd + static_cast<i64>(h / a.rep) * a.Dh;
  const float* kc = a.k + base;
  const float* vc = a.v + base;
  const int n = a.pos[r] + 1;
  for (int d = tid; d < a.Dh; d += kThreads) {
    qs[d] = a.q[static_cast<i64>(r) * a.ldq + static_cast<i64>(h) * a.Dh + d];
    acc[d] = 0.0f;
  }
  if constexpr (!Staged) __syncthreads();
  float m = 0.0f, l = 0.0f;  // thread 0's
  for (int j0 = 0; j0 < n; j0 += a.KB) {
    const int nb = j0 + a.KB < n ? a.KB : n - j0;
    if constexpr (Staged) {
      // The previous block's readers of ks/vs passed the barrier at its end.
      const float* kb = kc + j0 * a.kvd;
      const float* vb = vc + j0 * a.kvd;
      const int Dh = a.Dh;
      const i64 kvd = a.kvd;
      detail::stage_keys_padded<kThreads>(kb, kvd, nb, Dh, a.vec, ks, tid);
      if (a.vec) {
        const int d4 = Dh / 4;
        detail::batched_copy<8, float4>(
            static_cast<std::size_t>(nb * d4), tid, kThreads,
            [=](std::size_t e) {
              const int j = static_cast<int>(e) / d4, c = static_cast<int>(e) - j * d4;
              return reinterpret_cast<const float4*>(vb + j * kvd)[c];
            },
            [=](std::size_t e, float4 vv) { reinterpret_cast<float4*>(vs)[e] = vv; });
      } else {
        detail::batched_copy<8, float>(
            static_cast<std::size_t>(nb * Dh), tid, kThreads,
            [=](std::size_t e) {
              const int j = static_cast<int>(e) / Dh, d = static_cast<int>(e) - j * Dh;
              return vb[j * kvd + d];
            },
            [=](std::size_t e, float v) { vs[e] = v; });
      }
      __syncthreads();  // also publishes qs and acc before the first block
    }
    for (int j = tid; j < nb; j += kThreads) {
      const float* kj = Staged ? ks + j * (a.Dh + 1) : kc + (j0 + j) * a.kvd;
      s[j] = __fmul_rn(score_chain(qs, kj, a.Dh), a.scale);
    }
    __syncthreads();
    if (tid == 0) {
      float mb = s[0];
      for (int j = 1; j < nb; ++j) mb = max2(mb, s[j]);
      float alpha = 1.0f;
      if (j0 == 0) {
        m = mb;
      } else {
        const float mn = max2(m, mb);
        alpha = num::exp(__fsub_rn(m, mn));
        l = __fmul_rn(l, alpha);
        m = mn;
      }
      m_sh = m;
      alpha_sh = alpha;
    }
    __syncthreads();
    for (int j = tid; j < nb; j += kThreads) s[j] = num::exp(__fsub_rn(s[j], m_sh));
    __syncthreads();
    if (tid == 0)
      for (int j = 0; j < nb; ++j) l = __fadd_rn(l, s[j]);
    for (int d = tid; d < a.Dh; d += kThreads) {
      float x = acc[d];
      if (j0 > 0) x = __fmul_rn(x, alpha_sh);
      if constexpr (Staged) {
#pragma unroll 16
        for (int j = 0; j < nb; ++j) x = fma_rn(s[j], vs[j * a.Dh + d], x);
      } else {
        // Unrolled: the loads of v are in flight together (the chain waits only on its fmas).
#pragma unroll 16
        for (int j = 0; j < nb; ++j) x = fma_rn(s[j], vc[(j0 + j) * a.kvd + d], x);
      }
      acc[d] = x;
    }
    __syncthreads();
  }
  if (tid == 0) l_sh = l;
  __syncthreads();
  for (int d = tid; d < a.Dh; d += kThreads)
    a.o[(static_cast<i64>(r) * a.Hq + h) * a.Dh + d] = __fdiv_rn(acc[d], l_sh);
}

// RoPE of a pass's rows at their own positions (pos: a device array, one per
// row): ops::Rope::rotate's expression, as rope.cu's kernel computes it, with
// the table of positions 0..tab_seq-1 (ops::Rope::table at offset 0: entry t
// is the angle of position t, the same float as entry t - p of the table at
// offset p, since the position is an exact integer before its conversion).
__global__ void rope_rows_kernel(i64 rows, i64 heads, i64 head_dim, bool interleaved, i64 tab_seq,
                                 const float* __restrict__ tab, const std::int32_t* __restrict__ pos, const float* x,
                                 float* y) {
  pdl::pdl_trigger();  // PDL (pdl_device.cuh): the next kernel may launch now;
  pdl::pdl_wait();     // the table's rows hang on pos: every read and write after the wait
  const i64 half = head_dim / 2;
  const i64 total = rows * heads * half;
  const float* cos_tab = tab;
  const float* sin_tab = tab + tab_seq * half;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 j = i % half;
    const i64 vec = i / half;  // (row, head)
    const i64 t = pos[vec / heads];
    const i64 base = vec * head_dim;
    const i64 ia = base + (interleaved ? 2 * j : j);
    const i64 ib = base + (interleaved ? 2 * j + 1 : j + half);
    const float c = cos_tab[t * half + j];
    const float sn = sin_tab[t * half + j];
    const float a = x[ia], b = x[ib];
    y[ia] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, sn));
    y[ib] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, sn));
  }
}

// Row r of src (ld apart) to the cache row (slot[r], pos[r]) of width floats.
__global__ void store_rows_at_kernel(const float* __restrict__ src, i64 ld, i64 rows, i64 width,
                                     const std::int32_t* __restrict__ slot, const std::int32_t* __restrict__ pos,
                                     i64 ctx, float* __restrict__ dst) {
  pdl::pdl_trigger();  // PDL (pdl_device.cuh): the next kernel may launch now;
  pdl::pdl_wait();     // every read and write after the wait
  const i64 total = rows * width;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 r = i / width, c = i - r * width;
    dst[(static_cast<i64>(slot[r]) * ctx + pos[r]) * width + c] = src[r * ld + c];
  }
}

unsigned grid_for(i64 total) {
  const i64 blocks = (total + 255) / 256;
  return static_cast<unsigned>(blocks < 132 * 16 ? blocks : 132 * 16);
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

}  // namespace

namespace {
std::atomic<int> g_attention_version{0};  // 0: the environment's
std::atomic<DecodeAttentionMutant> g_attention_mutant{DecodeAttentionMutant::none};
}  // namespace

int decode_attention_version() {
  const int set = g_attention_version.load();
  if (set != 0) return set;
  static const int from_env = [] {
    const char* env = std::getenv("LOCKSTEP_DECODE_ATTENTION");
    const std::string v = env == nullptr ? "" : env;
    if (v.empty()) return kDefaultDecodeAttention;
    if (v == "v1") return 1;
    if (v == "v2") return 2;
    if (v == "v2pdl") return 3;
    if (v == "auto") return kAutoDecodeAttention;
    if (v == "v3") return kDecodeAttentionV3;
    throw std::invalid_argument("LOCKSTEP_DECODE_ATTENTION=" + v + ": expected v1, v2, v2pdl, auto or v3");
  }();
  return from_env;
}

void set_decode_attention_version(int version) {
  if (version < 0 || version > kDecodeAttentionV3)
    throw std::invalid_argument("set_decode_attention_version(" + std::to_string(version) + "): expected 0 to 5");
  g_attention_version.store(version);
}

void set_decode_attention_mutant(DecodeAttentionMutant m) { g_attention_mutant.store(m); }

void cached_attention(const CachedAttentionShape& s, const float* q, const float* k_cache, const float* v_cache,
                      const std::int32_t* slot, const std::int32_t* pos, float* o) {
  if (s.rows == 0) return;
  if (s.kv_heads == 0 || s.q_heads % s.kv_heads != 0 || s.key_block == 0)
    throw std::invalid_argument("cached attention: kv_heads must divide q_heads, key_block > 0");
  int version = decode_attention_version();
  if (version == kAutoDecodeAttention) {
    static const std::size_t sms = [] {
      int device = 0, n = 0;
      check(cudaGetDevice(&device), "cudaGetDevice");
      check(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
      return static_cast<std::size_t>(n);
    }();
    version = auto_decode_attention(s.rows, s.q_heads, sms);
  }
  const DecodeAttentionMutant planted = g_attention_mutant.load();
  if (version == kDecodeAttentionV3 && cached_attention_v3_fits(s)) {
    CachedAttentionShape v3 = s;
    if (mutant() == Mutant::attention_drop_scale) v3.scale = 1.0f;  // the attention mutant here too
    CachedAttentionV2Options options;
    options.max_from_next_block = planted == DecodeAttentionMutant::max_from_next_block;
    options.acc_keys_reversed = planted == DecodeAttentionMutant::acc_keys_reversed;
    options.score_d_descending = planted == DecodeAttentionMutant::score_d_descending;
    cached_attention_v3(v3, q, k_cache, v_cache, slot, pos, o, options);
    return;
  }
  if (version >= 2 && cached_attention_v2_fits(s)) {
    // The scores' scratch: this thread's (its stream's), grown to the largest
    // pass seen, never shrunk, so that a pass captured in a graph after its
    // warm-up pass allocates nothing.
    static thread_local DeviceBuffer<float> scores;
    const std::size_t need = s.rows * s.q_heads * s.ctx;
    if (scores.size() < need) scores.resize(need);
    CachedAttentionShape v2 = s;
    if (mutant() == Mutant::attention_drop_scale) v2.scale = 1.0f;  // the attention mutant here too
    CachedAttentionV2Options options;
    options.pdl = version == 3;
    options.wait_first = decode_pdl();  // PDL on (LOCKSTEP_DECODE_PDL not 0): both launches programmatic (launch_decode)
    options.max_from_next_block = planted == DecodeAttentionMutant::max_from_next_block;
    options.acc_keys_reversed = planted == DecodeAttentionMutant::acc_keys_reversed;
    cached_attention_v2(v2, q, k_cache, v_cache, slot, pos, o, scores.data(), options);
    return;
  }
  Args a{q,
         k_cache,
         v_cache,
         slot,
         pos,
         o,
         static_cast<int>(s.q_heads),
         static_cast<int>(s.head_dim),
         static_cast<int>(s.q_heads / s.kv_heads),
         static_cast<int>(s.key_block),
         static_cast<i64>(s.ctx),
         static_cast<i64>(s.kv_heads * s.head_dim),
         static_cast<i64>(s.ldq),
         mutant() == Mutant::attention_drop_scale ? 1.0f : s.scale,  // the attention mutant here too
         s.head_dim % 4 == 0 && (s.kv_heads * s.head_dim) % 4 == 0 && s.key_block % 2 == 0 &&
             reinterpret_cast<std::uintptr_t>(k_cache) % 16 == 0 && reinterpret_cast<std::uintptr_t>(v_cache) % 16 == 0};
  const std::size_t base_smem = (2 * s.head_dim + s.key_block) * sizeof(float);
  const std::size_t staged_smem = base_smem + s.key_block * (2 * s.head_dim + 1) * sizeof(float);
  const bool staged = staged_smem <= kStagedMaxSmem;
  const std::size_t smem = staged ? staged_smem : base_smem;
  // The shared memory attribute, once per kernel and size (not at every launch).
  static std::size_t attribute_bytes[2] = {48 * 1024, 48 * 1024};
  if (smem > attribute_bytes[staged ? 1 : 0]) {
    check(cudaFuncSetAttribute(staged ? cached_attention_kernel<true> : cached_attention_kernel<false>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
          "cached attention: shared memory");
    attribute_bytes[staged ? 1 : 0] = smem;
  }
  // Traced so that the launch trace and the step profile see it (the profile's
  // intervals run from one traced launch to the next).
  trace::launched(staged ? "cached_attention (decode, staged blocks)" : "cached_attention (decode)");
  const dim3 grid(static_cast<unsigned>(s.q_heads), static_cast<unsigned>(s.rows));
  if (staged)  // PDL unless LOCKSTEP_DECODE_PDL=0
    cuda::detail::launch_decode(cached_attention_kernel<true>, grid, dim3(kThreads), smem, a);
  else
    cuda::detail::launch_decode(cached_attention_kernel<false>, grid, dim3(kThreads), smem, a);
  check(cudaGetLastError(), "cached attention launch");
}

void rope_rows(std::size_t rows, std::size_t heads, std::size_t head_dim, bool interleaved, std::size_t tab_seq,
               const float* tab, const std::int32_t* pos, const float* x, float* y) {
  const auto total = static_cast<i64>(rows * heads * (head_dim / 2));
  if (total == 0) return;
  trace::launched("rope_rows (decode, positions on the device)");
  cuda::detail::launch_decode(rope_rows_kernel, dim3(grid_for(total)), dim3(256), 0, static_cast<i64>(rows),
                              static_cast<i64>(heads), static_cast<i64>(head_dim), interleaved,
                              static_cast<i64>(tab_seq), tab, pos, x, y);  // PDL unless LOCKSTEP_DECODE_PDL=0
  check(cudaGetLastError(), "rope_rows launch");
}

void store_rows_at(const float* src, std::size_t ld, std::size_t rows, std::size_t width, const std::int32_t* slot,
                   const std::int32_t* pos, std::size_t ctx, float* dst) {
  const auto total = static_cast<i64>(rows * width);
  if (total == 0) return;
  trace::launched("store_rows_at (decode cache write)");
  cuda::detail::launch_decode(store_rows_at_kernel, dim3(grid_for(total)), dim3(256), 0, src,
                              static_cast<i64>(ld), static_cast<i64>(rows), static_cast<i64>(width), slot, pos,
                              static_cast<i64>(ctx), dst);  // PDL unless LOCKSTEP_DECODE_PDL=0
  check(cudaGetLastError(), "store_rows_at launch");
}

void store_rows(const float* src, std::size_t ld, std::size_t rows, std::size_t width, float* dst) {
  if (rows == 0) return;
  check(cudaMemcpy2DAsync(dst, width * sizeof(float), src, ld * sizeof(float), width * sizeof(float), rows,
                          cudaMemcpyDeviceToDevice, 0),
        "decode: storing k/v rows in the cache");
}

}  // namespace lockstep::cuda::launch
