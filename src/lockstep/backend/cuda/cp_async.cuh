// cp.async, 4 bytes a copy (sm_80+): global to shared memory without a
// register, so a block keeps several tiles in flight while it computes on an
// earlier one. The column-sum chain (gemm.cu) and the column quantizer's
// folded sums (col_quant.cu) stage their rows this way. The int8 GEMM's
// 16-byte, zero-filling form is in int8_gemm_kernels.cuh.
#pragma once

namespace lockstep::cuda::detail {

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

}  // namespace lockstep::cuda::detail
