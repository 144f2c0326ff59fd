// Fusions of the int8 unit linear (issue 11 item 4; docs/UNITS.md, "Fusions")
// that change no bit: each computes exactly what the unfused Int8Linear calls
// (ops/units.hpp), and the activation between them, compute — the same codes,
// the same exact int32 sums, the same epilogue roundings — with fewer passes
// over the operands and fewer products. Why each is exact:
//
//  * Shared input (units_shared_fwd): linears y_i = x·W_iᵀ + b_i over one x
//    (LLaMA's q/k/v over the input norm, gate/up over the post norm). x is
//    quantized by rows over K once (its codes and steps depend on x alone);
//    each W_i by its own output rows over K (a row's codes depend on that row
//    alone), written one after another into one [Σ M_i, K] code matrix; one
//    int32 product N × Σ M_i × K (each cell the same exact integer sum), then
//    each part's epilogue ((f32(acc) * step^x_n) * step^W_m) + b_m on its own
//    columns, into its own output.
//  * The MLP chain (units_mlp_gelu_fwd, GPT-2: c_fc -> GELU -> c_proj):
//    gemm1's epilogue, the bias, GELU (ops::Gelu's expression, tanh kept for
//    its backward as the Gelu kernel keeps it) and the per-row quantization of
//    the activation (the codes and steps c_proj's forward would compute from
//    it) in one pass over each row, then gemm2 on those codes. fc, the tanh
//    and the activation are still written: the backward reads them.
//  * Shared input, backward (units_shared_bwd): the same linears' backward.
//    With the unit backward (the axes of ops/units.hpp):
//      - dW_i = dy_iᵀ·x sums over n: x is quantized by COLUMNS over n, once
//        for every part (the codes depend on x alone), and dy_i by columns
//        over n per part; the parts' dy codes are stacked into one [Σ M_i, N]
//        matrix, so the dW of every part is ONE int32 product Σ M_i × K × N
//        that reads x's codes once;
//      - dx_i = dy_i·W_i sums over m (= out_i): dy_i by rows over m_i and W_i
//        by columns over m_i, a different vector and a different length per
//        part: NOTHING is shared, and the parts' dx cannot be one product
//        either (each part has its own row scales; Σ_i of the unfused results
//        is a float sum of epilogues, not one int32 sum): computed per part;
//      - dy_i's two quantizations (rows over m for dx, columns over n for dW)
//        run along different axes: they cannot be shared;
//      - the forward's codes of x (rows over k) and of W (rows over k) are not
//        the backward's (columns over n, columns over m): not shared.
//    With the float STE backward: dW_i = dy_iᵀ·x̂ with x̂ the forward's codes of
//    x by rows: x̂ is quantized and dequantized once for every part (the
//    canonical float GEMM per part, as unfused); dx_i = dy_i·Ŵ_i per part.
//    Bias gradients: column sums of dy_i per part, as unfused.
//
// The model runs these in `--linear units` (model/units_fusion.hpp) wherever
// the kernel set has them (cpu::OpKernels, cuda::OpKernels; the op specs, the
// reference, do not) unless units_fusion_enabled() is off:
// LOCKSTEP_UNITS_FUSION=0 in the environment, or set_units_fusion(false) (the
// tests, which compare the two, and the benchmark's before/after).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "lockstep/ops/units.hpp"

namespace lockstep::ops {

// One linear of a shared-input forward: W [out, K], b [out] or null, y [N, out].
struct UnitFwdPart {
  const float* w = nullptr;
  const float* b = nullptr;
  std::size_t out = 0;
  float* y = nullptr;
};

// One linear of a shared-input backward: its weights W [out, K] and cotangent
// dy [N, out]; dx [N, K] (null: not computed), dW [out, K] (null: not
// computed), db [out] (null: no bias, or not computed).
struct UnitBwdPart {
  const float* w = nullptr;
  const float* dy = nullptr;
  std::size_t out = 0;
  float* dx = nullptr;
  float* dw = nullptr;
  float* db = nullptr;
};

// The GPT-2 MLP through the units: fc = x·W1ᵀ + b1 [N, F], act = GELU(fc)
// (tanh(u(fc)) into the Gelu kernel's aux), y = act·W2ᵀ + b2 [N, D].
struct UnitMlpGelu {
  std::size_t rows = 0, in = 0, hidden = 0;  // N, D, F
  const float* x = nullptr;                  // [N, D]
  const float *w1 = nullptr, *b1 = nullptr;  // [F, D], [F]
  const float *w2 = nullptr, *b2 = nullptr;  // [D, F], [D]
  float *fc = nullptr, *act = nullptr;       // [N, F] each
  float* y = nullptr;                        // [N, D]
};

// A shared-input group's sizes, every part checked against the int32 bound
// as its unfused Int8Linear would be (the message names the part's shape):
// the stacked forward product's width Σ M_i; the backward's stacked dW rows
// (Σ M_i over the parts with a dW) and the widest part.
inline std::size_t shared_fwd_width(std::size_t rows, std::size_t in, const UnitFwdPart* parts, std::size_t n) {
  std::size_t total = 0;
  for (std::size_t p = 0; p < n; ++p) {
    Int8Linear::validate({rows, in, parts[p].out, parts[p].b != nullptr, false});
    total += parts[p].out;
  }
  return total;
}
struct SharedBwdSizes {
  std::size_t dw_rows = 0, widest = 0;
};
inline SharedBwdSizes shared_bwd_sizes(std::size_t rows, std::size_t in, bool unit_backward, const UnitBwdPart* parts,
                                       std::size_t n) {
  SharedBwdSizes z;
  for (std::size_t p = 0; p < n; ++p) {
    Int8Linear::validate({rows, in, parts[p].out, parts[p].db != nullptr, unit_backward});
    if (parts[p].dw != nullptr) z.dw_rows += parts[p].out;
    z.widest = parts[p].out > z.widest ? parts[p].out : z.widest;
  }
  return z;
}

namespace detail {
inline std::atomic<int>& units_fusion_state() {
  // -1: not read yet; then 0 / 1.
  static std::atomic<int> s{-1};
  return s;
}
}  // namespace detail

// Whether the model uses the fused units paths (default on; off with
// LOCKSTEP_UNITS_FUSION=0 or set_units_fusion(false)). The bits are the same
// either way.
inline bool units_fusion_enabled() {
  int s = detail::units_fusion_state().load();
  if (s < 0) {
    const char* e = std::getenv("LOCKSTEP_UNITS_FUSION");
    s = e != nullptr && (std::strcmp(e, "0") == 0 || std::strcmp(e, "off") == 0) ? 0 : 1;
    detail::units_fusion_state().store(s);
  }
  return s == 1;
}
inline void set_units_fusion(bool on) { detail::units_fusion_state().store(on ? 1 : 0); }

// How many fused calls the kernel sets have run in this process (each kernel
// set's units_shared_fwd / units_shared_bwd / units_mlp_gelu_fwd adds one): the
// tests see that the model really took the fused path.
inline std::atomic<unsigned long long>& units_fused_calls() {
  static std::atomic<unsigned long long> n{0};
  return n;
}

}  // namespace lockstep::ops
