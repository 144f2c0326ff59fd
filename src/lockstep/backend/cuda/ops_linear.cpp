// cuda::OpKernels: linear and BitLinear (kernels: gemm.cu, quant.cu). Same
// contracts and the same bits as cpu::OpKernels (backend/cpu/ops.cpp).
#include <cstddef>
#include <cstdlib>
#include <string_view>

#include "lockstep/backend/cuda/audit.hpp"
#include "lockstep/backend/cuda/gemm_launch.hpp"
#include "lockstep/backend/cuda/ops.hpp"
#include "lockstep/backend/cuda/ternary_expand_launch.hpp"

namespace lockstep::cuda {

// y = X·Wᵀ, then y + b[m] (one rounding each, fused into the GEMM's store).
void OpKernels::run(const ops::Linear::Config& c, const ops::Linear::FwdArgs<float>& args) {
  const auto& [x, w, b, y] = args;
  launch::GemmEpilogue epi;
  if (c.bias) epi.bias = b;
  launch::gemm_xwt(c.rows, c.out, c.in, x, w, y, epi);
  audit::matmul("linear_fwd", c.rows, c.out, c.in, x, c.in, 1, w, 1, c.in, c.bias ? b : nullptr, y, c.out);
}

// The live audits of the two backward products (ops::matmul_dyw / matmul_dytx strides).
static void audit_backward(const char* op, const ops::Linear::Config& c, const float* x, const float* w,
                           const float* dy, const float* dx, const float* dw) {
  if (dx != nullptr) audit::matmul(op, c.rows, c.in, c.out, dy, c.out, 1, w, c.in, 1, nullptr, dx, c.in);
  if (dw != nullptr) audit::matmul(op, c.out, c.in, c.rows, dy, 1, c.out, x, c.in, 1, nullptr, dw, c.in);
}

// dx = dy·W, dw = dyᵀ·x (chains over rows), db = column sums of dy; a null
// output is not computed (db is null without a bias).
void OpKernels::run(const ops::Linear::Config& c, const ops::Linear::BwdArgs<float>& args) {
  const auto& [x, w, dy, dx, dw, db] = args;
  if (dx != nullptr) launch::gemm_dyw(c.rows, c.out, c.in, dy, w, dx);
  if (dw != nullptr) launch::gemm_dytx(c.rows, c.out, c.in, dy, x, dw);
  if (c.bias && db != nullptr) launch::column_sums(dy, c.rows, c.out, db);
  audit_backward("linear_bwd", c, x, w, dy, dx, dw);
}

static bool& bitlinear_keeps_w_flag() {
  static bool keep = [] {
    const char* v = std::getenv("LOCKSTEP_CUDA_BITLINEAR_KEEP_W");
    return v != nullptr && std::string_view(v) == "1";
  }();
  return keep;
}
bool OpKernels::bitlinear_keeps_w() { return bitlinear_keeps_w_flag(); }
void OpKernels::set_bitlinear_keeps_w(bool keep) { bitlinear_keeps_w_flag() = keep; }

// BitLinear: the quantizers on the device, the integer-code product by the
// float GEMM (exact: partial sums are integers below 2^24), the epilogue
// (acc * step_n) * scale fused into its store. aux keeps x̂ (a) and the
// quantizer's parameters (s: the scale and its inverse, on the device: only
// the audit reads them back); Ŵ (b) only with bitlinear_keeps_w() (the CPU
// kernels keep it: the gates compare what is kept, gate_driver.cpp).
void OpKernels::run(const ops::QuantLinearConfig& c, const ops::BitLinear::FwdArgs<float>& args, Aux& aux) {
  const auto& [x, w, y] = args;
  ops::BitLinear::validate(c);
  const std::size_t N = c.rows, K = c.in, M = c.out, nw = M * K;
  const bool keep_w = bitlinear_keeps_w();
  // scratch_: weight codes [nw] | activation codes [N*K] | steps [N] | params [4] | sum partials
  //           | Ŵ [nw], written by the quantizer and not kept (unless keep_w: then in aux.b)
  const std::size_t o_cx = nw, o_step = o_cx + N * K, o_par = o_step + N, o_red = o_par + 4;
  const std::size_t o_dq = o_red + launch::ternary_scratch(nw);
  scratch_.resize(o_dq + (keep_w ? 0 : nw));
  float* s = scratch_.data();
  aux.a.resize(N * K);
  float* dequant = s + o_dq;
  if (keep_w) {
    aux.b.resize(nw);
    dequant = aux.b.data();
  } else {
    DeviceBuffer<float>().swap(aux.b);  // nothing of Ŵ is held between the passes
  }
  launch::ternary_quantize(w, nw, static_cast<float>(nw), static_cast<float>(1e-5), s, dequant, s + o_par,
                           s + o_red);
  launch::row_quantize(x, N, K, static_cast<float>(ops::BitLinear::kActFloor), s + o_cx, aux.a.data(), s + o_step);
  launch::GemmEpilogue epi;
  epi.row_scale = s + o_step;
  epi.scale = s + o_par;
  launch::gemm_xwt(N, M, K, s + o_cx, s, y, epi);
  aux.s.resize(2);
  cuda::copy_on_device(aux.s.data(), s + o_par, 2 * sizeof(float));
  if (audit::options().enabled) audit::bitlinear_fwd(N, K, M, x, w, aux.scale(), y);
}

// STE backward: dx = dy·Ŵ, dW = dyᵀ·x̂ (canonical GEMM chains). Ŵ is the
// forward's (kept, or made again from W and the kept parameters).
void OpKernels::run(const ops::QuantLinearConfig& c, const ops::BitLinear::BwdArgs<float>& args, Aux& aux) {
  const auto& [x, w, dy, dx, dw] = args;
  const std::size_t nw = c.out * c.in;
  const bool keep_w = bitlinear_keeps_w();
  if (aux.a.size() != c.rows * c.in || aux.s.size() != 2 || (keep_w && aux.b.size() != nw)) {
    Aux fresh;  // no forward kept (never the case inside the model): recompute
    DeviceBuffer<float> y(c.rows * c.out);
    forward<ops::BitLinear>(c, {.x = x, .w = w, .y = y.data()}, fresh);
    aux = std::move(fresh);
  }
  const float* w_hat = nullptr;
  if (dx != nullptr || audit::options().enabled) {
    if (aux.b.size() == nw) {
      w_hat = aux.b.data();
    } else {
      w_operand_.resize(nw);
      launch::ternary_requantize(w, nw, aux.s.data(), w_operand_.data());
      w_hat = w_operand_.data();
    }
  }
  if (dx != nullptr) launch::gemm_dyw(c.rows, c.out, c.in, dy, w_hat, dx);
  if (dw != nullptr) launch::gemm_dytx(c.rows, c.out, c.in, dy, aux.a.data(), dw);
  audit_backward("bitlinear_bwd", {c.rows, c.in, c.out, false}, aux.a.data(), w_hat, dy, dx, dw);
}

bool OpKernels::runs_codes() {
  static const bool on = [] {
    const char* v = std::getenv("LOCKSTEP_CUDA_BASE_CODES");
    return v == nullptr || std::string_view(v) != "0";
  }();
  return on;
}

// The forward on codes: the activations quantized as run(BitLinear) does, the
// weight codes expanded to floats (and the scale written where the epilogue
// reads it), the same GEMM and epilogue. x̂ goes to a scratch (row_quantize
// writes it; nothing reads it: no dW).
void OpKernels::bitlinear_codes_fwd(const ops::QuantLinearConfig& c, const float* x, const std::uint8_t* codes,
                                    float scale, float* y) {
  ops::BitLinear::validate(c);
  const std::size_t N = c.rows, K = c.in, M = c.out, nw = M * K;
  // scratch_: weight codes [nw] | activation codes [N*K] | x̂ [N*K] | steps [N] | scale [1]
  const std::size_t o_cx = nw, o_dx = o_cx + N * K, o_step = o_dx + N * K, o_par = o_step + N;
  scratch_.resize(o_par + 1);
  float* s = scratch_.data();
  launch::ternary2_expand(codes, nw, scale, false, s, s + o_par);
  launch::row_quantize(x, N, K, static_cast<float>(ops::BitLinear::kActFloor), s + o_cx, s + o_dx, s + o_step);
  launch::GemmEpilogue epi;
  epi.row_scale = s + o_step;
  epi.scale = s + o_par;
  launch::gemm_xwt(N, M, K, s + o_cx, s, y, epi);
  // No live audit of this forward: audit::bitlinear_fwd re-derives the codes from F32 masters, which do not exist here.
}

// dx = dy·Ŵ, Ŵ = code · scale expanded into one scratch (the forward's Ŵ of the masters, bit for bit).
void OpKernels::bitlinear_codes_bwd(const ops::QuantLinearConfig& c, const std::uint8_t* codes, float scale,
                                    const float* dy, float* dx) {
  ops::BitLinear::validate(c);
  const std::size_t nw = c.out * c.in;
  w_operand_.resize(nw);
  launch::ternary2_expand(codes, nw, scale, true, w_operand_.data(), nullptr);
  launch::gemm_dyw(c.rows, c.out, c.in, dy, w_operand_.data(), dx);
  audit_backward("bitlinear_codes_bwd", {c.rows, c.in, c.out, false}, nullptr, w_operand_.data(), dy, dx, nullptr);
}

}  // namespace lockstep::cuda
