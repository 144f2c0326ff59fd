// Causal attention through int8 units on the device: ops::UnitAttention's
// float expression, bit for bit (ops/unit_attention.hpp).
//
//   head_quantize_i8: one warp per (token, head) segment: absmax under
//     reduce::max's rules (quant.cu's row_codes: the largest order key, NaN
//     apart; every |x| >= +0, so the maximum has one value whatever the
//     order), inv = 127 / m, codes clamp(floor(x·inv + 0.5), ±127), step m/127.
//   unit_attention_fwd_kernel: one warp per (b, h, query i), 4 warps a block.
//     Per key block: each lane scores its keys (an exact int32 dot of codes,
//     then ((f32 · sq) · sk) · scale), the block max is a warp max (exact),
//     the rescale and l follow the spec's scalar order (every lane holds the
//     same m and l; l sums p in key order from shared memory), u_j = p_j·sv_j,
//     its block max (exact) and codes; then each lane owns columns d and sums
//     Σ_j cu_j·cv_jd in int32 (exact: any order) into acc_d = acc_d + f32·su.
// Every float operation is the spec's, one correctly rounded primitive each
// (-fmad=false; __f*_rn written out), exp and log lockstep's own.
#include "lockstep/backend/cuda/unit_attention_launch.hpp"

#include <cstdint>
#include <stdexcept>

#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/num/elementary.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/reduce.hpp"

namespace lockstep::cuda::launch {
namespace {

namespace red = num::reduce;
using i64 = long long;

constexpr int kMaxDh = 256, kMaxKB = 1024, kWarps = 4;
constexpr float kWeightFloor = 0x1p-100f;  // ops::UnitAttention::kWeightFloor

__device__ __forceinline__ float max2(float a, float b) { return a > b ? a : b; }  // ops::max2
__device__ __forceinline__ float min2(float a, float b) { return a < b ? a : b; }  // ops::min2
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) v = max2(v, __shfl_xor_sync(0xFFFFFFFFu, v, off));
  return v;
}

__global__ void __launch_bounds__(256) head_codes_kernel(const float* __restrict__ x, std::size_t rows,
                                                         std::size_t ld, std::size_t heads, std::size_t Dh,
                                                         float floor_x, std::int8_t* __restrict__ codes,
                                                         float* __restrict__ step, float* __restrict__ dequant) {
  const std::size_t seg = static_cast<std::size_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  const unsigned lane = threadIdx.x & 31;
  if (seg >= rows * heads) return;  // whole warps leave together
  const std::size_t t = seg / heads, h = seg - t * heads;
  const float* xr = x + t * ld + h * Dh;
  std::int32_t key = red::detail::order_key(__int_as_float(static_cast<int>(0xFF800000u)));  // -inf
  std::uint32_t mag = 0;
  for (std::size_t d = lane; d < Dh; d += 32) {
    const float v = fabsf(xr[d]);
    const std::int32_t kv = red::detail::order_key(v);
    key = kv > key ? kv : key;
    const std::uint32_t mv = num::bits_of(v) & 0x7FFFFFFFu;
    mag = mv > mag ? mv : mag;
  }
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) {
    const std::int32_t ko = __shfl_xor_sync(0xFFFFFFFFu, key, off);
    const std::uint32_t mo = __shfl_xor_sync(0xFFFFFFFFu, mag, off);
    key = ko > key ? ko : key;
    mag = mo > mag ? mo : mag;
  }
  const float mx = mag > 0x7F800000u ? num::float_of(red::kCanonicalNaN) : red::detail::from_order_key(key);
  const float m = max2(mx, floor_x);
  const float inv = __fdiv_rn(127.0f, m);
  const float st = __fdiv_rn(m, 127.0f);
  std::int8_t* cr = codes + seg * Dh;
  for (std::size_t d = lane; d < Dh; d += 32) {
    const float q = min2(max2(floorf(__fadd_rn(__fmul_rn(xr[d], inv), 0.5f)), -127.0f), 127.0f);
    cr[d] = static_cast<std::int8_t>(q);
    if (dequant != nullptr) dequant[t * ld + h * Dh + d] = __fmul_rn(q, st);
  }
  if (lane == 0) step[seg] = st;
}

