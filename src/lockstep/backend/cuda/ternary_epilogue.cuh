// The epilogue of a ternary_gemv cell (decode_linear.cu's kernel and v2's,
// ternary_gemv_v2.cu), and the residual add a decode pass folds into it
// (decode_linear_launch.hpp: TernaryPart::add / sum; model/cuda_model.cpp:
// DecodeBackend<cuda::OpKernels>::residual).
//
// The cell: ops::BitLinear's (f32(acc) · step_n) · scale — __int2float_rn,
// then two __fmul_rn in that order. The residual after it: ops::ResidualAdd's
// y = a + b with the BitLinear's output as one operand, the spec's own add
// (__fadd_rn, the operands in the op's order: add_first says the other operand
// is a), on the rounded cell v — exactly residual_fwd's __fadd_rn(a[i], b[i])
// of pointwise.cu on the values it would have read. The cell itself is still
// written to y (the op's output, whoever reads it). Per cell one thread reads
// add[at] before it writes y[at] and sum[at], so sum may be add (y = y + o in
// place); the launcher's caller keeps y apart from add.
//
// contract (DecodeLinearMutant::ternary_residual_contracted, a planted bug):
// the last product and the add as one fma — one rounding where the spec has
// two — so that the tests see a fused epilogue that is not the add caught.
#pragma once

#include "lockstep/num/fp.hpp"

namespace lockstep::cuda::launch {

__device__ __forceinline__ void ternary_cell_store(float* y, long long at, int acc, float step, float scale,
                                                   const float* add, float* sum, bool add_first, bool contract) {
  const float scaled = __fmul_rn(__int2float_rn(acc), step);
  const float v = __fmul_rn(scaled, scale);
  if (sum != nullptr) {
    const float o = add[at];
    y[at] = v;
    sum[at] = contract ? num::fma_rn(scaled, scale, o) : add_first ? __fadd_rn(o, v) : __fadd_rn(v, o);
    return;
  }
  y[at] = v;
}

}  // namespace lockstep::cuda::launch
