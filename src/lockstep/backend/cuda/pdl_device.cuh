// The device side of LOCKSTEP_DECODE_PDL (docs/perf/DECODE_CUDA.md §16): the
// two sm_90 grid-dependency instructions every decode kernel executes, in one
// place. The switch is a launch-time choice (pdl_launch.cuh's launch_decode:
// a programmatic dependent launch, or a plain <<<>>>), never a device read:
//
//   pdl_trigger()  griddepcontrol.launch_dependents: the next kernel in the
//                  stream, if it was launched programmatically, may launch its
//                  CTAs now (once every CTA of this grid has triggered or
//                  exited). It says nothing about our memory: the dependent
//                  still waits for our completion, so it may be the kernel's
//                  first instruction.
//   pdl_wait()     griddepcontrol.wait: returns once every prerequisite grid
//                  (the kernel before in the stream) has completed and its
//                  memory is visible. In a kernel launched without the
//                  attribute (or whose predecessor is a copy, a memset, a
//                  graph boundary) it returns at once: the launch itself was
//                  already fully ordered.
//
// The rule every kernel that calls them keeps (the lead checks it per kernel,
// the SASS shows it): before pdl_wait() it reads only memory no kernel of the
// decode pass writes — the model's weights (ternary codes and scales, norm
// weights, the head's f16 rows, RoPE tables) — and writes nothing global (no
// write-after-read hazard against the kernel still running before it). Why
// that is enough: wait returns only after the prerequisite grid completed and
// flushed; that grid completed only after its own wait returned, i.e. after its
// own prerequisite completed; so by induction every earlier kernel of the
// stream is complete and visible at our wait. (So every CTA of a kernel
// launched programmatically waits before it exits, also a CTA with no work:
// a grid none of whose CTAs waited could complete before its predecessor.) The first kernel of a pass (the
// embedding) is launched plainly, so weights written before the
// pass (the optimizer, the code packing) are complete before any kernel of the
// pass starts and its pre-wait weight reads are safe.
//
// On the host fiber emulator (LS_HOST_EMULATOR) both are no-ops: kernels run
// one launch after another there.
#pragma once

namespace lockstep::cuda::pdl {

__device__ __forceinline__ void pdl_trigger() {
#if !defined(LS_HOST_EMULATOR)
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_wait() {
#if !defined(LS_HOST_EMULATOR)
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Before the wait, a CTA may warm the L2 with weight bytes it reads only after
// its reduction (a norm's w): the CTA's threads each prefetch a 128-byte line
// of [p, p + bytes). A hint, no registers held, no values read: the bits
// cannot move.
__device__ __forceinline__ void pdl_prefetch_l2(const void* p, unsigned long long bytes) {
#if !defined(LS_HOST_EMULATOR)
  const char* c = static_cast<const char*>(p);
  for (unsigned long long off = 128ull * threadIdx.x; off < bytes; off += 128ull * blockDim.x)
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(c + off));
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace lockstep::cuda::pdl
