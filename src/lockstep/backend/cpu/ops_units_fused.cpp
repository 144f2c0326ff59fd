// The fused units paths of cpu::OpKernels (ops/units_fused.hpp says what each
// fuses and why it is exact). Every code comes from the quantizers the unfused
// Int8Linear kernels use (units_quant.hpp), every sum from cpu::int8_gemm_nt,
// every epilogue value from the same expression in the same order:
// tests/cpu/units_fused_test.cpp compares each with the unfused calls bit for
// bit, and tests/model/units_model_test.cpp the whole model with the op specs.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "lockstep/backend/cpu/gemm.hpp"
#include "lockstep/backend/cpu/int8_gemm.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/backend/cpu/units_quant.hpp"
#include "lockstep/backend/cpu/vmath.hpp"
#include "lockstep/util/parallel.hpp"

namespace lockstep::cpu {
namespace {

using units::quantize_row_i8;
using units::quantize_rows_i8;

std::size_t grain(std::size_t work_per_item) {
  return std::max<std::size_t>(1, min_parallel_work() / std::max<std::size_t>(work_per_item, 1));
}

// out[i*J + j] = ((f32(acc[i*ld + j]) * sa[i]) * sb[j]) (+ bias[j]): the unit
// epilogue on J columns of a wider int32 product (row stride ld).
void epilogue_cols(const std::int32_t* acc, std::size_t ld, const float* sa, const float* sb, const float* bias,
                   std::size_t I, std::size_t J, float* out, int threads) {
  util::parallel_for(I, threads, grain(J), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i)
      for (std::size_t j = 0; j < J; ++j) {
        const float v = (static_cast<float>(acc[i * ld + j]) * sa[i]) * sb[j];
        out[i * J + j] = bias != nullptr ? v + bias[j] : v;
      }
  });
}

}  // namespace

void OpKernels::units_shared_fwd(std::size_t rows, std::size_t in, const float* x, const ops::UnitFwdPart* parts,
                                 std::size_t n_parts) {
  ++ops::units_fused_calls();
  const std::size_t N = rows, K = in;
  const std::size_t total = ops::shared_fwd_width(N, K, parts, n_parts);
  const auto floor_v = static_cast<float>(ops::Int8Linear::kFloor);
  units_.qa.resize(N * K);
  units_.sa.resize(N);
  units_.qb.resize(total * K);
  units_.sb.resize(total);
  units_.acc.resize(N * total);
  quantize_rows_i8(x, N, K, floor_v, units_.qa.data(), units_.sa.data(), threads);  // once for every part
  for (std::size_t p = 0, off = 0; p < n_parts; off += parts[p].out, ++p)
    quantize_rows_i8(parts[p].w, parts[p].out, K, floor_v, units_.qb.data() + off * K, units_.sb.data() + off,
                     threads);
  int8_gemm_nt(units_.qa.data(), units_.qb.data(), units_.acc.data(), N, total, K, threads);  // one product
  for (std::size_t p = 0, off = 0; p < n_parts; off += parts[p].out, ++p)
    epilogue_cols(units_.acc.data() + off, total, units_.sa.data(), units_.sb.data() + off, parts[p].b, N,
                  parts[p].out, parts[p].y, threads);
}

