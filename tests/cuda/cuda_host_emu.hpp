// A host emulator for CUDA kernel files written with the LS_* hooks
// (backend/cuda/attention.cu): every thread of a CTA is a fiber (ucontext) on
// one host thread; __syncthreads parks a fiber until all of its CTA's live
// fibers are parked; a warp shuffle is two warp-wide sync points (write the
// lane's value, then read the source lane's). Shared memory is one buffer per
// CTA, filled with a NaN before the CTA starts (a read of a cell nobody wrote
// poisons what it feeds). cp.async copies at issue (cp_async.cuh's
// LS_HOST_EMULATOR branch). Fibers run round-robin from sync point to sync
// point in an order that a seed shuffles every round, so a missing barrier
// shows as a wrong answer on some order rather than never.
//
// Include this, then the .cu file. Host float arithmetic is the device's
// (-ffp-contract=off, num::fma_rn = std::fma), so the kernels' bits are the
// device's bits as long as the kernels only use the spellings below.
#pragma once

#include <ucontext.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(4) char4 {
  signed char x, y, z, w;
};
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

inline dim3 threadIdx, blockIdx, blockDim, gridDim;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

namespace emu {

enum class At { run, barrier, warp, done };

struct Fiber {
  ucontext_t ctx{};
  std::vector<char> stack;
  dim3 tid;
  At at = At::run;
  long warp_syncs = 0;
};

struct Cta {
  ucontext_t home{};
  std::vector<Fiber> fibers;
  int cur = -1;
  std::vector<float> smem;
  std::vector<std::uint32_t> lanes;  // [warp][32]: the shuffles' exchange
  std::function<void()> body;
  std::mt19937_64 order_rng{1};
  bool shuffle_order = false;
};
inline Cta cta;

inline void yield(At at) {
  Fiber& f = cta.fibers[static_cast<std::size_t>(cta.cur)];
  f.at = at;
  swapcontext(&f.ctx, &cta.home);
}

inline void entry() {
  cta.body();
  cta.fibers[static_cast<std::size_t>(cta.cur)].at = At::done;
}

inline float* smem() { return cta.smem.data(); }

inline void syncthreads() { yield(At::barrier); }

inline int lane_of() {
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  return static_cast<int>(t);
}

template <class V>
V shfl_from(V v, int src) {
  static_assert(sizeof(V) == 4, "32-bit shuffles only");
  const int t = lane_of(), warp = t / 32, lane = t % 32;
  std::uint32_t b;
  std::memcpy(&b, &v, 4);
  cta.lanes[static_cast<std::size_t>(warp * 32 + lane)] = b;
  Fiber& me = cta.fibers[static_cast<std::size_t>(t)];
  ++me.warp_syncs;
  yield(At::warp);
  // Every lane of the warp wrote this round's value (they run in lockstep).
  for (int l = 0; l < 32; ++l) {
    const std::size_t o = static_cast<std::size_t>(warp * 32 + l);
    if (o < cta.fibers.size() && cta.fibers[o].warp_syncs < me.warp_syncs)
      throw std::logic_error("emu: a shuffle's lanes diverged");
  }
  b = cta.lanes[static_cast<std::size_t>(warp * 32 + (src & 31))];
  yield(At::warp);
  V r;
  std::memcpy(&r, &b, 4);
  return r;
}

// Runs `body` on every thread of one CTA (blockIdx, gridDim, blockDim set).
inline void run_cta(const std::function<void()>& body, unsigned threads, std::size_t smem_floats) {
  cta.body = body;
  cta.smem.assign(smem_floats + 64, std::numeric_limits<float>::quiet_NaN());
  cta.lanes.assign((threads + 31) / 32 * 32, 0u);
  cta.fibers.assign(threads, Fiber{});
  for (unsigned t = 0; t < threads; ++t) {
    Fiber& f = cta.fibers[t];
    f.stack.resize(256 * 1024);
    f.tid = dim3(t % blockDim.x, (t / blockDim.x) % blockDim.y, t / (blockDim.x * blockDim.y));
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack.data();
    f.ctx.uc_stack.ss_size = f.stack.size();
    f.ctx.uc_link = &cta.home;
    makecontext(&f.ctx, entry, 0);
  }
  std::vector<int> order(threads);
  for (unsigned t = 0; t < threads; ++t) order[t] = static_cast<int>(t);
  for (;;) {
    std::size_t live = 0, parked = 0;
    for (const Fiber& f : cta.fibers) {
      if (f.at != At::done) ++live;
      if (f.at == At::barrier) ++parked;
    }
    if (live == 0) break;
    if (parked == live)
      for (Fiber& f : cta.fibers)
        if (f.at == At::barrier) f.at = At::run;
    if (cta.shuffle_order) std::shuffle(order.begin(), order.end(), cta.order_rng);
    for (int t : order) {
      Fiber& f = cta.fibers[static_cast<std::size_t>(t)];
      if (f.at != At::run && f.at != At::warp) continue;
      f.at = At::run;
      cta.cur = t;
      threadIdx = f.tid;
      swapcontext(&cta.home, &f.ctx);
    }
  }
  cta.cur = -1;
}

template <class K, class A>
void launch(K kernel, dim3 grid, dim3 block, int smem_bytes, A a) {
  gridDim = grid;
  blockDim = block;
  const unsigned threads = block.x * block.y * block.z;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = dim3(x, y, z);
        run_cta([&] { kernel(a); }, threads, static_cast<std::size_t>(smem_bytes) / sizeof(float));
      }
}

}  // namespace emu

#define LS_HOST_EMULATOR 1
#define LS_SMEM(name) float* const name = ::emu::smem()
#define LS_LAUNCH(kernel, grid, block, smem, ...) ::emu::launch(kernel, grid, block, smem, __VA_ARGS__)
#define LS_SET_SMEM(kernel, bytes) ((void)(kernel), (void)(bytes))

inline void __syncthreads() { emu::syncthreads(); }
template <class V>
V __shfl_xor_sync(unsigned, V v, int mask) {
  return emu::shfl_from(v, (emu::lane_of() % 32) ^ mask);
}
template <class V>
V __shfl_sync(unsigned, V v, int src) {
  return emu::shfl_from(v, src);
}
// Lanes past the warp's last read their own value, as the device's do.
template <class V>
V __shfl_down_sync(unsigned, V v, unsigned delta) {
  const int lane = emu::lane_of() % 32, src = lane + static_cast<int>(delta);
  const V got = emu::shfl_from(v, src < 32 ? src : lane);
  return got;
}
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __int2float_rn(int v) { return static_cast<float>(v); }  // the host's default rounding: nearest even
