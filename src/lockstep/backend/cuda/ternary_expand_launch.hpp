// BitLinear's weight operands made where a kernel needs them instead of kept
// (ternary_expand.cu; docs/LORA.md "The base held as codes on the device"):
//   * ternary_requantize: Ŵ = code · scale of F32 weights again, from the
//     forward's kept scale and its inverse (the backward of a weight held as
//     floats, so that the forward keeps no Ŵ);
//   * ternary2_expand: a weight held as TERNARY2 codes (a frozen LoRA base) as
//     the float GEMM's operand: the codes as floats (the forward's integer
//     product) or code · scale (the backward's Ŵ).
// Both are the expressions quant.cu's ternary_quantize writes (ternary_code.cuh),
// so the operands have its bits. No CUDA headers: callable from g++ code.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::cuda::launch {

// dequant[i] = q · params[0], q = ternary_code(w[i], params[1]): ternary_quantize's
// dequant for the params it wrote ([0] the scale m, [1] 1 / m).
void ternary_requantize(const float* w, std::size_t n, const float* params, float* dequant);

// out[i] = f32(code_i) (times_scale false) or f32(code_i) · scale, one
// rounding (exact: code_i is -1, 0 or 1), for the n codes of `bytes`
// (TERNARY2's layout). With scale_out not null, *scale_out = scale too (the
// GEMM epilogue reads the scale from device memory; no host copy waits).
void ternary2_expand(const std::uint8_t* bytes, std::size_t n, float scale, bool times_scale, float* out,
                     float* scale_out);

}  // namespace lockstep::cuda::launch
