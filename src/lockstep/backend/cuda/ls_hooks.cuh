// The LS_* hooks of a kernel file that the host fiber emulator also runs
// (tests/cuda/cuda_host_emu.hpp defines them first, for the host; here they are
// plain CUDA): all of a kernel's shared memory as one dynamic buffer, its
// launch, and its shared-memory limit.
#pragma once

#ifndef LS_SMEM
#define LS_SMEM(name) extern __shared__ __align__(16) float name[]
#define LS_LAUNCH(kernel, grid, block, smem, ...) kernel<<<grid, block, smem>>>(__VA_ARGS__)
#define LS_SET_SMEM(kernel, bytes) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)
#endif
