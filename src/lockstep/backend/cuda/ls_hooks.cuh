// The LS_* hooks of kernels written to run on the host fiber emulator too
// (tests/cuda/cuda_host_emu.hpp defines them for the host before including a
// kernel file): the dynamic shared memory, the launch and its shared-memory
// attribute. On the device they are the plain CUDA spellings.
#pragma once

#ifndef LS_SMEM
#define LS_SMEM(name) extern __shared__ __align__(16) float name[]
#define LS_LAUNCH(kernel, grid, block, smem, ...) kernel<<<grid, block, smem>>>(__VA_ARGS__)
#define LS_SET_SMEM(kernel, bytes) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)
#endif

// LS_LAUNCH_PDL: a decode kernel's launch (pdl_launch.cuh's launch_decode:
// programmatic unless LOCKSTEP_DECODE_PDL=0; a file that uses it includes
// pdl_launch.cuh under `#if !defined(LS_HOST_EMULATOR)`); on the emulator a
// plain LS_LAUNCH.
#ifndef LS_LAUNCH_PDL
#if defined(LS_HOST_EMULATOR)
#define LS_LAUNCH_PDL(kernel, grid, block, smem, ...) LS_LAUNCH(kernel, grid, block, smem, __VA_ARGS__)
#else
#define LS_LAUNCH_PDL(kernel, grid, block, smem, ...) \
  ::lockstep::cuda::detail::launch_decode(kernel, grid, block, smem, __VA_ARGS__)
#endif
#endif