struct Args {
  int B, T, Hq, Hkv, Dh, rep, KB;
  float scale;
  bool round_down;  // the unit_attention_weights_round_down mutant: cu = floor(u·inv), the + 0.5 dropped
  const std::int8_t *cq, *ck, *cv;
  const float *sq, *sk, *sv;
  float *o, *lse;
};

__global__ void __launch_bounds__(kWarps * 32) unit_attention_fwd_kernel(Args a) {
  extern __shared__ float smem[];  // per warp: KB floats (s, then p), KB floats (u), KB ints (cu)
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const i64 row = static_cast<i64>(blockIdx.x) * kWarps + warp;  // (b, h, i), i fastest
  if (row >= static_cast<i64>(a.B) * a.Hq * a.T) return;       // whole warps leave together
  const int i = static_cast<int>(row % a.T), h = static_cast<int>((row / a.T) % a.Hq);
  const int b = static_cast<int>(row / (static_cast<i64>(a.T) * a.Hq)), g = h / a.rep;
  float* s = smem + static_cast<i64>(warp) * 3 * a.KB;
  float* u = s + a.KB;
  int* cu = reinterpret_cast<int*>(u + a.KB);
  const int Dh = a.Dh;
  const i64 qs = (static_cast<i64>(b) * a.T + i) * a.Hq + h;
  const std::int8_t* cq = a.cq + qs * Dh;
  const float sq = a.sq[qs];
  const i64 kbase = static_cast<i64>(b) * a.T * a.Hkv + g;  // segment of key 0; key j at + j·Hkv
  constexpr int kCols = kMaxDh / 32;
  float acc[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) acc[c] = 0.0f;
  float m = 0.0f, l = 0.0f;
  const int n_keys = i + 1;
  for (int j0 = 0; j0 < n_keys; j0 += a.KB) {
    const int j1 = j0 + a.KB < n_keys ? j0 + a.KB : n_keys, nb = j1 - j0;
    float mb = __int_as_float(static_cast<int>(0xFF800000u));  // -inf: every score is finite
    for (int jj = lane; jj < nb; jj += 32) {
      const i64 ks = kbase + static_cast<i64>(j0 + jj) * a.Hkv;
      const std::int8_t* kj = a.ck + ks * Dh;
      int dot = 0;  // exact in int32: any grouping gives the same sum
      if ((Dh & 3) == 0) {  // 4 codes a word (segments start at multiples of Dh bytes: aligned)
        const int* q4 = reinterpret_cast<const int*>(cq);
        const int* k4 = reinterpret_cast<const int*>(kj);
        for (int w = 0; w < Dh / 4; ++w) dot = __dp4a(q4[w], k4[w], dot);
      } else {
        for (int d = 0; d < Dh; ++d) dot += static_cast<int>(cq[d]) * static_cast<int>(kj[d]);
      }
      const float sc = __fmul_rn(__fmul_rn(__fmul_rn(__int2float_rn(dot), sq), a.sk[ks]), a.scale);
      s[jj] = sc;
      mb = max2(mb, sc);
    }
    mb = warp_max(mb);
    if (j0 == 0) {
      m = mb;
    } else {
      const float mn = max2(m, mb);
      const float alpha = num::exp(__fsub_rn(m, mn));
      l = __fmul_rn(l, alpha);
#pragma unroll
      for (int c = 0; c < kCols; ++c) acc[c] = __fmul_rn(acc[c], alpha);
      m = mn;
    }
    float mu = kWeightFloor;
    for (int jj = lane; jj < nb; jj += 32) {
      const float p = num::exp(__fsub_rn(s[jj], m));
      s[jj] = p;
      const float uj = __fmul_rn(p, a.sv[kbase + static_cast<i64>(j0 + jj) * a.Hkv]);
      u[jj] = uj;
      mu = max2(mu, uj);
    }
    mu = warp_max(mu);
    __syncwarp();
    for (int jj = 0; jj < nb; ++jj) l = __fadd_rn(l, s[jj]);  // key order
    const float inv = __fdiv_rn(127.0f, mu), su = __fdiv_rn(mu, 127.0f);
    for (int jj = lane; jj < nb; jj += 32) {
      const float x = __fmul_rn(u[jj], inv);
      cu[jj] = static_cast<int>(min2(floorf(a.round_down ? x : __fadd_rn(x, 0.5f)), 127.0f));
    }
    __syncwarp();
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int d = lane + 32 * c;
      if (d >= Dh) break;
      int iv = 0;
      for (int jj = 0; jj < nb; ++jj)
        iv += cu[jj] * static_cast<int>(a.cv[(kbase + static_cast<i64>(j0 + jj) * a.Hkv) * Dh + d]);
      acc[c] = __fadd_rn(acc[c], __fmul_rn(__int2float_rn(iv), su));
    }
    __syncwarp();  // s, u, cu are rewritten by the next block
  }
  float* orow = a.o + qs * Dh;
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    const int d = lane + 32 * c;
    if (d < Dh) orow[d] = __fdiv_rn(acc[c], l);
  }
  if (lane == 0) a.lse[(static_cast<i64>(b) * a.Hq + h) * a.T + i] = __fadd_rn(m, num::log(l));
}

}  // namespace

