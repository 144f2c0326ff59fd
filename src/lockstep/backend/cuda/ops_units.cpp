// cuda::OpKernels: the int8 unit linear (ops/units.hpp), the same bits as
// cpu::OpKernels (backend/cpu/ops.cpp): the quantizers of quant.cu
// (row_quantize_i8: num::reduce::max's absmax per row; col_quantize_i8: the
// CPU's row-order fold per column, codes stored transposed), the exact int32
// product on int8_gemm_nt (int8_gemm.hpp: whichever gated implementation the
// race chose; the choice changes no bit) and the epilogue
// ((f32(acc) * step_a) * step_b) (+ b). Null outputs of the backward are not
// computed (as the float linear's). The forward is live-audited
// (audit::int8_linear_fwd); the backward's products are not yet.
#include <algorithm>
#include <cstddef>

#include "lockstep/backend/cuda/audit.hpp"
#include "lockstep/backend/cuda/col_quant.hpp"
#include "lockstep/backend/cuda/gemm_launch.hpp"
#include "lockstep/backend/cuda/int8_gemm.hpp"
#include "lockstep/backend/cuda/ops.hpp"

namespace lockstep::cuda {

// Forward: x by rows, W by output rows (over K), acc = codes(x)·codes(W)ᵀ,
// y = ((f32(acc) * step_n) * wstep_m) + b_m.
void OpKernels::run(const ops::Int8LinearConfig& c, const ops::Int8Linear::FwdArgs<float>& args) {
  const auto& [x, w, b, y] = args;
  ops::Int8Linear::validate(c);
  const std::size_t N = c.rows, K = c.in, M = c.out;
  const auto floor_v = static_cast<float>(ops::Int8Linear::kFloor);
  UnitScratch& u = units_;
  u.qa.resize(N * K);
  u.qb.resize(M * K);
  u.sa.resize(N);
  u.sb.resize(M);
  u.acc.resize(N * M);
  launch::row_quantize_i8(x, N, K, floor_v, u.qa.data(), u.sa.data(), nullptr);
  launch::row_quantize_i8(w, M, K, floor_v, u.qb.data(), u.sb.data(), nullptr);
  int8_gemm_nt(u.qa.data(), u.qb.data(), u.acc.data(), N, M, K);
  launch::unit_epilogue(u.acc.data(), u.sa.data(), u.sb.data(), c.bias ? b : nullptr, N, M, y);
  audit::int8_linear_fwd(N, K, M, x, w, c.bias ? b : nullptr, y);
}

// Backward. Float STE: dx = dy·Ŵ, dW = dyᵀ·x̂ (x̂, Ŵ: the forward's codes
// again, dequantized) on the canonical float GEMM. Unit: dx from dy by rows
// and W by columns (over M), dW from dy by columns and x by columns (over N),
// each an exact int32 product and its epilogue. db: column sums of dy (in the
// unit backward with dW, from the pass that reads dy for its column codes).
void OpKernels::run(const ops::Int8LinearConfig& c, const ops::Int8Linear::BwdArgs<float>& args) {
  const auto& [x, w, dy, dx, dw, db] = args;
  ops::Int8Linear::validate(c);
  const std::size_t N = c.rows, K = c.in, M = c.out, NM = std::max(N, M);
  const auto floor_v = static_cast<float>(ops::Int8Linear::kFloor);
  const auto floor_g = static_cast<float>(ops::Int8Linear::kGradFloor);
  UnitScratch& u = units_;
  const bool want_db = c.bias && db != nullptr;
  const bool sums_here = want_db && c.unit_backward && dw != nullptr;  // folded into dy's column codes
  if (!c.unit_backward) {
    u.qa.resize(NM * K);
    u.sa.resize(NM);
    u.deq.resize(NM * K);
    if (dx != nullptr) {
      launch::row_quantize_i8(w, M, K, floor_v, u.qa.data(), u.sa.data(), u.deq.data());
      launch::gemm_dyw(N, M, K, dy, u.deq.data(), dx);
    }
    if (dw != nullptr) {
      launch::row_quantize_i8(x, N, K, floor_v, u.qa.data(), u.sa.data(), u.deq.data());
      launch::gemm_dytx(N, M, K, dy, u.deq.data(), dw);
    }
  } else {
    u.qa.resize(N * M);
    u.qb.resize(NM * K);
    u.sa.resize(NM);
    u.sb.resize(K);
    u.acc.resize(NM * K);
    u.col.resize(std::max({col_quantize_scratch(M, K), col_quantize_scratch(N, M), col_quantize_scratch(N, K)}));
    if (dx != nullptr) {  // dx[n,k] = (f32(Σ_m qa[n,m] qg[k,m]) * sa_n) * sg_k
      launch::row_quantize_i8(dy, N, M, floor_g, u.qa.data(), u.sa.data(), nullptr);
      col_quantize(w, M, K, floor_v, u.qb.data(), u.sb.data(), u.col.data());  // [K, M]
      int8_gemm_nt(u.qa.data(), u.qb.data(), u.acc.data(), N, K, M);
      launch::unit_epilogue(u.acc.data(), u.sa.data(), u.sb.data(), nullptr, N, K, dx);
    }
    if (dw != nullptr) {  // dW[m,k] = (f32(Σ_n qc[m,n] qd[k,n]) * sc_m) * sd_k
      // db from the same read of dy as its column codes (col_quant.hpp).
      col_quantize(dy, N, M, floor_g, u.qa.data(), u.sa.data(), u.col.data(), sums_here ? db : nullptr);  // [M, N]
      col_quantize(x, N, K, floor_v, u.qb.data(), u.sb.data(), u.col.data());                            // [K, N]
      int8_gemm_nt(u.qa.data(), u.qb.data(), u.acc.data(), M, K, N);
      launch::unit_epilogue(u.acc.data(), u.sa.data(), u.sb.data(), nullptr, M, K, dw);
    }
  }
  if (want_db && !sums_here) launch::column_sums(dy, N, M, db);
}

}  // namespace lockstep::cuda
