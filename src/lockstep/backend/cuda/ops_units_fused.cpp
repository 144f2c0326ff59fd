// The fused units paths of cuda::OpKernels (ops/units_fused.hpp says what each
// fuses and why it is exact): quant.cu's quantizers and epilogue, the gated
// int8 GEMM (int8_gemm.hpp), and units_fused.cu's two kernels, on the device,
// nothing read back. The same bits as the unfused calls of ops_units.cpp and
// as cpu::OpKernels' fused paths: tests/cuda/units_fused_cuda_test.cpp. The
// forwards are live-audited per linear as the unfused ones are.
#include <algorithm>
#include <cstddef>

#include "lockstep/backend/cuda/audit.hpp"
#include "lockstep/backend/cuda/col_quant.hpp"
#include "lockstep/backend/cuda/gemm_launch.hpp"
#include "lockstep/backend/cuda/int8_gemm.hpp"
#include "lockstep/backend/cuda/ops.hpp"
#include "lockstep/backend/cuda/units_fused_launch.hpp"

namespace lockstep::cuda {

void OpKernels::units_shared_fwd(std::size_t rows, std::size_t in, const float* x, const ops::UnitFwdPart* parts,
                                 std::size_t n_parts) {
  ++ops::units_fused_calls();
  const std::size_t N = rows, K = in;
  const std::size_t total = ops::shared_fwd_width(N, K, parts, n_parts);
  const auto floor_v = static_cast<float>(ops::Int8Linear::kFloor);
  UnitScratch& u = units_;
  u.qa.resize(N * K);
  u.sa.resize(N);
  u.qb.resize(total * K);
  u.sb.resize(total);
  u.acc.resize(N * total);
  launch::row_quantize_i8(x, N, K, floor_v, u.qa.data(), u.sa.data(), nullptr);  // once for every part
  for (std::size_t p = 0, off = 0; p < n_parts; off += parts[p].out, ++p)
    launch::row_quantize_i8(parts[p].w, parts[p].out, K, floor_v, u.qb.data() + off * K, u.sb.data() + off, nullptr);
  int8_gemm_nt(u.qa.data(), u.qb.data(), u.acc.data(), N, total, K);  // one product
  for (std::size_t p = 0, off = 0; p < n_parts; off += parts[p].out, ++p)
    launch::unit_epilogue_cols(u.acc.data() + off, total, u.sa.data(), u.sb.data() + off, parts[p].b, N, parts[p].out,
                               parts[p].y);
  for (std::size_t p = 0; p < n_parts; ++p)
    audit::int8_linear_fwd(N, K, parts[p].out, x, parts[p].w, parts[p].b, parts[p].y);
}

void OpKernels::units_shared_bwd(std::size_t rows, std::size_t in, bool unit_backward, const float* x,
                                 const ops::UnitBwdPart* parts, std::size_t n_parts) {
  ++ops::units_fused_calls();
  const std::size_t N = rows, K = in;
  const auto [dw_rows, widest] = ops::shared_bwd_sizes(N, K, unit_backward, parts, n_parts);
  const auto floor_v = static_cast<float>(ops::Int8Linear::kFloor);
  const auto floor_g = static_cast<float>(ops::Int8Linear::kGradFloor);
  UnitScratch& u = units_;
  if (!unit_backward) {
    // x̂ (x by rows, the forward's codes) once for every part's dW; Ŵ_i per part.
    u.qa.resize(std::max(N, widest) * K);
    u.sa.resize(std::max(N, widest));
    u.deq.resize(N * K);
    u.deq2.resize(widest * K);
    if (dw_rows > 0) launch::row_quantize_i8(x, N, K, floor_v, u.qa.data(), u.sa.data(), u.deq.data());
    for (std::size_t p = 0; p < n_parts; ++p) {
      const ops::UnitBwdPart& q = parts[p];
      if (q.dx != nullptr) {
        launch::row_quantize_i8(q.w, q.out, K, floor_v, u.qa.data(), u.sa.data(), u.deq2.data());
        launch::gemm_dyw(N, q.out, K, q.dy, u.deq2.data(), q.dx);
      }
      if (q.dw != nullptr) launch::gemm_dytx(N, q.out, K, q.dy, u.deq.data(), q.dw);
    }
  } else {
    std::size_t col = col_quantize_scratch(N, K);
    for (std::size_t p = 0; p < n_parts; ++p)
      col = std::max({col, col_quantize_scratch(parts[p].out, K), col_quantize_scratch(N, parts[p].out)});
    u.col.resize(col);
    u.qa.resize(N * widest);
    u.sa.resize(N);
    u.qb.resize(K * std::max(widest, N));
    u.sb.resize(K);
    u.qc.resize(dw_rows * N);
    u.sc.resize(dw_rows);
    u.acc.resize(std::max(N, dw_rows) * K);
    // dx per part: dy_i by rows over m, W_i by columns over m (nothing shared).
    for (std::size_t p = 0; p < n_parts; ++p) {
      const ops::UnitBwdPart& q = parts[p];
      if (q.dx == nullptr) continue;
      launch::row_quantize_i8(q.dy, N, q.out, floor_g, u.qa.data(), u.sa.data(), nullptr);
      col_quantize(q.w, q.out, K, floor_v, u.qb.data(), u.sb.data(), u.col.data());  // [K, M]
      int8_gemm_nt(u.qa.data(), u.qb.data(), u.acc.data(), N, K, q.out);
      launch::unit_epilogue(u.acc.data(), u.sa.data(), u.sb.data(), nullptr, N, K, q.dx);
    }
    if (dw_rows > 0) {
      // dW of every part: dy_i by columns stacked [Σ M_i, N], x by columns once [K, N], one product.
      for (std::size_t p = 0, off = 0; p < n_parts; ++p) {
        const ops::UnitBwdPart& q = parts[p];
        if (q.dw == nullptr) continue;
        // The part's db from the same read of dy_i as its column codes (col_quant.hpp).
        col_quantize(q.dy, N, q.out, floor_g, u.qc.data() + off * N, u.sc.data() + off, u.col.data(), q.db);
        off += q.out;
      }
      col_quantize(x, N, K, floor_v, u.qb.data(), u.sb.data(), u.col.data());
      int8_gemm_nt(u.qc.data(), u.qb.data(), u.acc.data(), dw_rows, K, N);
      for (std::size_t p = 0, off = 0; p < n_parts; ++p) {
        const ops::UnitBwdPart& q = parts[p];
        if (q.dw == nullptr) continue;
        const float* dy_steps = u.sc.data() + (launch::units_fused_mutant() == 3 ? 0 : off);
        launch::unit_epilogue(u.acc.data() + off * K, dy_steps, u.sb.data(), nullptr, q.out, K, q.dw);
        off += q.out;
      }
    }
  }
  for (std::size_t p = 0; p < n_parts; ++p) {
    const bool summed = unit_backward && parts[p].dw != nullptr;  // with its column codes, above
    if (parts[p].db != nullptr && !summed) launch::column_sums(parts[p].dy, N, parts[p].out, parts[p].db);
  }
}

// gemm1; its epilogue, bias, GELU and act's row codes in one pass
// (mlp_gelu_rows); gemm2 on those codes and its epilogue.
void OpKernels::units_mlp_gelu_fwd(const ops::UnitMlpGelu& a, Aux& gelu_aux) {
  ++ops::units_fused_calls();
  const std::size_t N = a.rows, D = a.in, F = a.hidden;
  ops::Int8Linear::validate({N, D, F, true, false});
  ops::Int8Linear::validate({N, F, D, true, false});
  const auto floor_v = static_cast<float>(ops::Int8Linear::kFloor);
  const launch::GeluConstants gk{static_cast<float>(ops::Gelu::kSqrt2OverPi), static_cast<float>(ops::Gelu::kCubic),
                                 static_cast<float>(ops::Gelu::kCubic3)};
  UnitScratch& u = units_;
  u.qa.resize(N * D);
  u.sa.resize(N);
  u.qb.resize(F * D);
  u.sb.resize(std::max(F, D));
  u.acc.resize(N * std::max(F, D));
  u.qc.resize(N * F);
  u.sc.resize(N);
  gelu_aux.a.resize(N * F);  // tanh(u(fc)), kept for GELU's backward
  launch::row_quantize_i8(a.x, N, D, floor_v, u.qa.data(), u.sa.data(), nullptr);
  launch::row_quantize_i8(a.w1, F, D, floor_v, u.qb.data(), u.sb.data(), nullptr);
  int8_gemm_nt(u.qa.data(), u.qb.data(), u.acc.data(), N, F, D);
  launch::mlp_gelu_rows(u.acc.data(), u.sa.data(), u.sb.data(), a.b1, N, F, gk, floor_v, a.fc, gelu_aux.a.data(),
                        a.act, u.qc.data(), u.sc.data());
  launch::row_quantize_i8(a.w2, D, F, floor_v, u.qb.data(), u.sb.data(), nullptr);
  int8_gemm_nt(u.qc.data(), u.qb.data(), u.acc.data(), N, D, F);
  launch::unit_epilogue(u.acc.data(), u.sc.data(), u.sb.data(), a.b2, N, D, a.y);
  audit::int8_linear_fwd(N, D, F, a.x, a.w1, a.b1, a.fc);
  audit::int8_linear_fwd(N, F, D, a.act, a.w2, a.b2, a.y);
}

}  // namespace lockstep::cuda