void OpKernels::units_shared_bwd(std::size_t rows, std::size_t in, bool unit_backward, const float* x,
                                 const ops::UnitBwdPart* parts, std::size_t n_parts) {
  ++ops::units_fused_calls();
  const std::size_t N = rows, K = in;
  const auto [dw_rows, widest] = ops::shared_bwd_sizes(N, K, unit_backward, parts, n_parts);
  const auto floor_v = static_cast<float>(ops::Int8Linear::kFloor);
  const auto floor_g = static_cast<float>(ops::Int8Linear::kGradFloor);
  if (!unit_backward) {
    // x̂ (x by rows, the forward's codes) once for every part's dW; Ŵ_i per part.
    units_.qa.resize(std::max(N, widest) * K);
    units_.sa.resize(std::max(N, widest));
    units_.deq.resize(N * K);
    std::vector<float>& what = units_.deq2;
    what.resize(widest * K);
    if (dw_rows > 0) {
      quantize_rows_i8(x, N, K, floor_v, units_.qa.data(), units_.sa.data(), threads);
      units::dequantize_rows(units_.qa.data(), units_.sa.data(), N, K, units_.deq.data(), threads);
    }
    for (std::size_t p = 0; p < n_parts; ++p) {
      const ops::UnitBwdPart& q = parts[p];
      if (q.dx != nullptr) {
        quantize_rows_i8(q.w, q.out, K, floor_v, units_.qa.data(), units_.sa.data(), threads);
        units::dequantize_rows(units_.qa.data(), units_.sa.data(), q.out, K, what.data(), threads);
        gemm_dyw(N, q.out, K, q.dy, what.data(), q.dx, threads);
      }
      if (q.dw != nullptr) gemm_dytx(N, q.out, K, q.dy, units_.deq.data(), q.dw, threads);
    }
  } else {
    // dx per part: dy_i by rows over m, W_i by columns over m (nothing shared).
    units_.qa.resize(std::max(N * widest, dw_rows * N));
    units_.sa.resize(std::max({N, widest, dw_rows}));
    units_.qb.resize(K * std::max(widest, N));
    units_.sb.resize(K);
    units_.acc.resize(std::max(N, dw_rows) * K);
    for (std::size_t p = 0; p < n_parts; ++p) {
      const ops::UnitBwdPart& q = parts[p];
      if (q.dx == nullptr) continue;
      quantize_rows_i8(q.dy, N, q.out, floor_g, units_.qa.data(), units_.sa.data(), threads);
      units::quantize_cols_i8(q.w, q.out, K, floor_v, units_.qb.data(), units_.sb.data(), threads);  // [K, M]
      int8_gemm_nt(units_.qa.data(), units_.qb.data(), units_.acc.data(), N, K, q.out, threads);
      units::unit_epilogue(units_.acc.data(), units_.sa.data(), units_.sb.data(), nullptr, N, K, q.dx, threads);
    }
    if (dw_rows > 0) {
      // dW of every part: dy_i by columns stacked [Σ M_i, N], x by columns once [K, N], one product.
      for (std::size_t p = 0, off = 0; p < n_parts; ++p) {
        const ops::UnitBwdPart& q = parts[p];
        if (q.dw == nullptr) continue;
        units::quantize_cols_i8(q.dy, N, q.out, floor_g, units_.qa.data() + off * N, units_.sa.data() + off,
                                threads);
        off += q.out;
      }
      units::quantize_cols_i8(x, N, K, floor_v, units_.qb.data(), units_.sb.data(), threads);
      int8_gemm_nt(units_.qa.data(), units_.qb.data(), units_.acc.data(), dw_rows, K, N, threads);
      for (std::size_t p = 0, off = 0; p < n_parts; ++p) {
        const ops::UnitBwdPart& q = parts[p];
        if (q.dw == nullptr) continue;
        units::unit_epilogue(units_.acc.data() + off * K, units_.sa.data() + off, units_.sb.data(), nullptr, q.out,
                             K, q.dw, threads);
        off += q.out;
      }
    }
  }
  for (std::size_t p = 0; p < n_parts; ++p)
    if (parts[p].db != nullptr) units::bias_gradient(parts[p].dy, N, parts[p].out, parts[p].db, threads);
}

// gemm1, then per row: its epilogue and bias (fc), GELU (tanh kept, act) and
// act's codes and step — c_proj's quantization of act, computed where act is
// made — then gemm2 on those codes and its epilogue.
void OpKernels::units_mlp_gelu_fwd(const ops::UnitMlpGelu& a, Aux& gelu_aux) {
  ++ops::units_fused_calls();
  const std::size_t N = a.rows, D = a.in, F = a.hidden;
  ops::Int8Linear::validate({N, D, F, true, false});
  ops::Int8Linear::validate({N, F, D, true, false});
  const auto floor_v = static_cast<float>(ops::Int8Linear::kFloor);
  units_.qa.resize(N * D);
  units_.sa.resize(N);
  units_.qb.resize(std::max(F * D, D * F));
  units_.sb.resize(std::max(F, D));
  units_.acc.resize(N * std::max(F, D));
  units_.qc.resize(N * F);
  units_.sc.resize(N);
  quantize_rows_i8(a.x, N, D, floor_v, units_.qa.data(), units_.sa.data(), threads);
  quantize_rows_i8(a.w1, F, D, floor_v, units_.qb.data(), units_.sb.data(), threads);
  int8_gemm_nt(units_.qa.data(), units_.qb.data(), units_.acc.data(), N, F, D, threads);
  gelu_aux.a.resize(N * F);
  float* ts = gelu_aux.a.data();
  const std::int32_t* acc = units_.acc.data();
  const float *sa = units_.sa.data(), *sb = units_.sb.data();
  util::parallel_for(N, threads, grain(8 * F), [&](std::size_t lo, std::size_t hi) {
    std::vector<float> absr(F);
    for (std::size_t n = lo; n < hi; ++n) {
      float* fc = a.fc + n * F;
      float* act = a.act + n * F;
      float* t = ts + n * F;
      for (std::size_t j = 0; j < F; ++j) {
        fc[j] = ((static_cast<float>(acc[n * F + j]) * sa[n]) * sb[j]) + a.b1[j];  // unit_epilogue with bias
        float x2;
        t[j] = ops::Gelu::inner(fc[j], x2);  // the Gelu kernel's expression, in its order
      }
      tanh_n(t, t, F);
      for (std::size_t j = 0; j < F; ++j) act[j] = (0.5f * fc[j]) * (1.0f + t[j]);
      units_.sc[n] = quantize_row_i8(act, F, floor_v, units_.qc.data() + n * F, absr.data());
    }
  });
  quantize_rows_i8(a.w2, D, F, floor_v, units_.qb.data(), units_.sb.data(), threads);
  int8_gemm_nt(units_.qc.data(), units_.qb.data(), units_.acc.data(), N, D, F, threads);
  units::unit_epilogue(units_.acc.data(), units_.sc.data(), units_.sb.data(), a.b2, N, D, a.y, threads);
}

}  // namespace lockstep::cpu
