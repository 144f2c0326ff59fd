// BitLinear's weight operand made where a kernel needs it instead of kept
// (ternary_expand.cu; docs/LORA.md "The base as codes on the CUDA model"):
//   * ternary_requantize: Ŵ = code · scale of F32 weights again, from the
//     forward's kept scale and its inverse (the backward of a weight held as
//     floats, so that the forward keeps no Ŵ).
// It is the expression quant.cu's ternary_quantize writes (ternary_code.cuh),
// so the operands have its bits. No CUDA headers: callable from g++ code.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::cuda::launch {

// dequant[i] = q · params[0], q = ternary_code(w[i], params[1]): ternary_quantize's
// dequant for the params it wrote ([0] the scale m, [1] 1 / m).
void ternary_requantize(const float* w, std::size_t n, const float* params, float* dequant);

}  // namespace lockstep::cuda::launch
