// cp.async, 4 bytes a copy (sm_80+): global to shared memory without a
// register, so a block keeps several tiles in flight while it computes on an
// earlier one. The column-sum chain (gemm.cu) and the column quantizer's
// folded sums (col_quant.cu) stage their rows this way; attention.cu's
// dq_stored kernel its (K, dS) tiles with the 16-byte, zero-filling form. A
// host emulator (tests/cuda/cuda_host_emu.hpp, LS_HOST_EMULATOR) copies at
// issue instead.
#pragma once

namespace lockstep::cuda::detail {

#if defined(LS_HOST_EMULATOR)
inline void cp_async4(float* dst, const float* src) { *dst = *src; }
inline void cp_async16_zfill(float* dst, const float* src, bool in) {
  for (int e = 0; e < 4; ++e) dst[e] = in ? src[e] : 0.0f;
}
inline void cp_async_commit() {}
template <int Pending>
inline void cp_async_wait() {}
#else

__device__ __forceinline__ void cp_async4(float* dst, const float* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most Pending committed groups are still in flight.
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}
// 16 bytes global -> shared, L2 only (.cg); in == false writes 16 zero bytes
// and reads nothing (src-size 0). dst and src 16-byte aligned.
__device__ __forceinline__ void cp_async16_zfill(float* dst, const float* src, bool in) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int bytes = in ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes) : "memory");
}
#endif

}  // namespace lockstep::cuda::detail
