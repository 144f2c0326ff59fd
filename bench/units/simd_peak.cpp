// The floor for the int8 GEMM benchmark: peak throughput of one core's
// AVX-512 VNNI (vpdpbusd zmm: 64 int8 multiply-adds) and FMA (vfmadd zmm: 16
// fp32 multiply-adds), from register-only loops of 12 independent
// accumulators, timed in thread CPU time (steady on a shared machine).
//   build/<dir>/bench/units/simd_peak
#include <immintrin.h>

#include <cstdio>
#include <cstring>
#include <ctime>

#include "lockstep/backend/cpu/int8_gemm.hpp"

namespace {

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

constexpr int kChains = 12;
#define LOCKSTEP_PEAK_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))

struct Vnni {  // vpdpbusd zmm: 64 int8 multiply-adds
  using V = __m512i;
  static constexpr double kOps = 64 * 2;
  LOCKSTEP_PEAK_TARGET static V init(int i) { return _mm512_set1_epi32(i); }
  LOCKSTEP_PEAK_TARGET static V a() { return _mm512_set1_epi32(0x01010101); }
  LOCKSTEP_PEAK_TARGET static V b() { return _mm512_set1_epi32(0x02020202); }
  LOCKSTEP_PEAK_TARGET static V step(V acc, V x, V y) { return _mm512_dpbusd_epi32(acc, x, y); }
  LOCKSTEP_PEAK_TARGET static V add(V x, V y) { return _mm512_add_epi32(x, y); }
};
struct Fma {  // vfmadd zmm: 16 fp32 multiply-adds
  using V = __m512;
  static constexpr double kOps = 16 * 2;
  LOCKSTEP_PEAK_TARGET static V init(int i) { return _mm512_set1_ps(static_cast<float>(i)); }
  LOCKSTEP_PEAK_TARGET static V a() { return _mm512_set1_ps(1.0001f); }
  LOCKSTEP_PEAK_TARGET static V b() { return _mm512_set1_ps(0.9999f); }
  LOCKSTEP_PEAK_TARGET static V step(V acc, V x, V y) { return _mm512_fmadd_ps(acc, x, y); }
  LOCKSTEP_PEAK_TARGET static V add(V x, V y) { return _mm512_add_ps(x, y); }
};

// Giga-operations per second of thread CPU time.
template <class U>
LOCKSTEP_PEAK_TARGET double peak(long iters) {
  typename U::V acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = U::init(i);
  typename U::V a = U::a();
  const typename U::V b = U::b();
  const double t0 = thread_cpu_seconds();
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = U::step(acc[i], a, b);
    __asm__ volatile("" : "+v"(a));  // a new operand each round: the loop is not hoisted
  }
  const double s = thread_cpu_seconds() - t0;
  alignas(64) unsigned char out[64];
  typename U::V t = acc[0];
  for (int i = 1; i < kChains; ++i) t = U::add(t, acc[i]);
  std::memcpy(out, &t, 64);
  volatile unsigned char sink = out[0];
  (void)sink;
  return static_cast<double>(kChains) * static_cast<double>(iters) * U::kOps / s / 1e9;
}

}  // namespace

int main() {
  if (!lockstep::cpu::int8::probe_machine().vnni) {
    std::printf("this CPU has no AVX-512 VNNI\n");
    return 1;
  }
  for (int r = 0; r < 3; ++r)
    std::printf("one core: vpdpbusd %.0f GOPS, vfmadd %.1f GFLOP/s\n", peak<Vnni>(100000000), peak<Fma>(100000000));
  return 0;
}