void head_quantize_i8(const float* x, std::size_t rows, std::size_t ld, std::size_t heads, std::size_t Dh,
                      float floor_x, std::int8_t* codes, float* step, float* dequant) {
  const std::size_t segs = rows * heads;
  if (segs == 0 || Dh == 0) return;
  trace::launched(dequant != nullptr ? "head_quantize_i8 (codes, dequantized)" : "head_quantize_i8 (codes)");
  head_codes_kernel<<<static_cast<unsigned>((segs + 7) / 8), 256>>>(x, rows, ld, heads, Dh, floor_x, codes, step,
                                                                     dequant);
  check_launch("head_quantize_i8");
}

void unit_attention_fwd(const AttentionShape& s, const std::int8_t* cq, const float* sq, const std::int8_t* ck,
                        const float* sk, const std::int8_t* cv, const float* sv, float* o, float* lse) {
  if (s.kv_heads == 0 || s.q_heads % s.kv_heads != 0)
    throw std::invalid_argument("unit_attention: kv_heads must divide q_heads");
  if (s.head_dim > static_cast<std::size_t>(kMaxDh) || s.key_block == 0 ||
      s.key_block > static_cast<std::size_t>(kMaxKB))
    throw std::invalid_argument("unit_attention (CUDA): head_dim must be <= 256 and key_block in [1, 1024]");
  const i64 rows = static_cast<i64>(s.batch) * static_cast<i64>(s.q_heads) * static_cast<i64>(s.seq);
  if (rows == 0 || s.head_dim == 0) return;
  Args a{};
  a.B = static_cast<int>(s.batch);
  a.T = static_cast<int>(s.seq);
  a.Hq = static_cast<int>(s.q_heads);
  a.Hkv = static_cast<int>(s.kv_heads);
  a.Dh = static_cast<int>(s.head_dim);
  a.rep = a.Hq / a.Hkv;
  a.KB = static_cast<int>(s.key_block);
  a.scale = s.scale;
  a.round_down = mutant() == Mutant::unit_attention_weights_round_down;
  a.cq = cq;
  a.ck = ck;
  a.cv = cv;
  a.sq = sq;
  a.sk = sk;
  a.sv = sv;
  a.o = o;
  a.lse = lse;
  const std::size_t shared = static_cast<std::size_t>(kWarps) * 3 * s.key_block * sizeof(float);
  trace::launched("unit_attention_fwd (one warp per query row)");
  unit_attention_fwd_kernel<<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), kWarps * 32, shared>>>(a);
  check_launch("unit_attention_fwd");
}

}  // namespace lockstep::cuda::launch
