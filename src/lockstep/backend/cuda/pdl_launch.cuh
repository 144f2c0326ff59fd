// A programmatic dependent launch (sm_90) on the backend's stream: the kernel
// may start before the kernel before it in the stream has completed; it must
// itself wait (griddepcontrol.wait: pdl_device.cuh's pdl_wait) before it reads
// what that kernel writes and before it writes anything. In a captured graph
// it is kept as a programmatic edge; after a node that is not a kernel (a
// copy, a memset) or at a graph's start there is no kernel to overlap and the
// launch is ordered as a plain one. (ternary_gemv_v2.cu's v2pdl,
// decode_attention_v2.cu's fold and, unless LOCKSTEP_DECODE_PDL=0, every decode
// kernel through launch_decode.) Device builds only: include it under
// `#if !defined(LS_HOST_EMULATOR)` (ls_hooks.cuh does).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "lockstep/backend/cuda/pdl.hpp"

namespace lockstep::cuda::detail {

template <class... Params, class... Args>
cudaError_t launch_programmatic(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem,
                                Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = cudaStreamPerThread;  // the backend's stream (--default-stream=per-thread)
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  note_programmatic_launch();
  return cudaLaunchKernelEx(&config, kernel, static_cast<Args&&>(args)...);
}

// A decode kernel's launch: programmatic unless LOCKSTEP_DECODE_PDL=0, a plain
// <<<>>> otherwise and right after decode_pdl_fence (a weight was just
// packed). The kernel must call pdl_trigger / pdl_wait by pdl_device.cuh's
// rule. Errors are left for the caller's check_launch (cudaGetLastError
// reports a failed cudaLaunchKernelEx as it does a <<<>>>).
template <class... Params, class... Args>
void launch_decode(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem, Args&&... args) {
  if (decode_pdl() && !take_decode_pdl_fence()) {
    (void)launch_programmatic(kernel, grid, block, smem, static_cast<Args&&>(args)...);
  } else {
    kernel<<<grid, block, smem>>>(static_cast<Args&&>(args)...);
  }
}

}  // namespace lockstep::cuda::detail
