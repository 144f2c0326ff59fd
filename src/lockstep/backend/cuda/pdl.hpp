// LOCKSTEP_DECODE_PDL (docs/perf/DECODE_CUDA.md §16): every kernel of the CUDA
// decode pass launched as a programmatic dependent launch (sm_90). Host side
// only, no CUDA headers: the launchers ask decode_pdl() (pdl_launch.cuh's
// launch_decode does), the tests set it and count the launches.
#pragma once

namespace lockstep::cuda {

// on unless LOCKSTEP_DECODE_PDL=0 at first use (default on since session 17), unless set_decode_pdl chose.
bool decode_pdl();
// 1 on, 0 off, -1 back to the environment's.
void set_decode_pdl(int on);

// A kernel that writes what a decode kernel reads before its wait (the
// ternary codes and scales, packed at a weight's first use inside a pass:
// ternary_pack, f16_pack) has just been launched: this thread's next decode
// launch is a plain one (take_decode_pdl_fence says so and clears the mark),
// so that it starts only after everything before it has completed.
void decode_pdl_fence();
bool take_decode_pdl_fence();
bool decode_pdl_fenced();  // the mark, left as it is

// The planted bug of the GPU tests (tests/infer): the v1 ternary GEMV waits
// only after it has staged x (it reads the norm's codes before the norm has
// completed). 0 none, 1 that one.
int decode_pdl_mutant();
void set_decode_pdl_mutant(int m);

// Programmatic launches made since the last reset (launch_programmatic counts
// every one: launch_decode's, v2pdl's, the attention fold's).
long programmatic_launches();
void reset_programmatic_launches();
void note_programmatic_launch();

}  // namespace lockstep::cuda
