// A programmatic dependent launch (sm_90) on the backend's stream: the kernel
// may start before the kernel before it in the stream has completed; it must
// itself wait (griddepcontrol.wait) before it reads what that kernel writes.
// In a captured graph it is kept as a programmatic edge. (ternary_gemv_v2.cu's
// v2pdl and decode_attention_v2.cu's fold launch through it.)
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace lockstep::cuda::detail {

template <class Args>
cudaError_t launch_programmatic(void (*kernel)(Args), dim3 grid, dim3 block, std::size_t smem, const Args& a) {
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
  return cudaLaunchKernelEx(&config, kernel, a);
}

}  // namespace lockstep::cuda::detail
