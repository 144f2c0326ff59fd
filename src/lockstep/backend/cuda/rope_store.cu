// RoPE of q and k and the K/V cache writes of a decode pass in one launch
// (rope_store_launch.hpp states the contract). A layer of the decode pass ran
// rope_rows for q, rope_rows for k and store_rows_at for k and v (decode.cu):
// four launches of a few KB. Here one grid-stride loop covers the same work
// items: a (row, head, pair) of q — rope_rows's expression, a·c − b·s and
// b·c + a·s (each product and the add/sub rounded: __fmul_rn, __fsub_rn,
// __fadd_rn) with c, s the table's entries of the row's position; a (row,
// head, pair) of k — the same, its two results also written to the k cache
// row (slot, pos), which is what store_rows_at copies from k_y; a v element —
// copied to the v cache row. The same values by construction; nothing is
// summed. CPU reference: ops::Rope::forward at the row's position, then the
// rows in the cache (tests/cuda/rope_store_emu_test.cpp: the host fiber
// emulator; tests/infer/decode_kernels_gpu_test.cpp on the device).
#include <cstddef>
#include <cstdint>

#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/ls_hooks.cuh"
#include "lockstep/backend/cuda/rope_store_launch.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/backend/cuda/pdl_device.cuh"
#if !defined(LS_HOST_EMULATOR)
#include "lockstep/backend/cuda/pdl_launch.cuh"  // LS_LAUNCH_PDL
#endif

namespace lockstep::cuda::launch {
namespace {

using i64 = long long;

struct RopeStoreArgs {
  i64 rows, q_heads, kv_heads, head_dim, tab_seq, ldv, ctx;
  bool interleaved, cache_unrotated;
  const float* tab;
  const std::int32_t* slot;
  const std::int32_t* pos;
  const float* q_x;
  float* q_y;
  const float* k_x;
  float* k_y;
  const float* v;
  float* k_cache;
  float* v_cache;
};

constexpr unsigned kThreads = 256;

// Pair j of head vector `vec` (of `heads` a row) of x rotated into y (and, with
// cache, into the cache row of the vector's row): rope_rows_kernel's body.
__device__ __forceinline__ void rotate_pair(const RopeStoreArgs& a, i64 heads, i64 vec, i64 j, const float* x,
                                            float* y, float* cache) {
  const i64 half = a.head_dim / 2;
  const i64 r = vec / heads;
  const i64 t = a.pos[r];
  const i64 base = vec * a.head_dim;
  const i64 oa = a.interleaved ? 2 * j : j, ob = a.interleaved ? 2 * j + 1 : j + half;
  const float c = a.tab[t * half + j];
  const float sn = a.tab[a.tab_seq * half + t * half + j];
  const float xa = x[base + oa], xb = x[base + ob];
  const float ya = __fsub_rn(__fmul_rn(xa, c), __fmul_rn(xb, sn));
  const float yb = __fadd_rn(__fmul_rn(xb, c), __fmul_rn(xa, sn));
  y[base + oa] = ya;
  y[base + ob] = yb;
  if (cache != nullptr) {
    const i64 width = heads * a.head_dim;
    float* row = cache + (static_cast<i64>(a.slot[r]) * a.ctx + t) * width + (vec - r * heads) * a.head_dim;
    row[oa] = a.cache_unrotated ? xa : ya;
    row[ob] = a.cache_unrotated ? xb : yb;
  }
}

__global__ void __launch_bounds__(kThreads) rope_store_kernel(const RopeStoreArgs a) {
  pdl::pdl_trigger();  // PDL (pdl_device.cuh): the next kernel may launch now;
  pdl::pdl_wait();     // the table's rows hang on pos (not a weight): every read and write after the wait
  const i64 half = a.head_dim / 2;
  const i64 nq = a.rows * a.q_heads * half, nk = a.rows * a.kv_heads * half;
  const i64 width = a.kv_heads * a.head_dim, nv = a.rows * width;
  const i64 total = nq + nk + nv;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    if (i < nq) {
      rotate_pair(a, a.q_heads, i / half, i % half, a.q_x, a.q_y, nullptr);
    } else if (i < nq + nk) {
      const i64 e = i - nq;
      rotate_pair(a, a.kv_heads, e / half, e % half, a.k_x, a.k_y, a.k_cache);
    } else {
      const i64 e = i - nq - nk, r = e / width, c = e - r * width;
      a.v_cache[(static_cast<i64>(a.slot[r]) * a.ctx + a.pos[r]) * width + c] = a.v[r * a.ldv + c];
    }
  }
}

}  // namespace

void rope_store_rows(const RopeStoreShape& s, const float* tab, const std::int32_t* slot, const std::int32_t* pos,
                     const float* q_x, float* q_y, const float* k_x, float* k_y, const float* v, float* k_cache,
                     float* v_cache, const RopeStoreOptions& options) {
  const RopeStoreArgs a{static_cast<i64>(s.rows),     static_cast<i64>(s.q_heads), static_cast<i64>(s.kv_heads),
                        static_cast<i64>(s.head_dim), static_cast<i64>(s.tab_seq), static_cast<i64>(s.ldv),
                        static_cast<i64>(s.ctx),      s.interleaved,               options.cache_unrotated,
                        tab,                          slot,                        pos,
                        q_x,                          q_y,                         k_x,
                        k_y,                          v,                           k_cache,
                        v_cache};
  const i64 total = a.rows * ((a.q_heads + a.kv_heads) * (a.head_dim / 2) + a.kv_heads * a.head_dim);
  if (total == 0) return;
  trace::launched(options.cache_unrotated ? "rope_store_rows (decode RoPE + cache writes, mutant)"
                                          : "rope_store_rows (decode RoPE + cache writes)");
  const i64 blocks = (total + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(blocks < 132 * 16 ? blocks : 132 * 16);
  LS_LAUNCH_PDL(rope_store_kernel, dim3(grid), dim3(kThreads), 0, a);
  check_launch("rope_store_rows");
}

}  // namespace lockstep::cuda::launch
