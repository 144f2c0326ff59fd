#include "lockstep/backend/cpu/ops.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "lockstep/backend/cpu/gemm.hpp"
#include "lockstep/backend/cpu/int8_gemm.hpp"
#include "lockstep/backend/cpu/units_quant.hpp"
#include "lockstep/backend/cpu/vmath.hpp"
#include "lockstep/num/elementary.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/reduce.hpp"
#include "lockstep/util/parallel.hpp"

namespace lockstep::cpu {
namespace {

using num::fma_rn;
namespace red = num::reduce;

// Pieces of work below ~32k element operations run on the calling thread: a
// parallel region costs more than it saves there. Grains are rows (columns)
// per piece, from the work per row.
std::atomic<std::size_t> g_min_work{std::size_t{1} << 15};
std::size_t grain_for(std::size_t work_per_item) {
  return std::max<std::size_t>(1, min_parallel_work() / std::max<std::size_t>(work_per_item, 1));
}

// Elements an element-wise op's passes walk at a time (a few arrays of it fit in L1).
constexpr std::size_t kL1Run = 2048;

// A per-thread scratch row (no allocation once grown).
float* scratch(std::size_t n, int which = 0) {
  thread_local std::vector<float> buf[2];
  if (buf[which].size() < n) buf[which].resize(n);
  return buf[which].data();
}

// Column chains of an [N, D] pair: out[j] = dot_seq over n ascending of
// a[n, j]·b[n, j] (acc = +0, fma, canonical NaN) — the spec's
// Math::dot_seq(a + j, D, b + j, D, N) — with columns spread over threads and
// a run of columns per step of the inner loop (same chain per column).
void column_dots(const float* a, const float* b, std::size_t N, std::size_t D, float* out, int threads) {
  util::parallel_for(D, threads, std::max<std::size_t>(16, grain_for(N)), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t j = lo; j < hi; ++j) out[j] = 0.0f;
    for (std::size_t n = 0; n < N; ++n) {
      const float* an = a + n * D;
      const float* bn = b + n * D;
      for (std::size_t j = lo; j < hi; ++j) out[j] = fma_rn(an[j], bn[j], out[j]);
    }
    for (std::size_t j = lo; j < hi; ++j) out[j] = red::canonical_nan(out[j]);
  });
}

// Column sums of an [N, D] matrix: out[j] = +0 + a[0, j] + a[1, j] + ...
// (ops::column_sums), columns over threads.
void column_sums(const float* a, std::size_t N, std::size_t D, float* out, int threads) {
  util::parallel_for(D, threads, std::max<std::size_t>(16, grain_for(N)), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t j = lo; j < hi; ++j) out[j] = 0.0f;
    for (std::size_t n = 0; n < N; ++n) {
      const float* an = a + n * D;
      for (std::size_t j = lo; j < hi; ++j) out[j] = out[j] + an[j];
    }
  });
}

// Element-wise loop over [0, n) in chunks on threads.
template <class Body>
void elementwise(std::size_t n, int threads, Body&& body) {
  util::parallel_for(n, threads, grain_for(1), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) body(i);
  });
}

}  // namespace

void set_min_parallel_work(std::size_t ops) { g_min_work.store(std::max<std::size_t>(ops, 1)); }
std::size_t min_parallel_work() { return g_min_work.load(); }

// --- embeddings ---------------------------------------------------------------

void OpKernels::run(const ops::Embedding::Config& c, const ops::Embedding::FwdArgs<float>& args) {
  const auto& [ids, wte, y] = args;
  for (std::size_t n = 0; n < c.tokens; ++n) ops::Embedding::row_of(c, ids[n]);  // throws like the spec
  util::parallel_for(c.tokens, threads, grain_for(c.dim), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t n = lo; n < hi; ++n)
      std::memcpy(y + n * c.dim, wte + static_cast<std::size_t>(ids[n]) * c.dim, c.dim * sizeof(float));
  });
}

// dwte[v] = +0 + dy[n1] + dy[n2] + ... over the tokens with id v, n
// ascending: vocabulary rows on threads, each thread scanning all tokens for
// its rows (every row's chain in token order).
void OpKernels::run(const ops::Embedding::Config& c, const ops::Embedding::BwdArgs<float>& args) {
  const auto& [ids, dy, dwte] = args;
  for (std::size_t n = 0; n < c.tokens; ++n) ops::Embedding::row_of(c, ids[n]);
  util::parallel_for(c.vocab, threads, grain_for(c.tokens), [&](std::size_t lo, std::size_t hi) {
    std::fill(dwte + lo * c.dim, dwte + hi * c.dim, 0.0f);
    for (std::size_t n = 0; n < c.tokens; ++n) {
      const auto v = static_cast<std::size_t>(ids[n]);
      if (v < lo || v >= hi) continue;
      float* row = dwte + v * c.dim;
      const float* g = dy + n * c.dim;
      for (std::size_t d = 0; d < c.dim; ++d) row[d] = row[d] + g[d];
    }
  });
}

void OpKernels::run(const ops::LearnedPositions::Config& c, const ops::LearnedPositions::FwdArgs<float>& args) {
  const auto& [x, wpe, y] = args;
  ops::LearnedPositions::validate(c);
  util::parallel_for(c.batch * c.seq, threads, grain_for(c.dim), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t r = lo; r < hi; ++r) {
      const float* p = wpe + (c.offset + r % c.seq) * c.dim;
      for (std::size_t d = 0; d < c.dim; ++d) y[r * c.dim + d] = x[r * c.dim + d] + p[d];
    }
  });
}

// dx = dy; dwpe[offset + t] = +0 + dy[0, t] + dy[1, t] + ... (b ascending).
void OpKernels::run(const ops::LearnedPositions::Config& c, const ops::LearnedPositions::BwdArgs<float>& args) {
  const auto& [dy, dx, dwpe] = args;
  ops::LearnedPositions::validate(c);
  if (dx != dy) std::memcpy(dx, dy, c.batch * c.seq * c.dim * sizeof(float));
  std::fill(dwpe, dwpe + c.max_seq * c.dim, 0.0f);
  util::parallel_for(c.seq, threads, grain_for(c.batch * c.dim), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t t = lo; t < hi; ++t) {
      float* acc = dwpe + (c.offset + t) * c.dim;
      for (std::size_t b = 0; b < c.batch; ++b) {
        const float* g = dy + (b * c.seq + t) * c.dim;
        for (std::size_t d = 0; d < c.dim; ++d) acc[d] = acc[d] + g[d];
      }
    }
  });
}

// --- linear layers --------------------------------------------------------------

void OpKernels::run(const ops::Linear::Config& c, const ops::Linear::FwdArgs<float>& args) {
  const auto& [x, w, b, y] = args;
  gemm_xwt(c.rows, c.out, c.in, x, w, y, threads, c.bias ? b : nullptr);  // y = x·wᵀ, then y + b in its epilogue
}

void OpKernels::run(const ops::Linear::Config& c, const ops::Linear::BwdArgs<float>& args) {
  const auto& [x, w, dy, dx, dw, db] = args;
  gemm_dyw(c.rows, c.out, c.in, dy, w, dx, threads);
  if (dw != nullptr) gemm_dytx(c.rows, c.out, c.in, dy, x, dw, threads);  // nullptr: a frozen weight
  if (c.bias) column_sums(dy, c.rows, c.out, db, threads);
}

// BitLinear's activations, row n of x [N, K]: its absmax (the canonical max,
// floored at kActFloor), the codes round(x · 127/m) clamped to ±127 into
// codes_x_ (as floats, the GEMM's operand), the step m/127 into step_[n], and,
// when xhat is given, x̂ = code · step (what the backward's dW reads).
void OpKernels::quantize_bitlinear_activations(const float* x, std::size_t N, std::size_t K, float* xhat) {
  codes_x_.resize(N * K);
  step_.resize(N);
  float* step = step_.data();
  const auto floor_x = static_cast<float>(ops::BitLinear::kActFloor);
  util::parallel_for(N, threads, grain_for(4 * K), [&](std::size_t lo, std::size_t hi) {
    float* a = scratch(K);
    for (std::size_t n = lo; n < hi; ++n) {
      const float* xr = x + n * K;
      for (std::size_t k = 0; k < K; ++k) a[k] = std::fabs(xr[k]);
      const float m = ops::max2(red::max(a, K), floor_x);
      const float inv = 127.0f / m;
      const float st = m / 127.0f;
      for (std::size_t k = 0; k < K; ++k) {
        const float q = ops::min2(ops::max2(std::floor(xr[k] * inv + 0.5f), -127.0f), 127.0f);
        codes_x_[n * K + k] = q;
        if (xhat != nullptr) xhat[n * K + k] = q * st;
      }
      step[n] = st;
    }
  });
}

// BitLinear's epilogue over y [N, M] holding f32(int32 acc): (acc · step_n) · scale.
void OpKernels::scale_bitlinear_outputs(std::size_t N, std::size_t M, float scale, float* y) {
  const float* step = step_.data();
  util::parallel_for(N, threads, grain_for(M), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t n = lo; n < hi; ++n)
      for (std::size_t m = 0; m < M; ++m) y[n * M + m] = (y[n * M + m] * step[n]) * scale;
  });
}

// BitLinear (ops/quant.hpp). The codes are small integers, so the int32
// accumulation Σ_k qx·qw is computed by the float GEMM on the codes: every
// partial sum is an integer of magnitude <= 127·K < 2^24 (K <= 131071), hence
// exact in float, and a zero sum is +0 as the int32 -> float conversion gives
// (the chain starts at +0 and an exact cancellation rounds to +0). The
// dequantized operands x̂ = q·step and Ŵ = q·scale are kept in aux for the
// backward (the spec recomputes them: same bits).
void OpKernels::run(const ops::QuantLinearConfig& c, const ops::BitLinear::FwdArgs<float>& args, Aux& aux) {
  const auto& [x, w, y] = args;
  ops::BitLinear::validate(c);
  const std::size_t N = c.rows, K = c.in, M = c.out;
  // Weights: per-tensor absmean ternary (ops::quantize_ternary).
  const std::size_t nw = M * K;
  absw_.resize(nw);
  codes_w_.resize(nw);
  elementwise(nw, threads, [&](std::size_t i) { absw_[i] = std::fabs(w[i]); });
  const float mw = ops::max2(red::sum_parallel(absw_.data(), nw, threads) / static_cast<float>(nw),
                             static_cast<float>(1e-5));
  const float invw = 1.0f / mw;
  aux.b.resize(nw);
  elementwise(nw, threads, [&](std::size_t i) {
    const float q = ops::min2(ops::max2(std::floor(w[i] * invw + 0.5f), -1.0f), 1.0f);
    codes_w_[i] = q;
    aux.b[i] = q * mw;  // Ŵ
  });
  aux.s = mw;
  // Activations: per-row absmax int8 (ops::quantize_rows), rows on threads.
  aux.a.resize(N * K);
  quantize_bitlinear_activations(x, N, K, aux.a.data());
  gemm_xwt(N, M, K, codes_x_.data(), codes_w_.data(), y, threads);  // = f32(int32 acc), exactly
  scale_bitlinear_outputs(N, M, mw, y);
}

// STE backward: dx = dy·Ŵ, dW = dyᵀ·x̂ (canonical GEMM chains).
void OpKernels::run(const ops::QuantLinearConfig& c, const ops::BitLinear::BwdArgs<float>& args, Aux& aux) {
  const auto& [x, w, dy, dx, dw] = args;
  if (aux.a.size() != c.rows * c.in || aux.b.size() != c.out * c.in) {
    Aux fresh;  // no forward kept (never the case inside the model): recompute
    std::vector<float> y(c.rows * c.out);
    forward<ops::BitLinear>(c, {.x = x, .w = w, .y = y.data()}, fresh);
    aux = std::move(fresh);
  }
  gemm_dyw(c.rows, c.out, c.in, dy, aux.b.data(), dx, threads);
  if (dw != nullptr) gemm_dytx(c.rows, c.out, c.in, dy, aux.a.data(), dw, threads);  // nullptr: a frozen weight
}


namespace {
// Code i of a TERNARY2 tensor (field - 1).
inline float ternary2_code(const std::uint8_t* codes, std::size_t i) {
  return static_cast<float>(static_cast<int>((codes[i >> 2] >> (2 * (i & 3))) & 3u) - 1);
}
}  // namespace

void OpKernels::bitlinear_codes_fwd(const ops::QuantLinearConfig& c, const float* x, const std::uint8_t* codes,
                                    float scale, float* y) {
  ops::BitLinear::validate(c);
  const std::size_t N = c.rows, K = c.in, M = c.out;
  quantize_bitlinear_activations(x, N, K, nullptr);  // as run(BitLinear) quantizes them
  // y = x_codes · W_codesᵀ: B(k, m) = code[m, k], a column tile = rows m of W.
  const std::size_t tw = tile_width();
  gemm_b_tiles(N, M, K, codes_x_.data(), K, 1,
               [&](std::size_t j0, std::size_t jn, float* tile) {
                 for (std::size_t j = 0; j < jn; ++j)
                   for (std::size_t k = 0; k < K; ++k) tile[k * tw + j] = ternary2_code(codes, (j0 + j) * K + k);
               },
               y, M, threads);
  scale_bitlinear_outputs(N, M, scale, y);
}

void OpKernels::bitlinear_codes_bwd(const ops::QuantLinearConfig& c, const std::uint8_t* codes, float scale,
                                    const float* dy, float* dx) {
  ops::BitLinear::validate(c);
  const std::size_t K = c.in, M = c.out;
  // dx = dy·Ŵ: B(m, k) = Ŵ[m, k] = code[m, k] · scale, a column tile = columns k of W.
  const std::size_t tw = tile_width();
  gemm_b_tiles(c.rows, K, M, dy, M, 1,
               [&](std::size_t j0, std::size_t jn, float* tile) {
                 for (std::size_t m = 0; m < M; ++m)
                   for (std::size_t j = 0; j < jn; ++j) tile[m * tw + j] = ternary2_code(codes, m * K + j0 + j) * scale;
               },
               dx, K, threads);
}

// --- the int8 unit linear (ops/units.hpp) ---------------------------------------

// The quantizers and the epilogue are shared with the fused units paths
// (units_quant.hpp, ops_units_fused.cpp).
namespace units {

// quantize_rows: row n of x [rows, cols] to int8 codes q[n*cols + j] and its
// step (m / 127); rows on threads, each row's absmax by the canonical max
// (any order gives its bits), the codes as the spec rounds them.
float quantize_row_i8(const float* xr, std::size_t cols, float floor_value, std::int8_t* q, float* abs_scratch) {
  for (std::size_t j = 0; j < cols; ++j) abs_scratch[j] = std::fabs(xr[j]);
  const float m = ops::max2(red::max(abs_scratch, cols), floor_value);
  const float inv = 127.0f / m;
  for (std::size_t j = 0; j < cols; ++j)
    q[j] = static_cast<std::int8_t>(ops::min2(ops::max2(std::floor(xr[j] * inv + 0.5f), -127.0f), 127.0f));
  return m / 127.0f;
}

void quantize_rows_i8(const float* x, std::size_t rows, std::size_t cols, float floor_value, std::int8_t* q,
                      float* step, int threads) {
  util::parallel_for(rows, threads, grain_for(3 * cols), [&](std::size_t lo, std::size_t hi) {
    float* a = scratch(cols);
    for (std::size_t n = lo; n < hi; ++n) step[n] = quantize_row_i8(x + n * cols, cols, floor_value, q + n * cols, a);
  });
}

// quantize_cols: column j of x [rows, cols] over the rows to codes stored
// transposed, q[j*rows + n], and its step; runs of columns on threads, each
// reading x row by row (its columns' running absmax, then their codes).
void quantize_cols_i8(const float* x, std::size_t rows, std::size_t cols, float floor_value, std::int8_t* q,
                      float* step, int threads) {
  util::parallel_for(cols, threads, std::max<std::size_t>(16, grain_for(3 * rows)), [&](std::size_t lo, std::size_t hi) {
    float* inv = scratch(hi - lo);
    for (std::size_t j = lo; j < hi; ++j) step[j] = 0.0f;
    for (std::size_t n = 0; n < rows; ++n)
      for (std::size_t j = lo; j < hi; ++j) step[j] = ops::max2(step[j], std::fabs(x[n * cols + j]));
    for (std::size_t j = lo; j < hi; ++j) {
      const float m = ops::max2(step[j], floor_value);
      inv[j - lo] = 127.0f / m;
      step[j] = m / 127.0f;
    }
    for (std::size_t n = 0; n < rows; ++n)
      for (std::size_t j = lo; j < hi; ++j)
        q[j * rows + n] = static_cast<std::int8_t>(
            ops::min2(ops::max2(std::floor(x[n * cols + j] * inv[j - lo] + 0.5f), -127.0f), 127.0f));
  });
}

// out[i*J + j] = ((f32(acc[i*J + j]) * sa[i]) * sb[j]) (+ bias[j]); rows on threads.
void unit_epilogue(const std::int32_t* acc, const float* sa, const float* sb, const float* bias, std::size_t I,
                   std::size_t J, float* out, int threads) {
  util::parallel_for(I, threads, grain_for(J), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i)
      for (std::size_t j = 0; j < J; ++j) {
        const float v = (static_cast<float>(acc[i * J + j]) * sa[i]) * sb[j];
        out[i * J + j] = bias != nullptr ? v + bias[j] : v;
      }
  });
}

// x̂ = q · step of codes by rows (the float STE backward's operands).
void dequantize_rows(const std::int8_t* q, const float* step, std::size_t rows, std::size_t cols, float* out,
                     int threads) {
  util::parallel_for(rows, threads, grain_for(cols), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t n = lo; n < hi; ++n)
      for (std::size_t j = 0; j < cols; ++j) out[n * cols + j] = static_cast<float>(q[n * cols + j]) * step[n];
  });
}

void bias_gradient(const float* dy, std::size_t N, std::size_t M, float* db, int threads) {
  column_sums(dy, N, M, db, threads);
}

}  // namespace units
using namespace units;

// Forward: x by rows, W by output rows, the exact int32 product (cpu::int8_gemm_nt),
// the epilogue ((f32(acc) * step_n) * wstep_m) + b_m.
void OpKernels::run(const ops::Int8LinearConfig& c, const ops::Int8Linear::FwdArgs<float>& args) {
  const auto& [x, w, b, y] = args;
  ops::Int8Linear::validate(c);
  const std::size_t N = c.rows, K = c.in, M = c.out;
  const auto floor_v = static_cast<float>(ops::Int8Linear::kFloor);
  units_.qa.resize(N * K);
  units_.qb.resize(M * K);
  units_.sa.resize(N);
  units_.sb.resize(M);
  units_.acc.resize(N * M);
  quantize_rows_i8(x, N, K, floor_v, units_.qa.data(), units_.sa.data(), threads);
  quantize_rows_i8(w, M, K, floor_v, units_.qb.data(), units_.sb.data(), threads);
  int8_gemm_nt(units_.qa.data(), units_.qb.data(), units_.acc.data(), N, M, K, threads);
  unit_epilogue(units_.acc.data(), units_.sa.data(), units_.sb.data(), c.bias ? b : nullptr, N, M, y, threads);
}

// Backward. Float STE: dx = dy·Ŵ, dW = dyᵀ·x̂ with x̂, Ŵ quantized again (the
// forward's codes) and dequantized, on the canonical float GEMM. Unit: dx from
// dy by rows and W by columns, dW from dy by columns and x by columns, each an
// exact int32 product and its epilogue. db: column sums of dy.
void OpKernels::run(const ops::Int8LinearConfig& c, const ops::Int8Linear::BwdArgs<float>& args) {
  const auto& [x, w, dy, dx, dw, db] = args;
  ops::Int8Linear::validate(c);
  const std::size_t N = c.rows, K = c.in, M = c.out;
  const auto floor_v = static_cast<float>(ops::Int8Linear::kFloor);
  const auto floor_g = static_cast<float>(ops::Int8Linear::kGradFloor);
  if (!c.unit_backward) {
    units_.qa.resize(std::max(N, M) * K);
    units_.sa.resize(std::max(N, M));
    units_.deq.resize(std::max(N, M) * K);
    quantize_rows_i8(w, M, K, floor_v, units_.qa.data(), units_.sa.data(), threads);
    dequantize_rows(units_.qa.data(), units_.sa.data(), M, K, units_.deq.data(), threads);
    gemm_dyw(N, M, K, dy, units_.deq.data(), dx, threads);
    quantize_rows_i8(x, N, K, floor_v, units_.qa.data(), units_.sa.data(), threads);
    dequantize_rows(units_.qa.data(), units_.sa.data(), N, K, units_.deq.data(), threads);
    gemm_dytx(N, M, K, dy, units_.deq.data(), dw, threads);
  } else {
    units_.qa.resize(N * M);
    units_.qb.resize(std::max(N, M) * K);
    units_.sa.resize(std::max(N, M));
    units_.sb.resize(K);
    units_.acc.resize(std::max(N, M) * K);
    // dx[n,k] = (f32(Σ_m qa[n,m] qg[m,k]) * sa_n) * sg_k
    quantize_rows_i8(dy, N, M, floor_g, units_.qa.data(), units_.sa.data(), threads);
    quantize_cols_i8(w, M, K, floor_v, units_.qb.data(), units_.sb.data(), threads);  // [K, M]
    int8_gemm_nt(units_.qa.data(), units_.qb.data(), units_.acc.data(), N, K, M, threads);
    unit_epilogue(units_.acc.data(), units_.sa.data(), units_.sb.data(), nullptr, N, K, dx, threads);
    // dW[m,k] = (f32(Σ_n qc[n,m] qd[n,k]) * sc_m) * sd_k
    quantize_cols_i8(dy, N, M, floor_g, units_.qa.data(), units_.sa.data(), threads);  // [M, N]
    quantize_cols_i8(x, N, K, floor_v, units_.qb.data(), units_.sb.data(), threads);   // [K, N]
    int8_gemm_nt(units_.qa.data(), units_.qb.data(), units_.acc.data(), M, K, N, threads);
    unit_epilogue(units_.acc.data(), units_.sa.data(), units_.sb.data(), nullptr, M, K, dw, threads);
  }
  if (c.bias) column_sums(dy, N, M, db, threads);
}

// --- norms ----------------------------------------------------------------------

void OpKernels::run(const ops::NormConfig& c, const ops::LayerNorm::FwdArgs<float>& args) {
  const auto& [x, g, b, y, mean, rstd] = args;
  const std::size_t D = c.dim;
  const auto eps = static_cast<float>(c.eps);
  util::parallel_for(c.rows, threads, grain_for(4 * D), [&](std::size_t lo, std::size_t hi) {
    float* xc = scratch(D);
    for (std::size_t n = lo; n < hi; ++n) {
      const float* xr = x + n * D;
      const float mu = red::sum(xr, D) / static_cast<float>(D);
      for (std::size_t j = 0; j < D; ++j) xc[j] = xr[j] - mu;
      const float var = red::sumsq(xc, D) / static_cast<float>(D);
      const float rs = num::rsqrt(var + eps);
      float* yr = y + n * D;
      for (std::size_t j = 0; j < D; ++j) yr[j] = fma_rn(xc[j] * rs, g[j], b[j]);
      mean[n] = mu;
      rstd[n] = rs;
    }
  });
}

void OpKernels::run(const ops::NormConfig& c, const ops::LayerNorm::BwdArgs<float>& args) {
  const auto& [x, g, mean, rstd, dy, dx, dg, db] = args;
  const std::size_t D = c.dim, N = c.rows;
  xhat_.resize(N * D);
  util::parallel_for(N, threads, grain_for(4 * D), [&](std::size_t lo, std::size_t hi) {
    float* gr = scratch(D);
    for (std::size_t n = lo; n < hi; ++n) {
      const float mu = mean[n], rs = rstd[n];
      float* xh = xhat_.data() + n * D;
      const float* xr = x + n * D;
      const float* dyr = dy + n * D;
      for (std::size_t j = 0; j < D; ++j) {
        xh[j] = (xr[j] - mu) * rs;
        gr[j] = dyr[j] * g[j];
      }
      const float a = red::sum(gr, D) / static_cast<float>(D);
      const float bb = red::dot(gr, xh, D) / static_cast<float>(D);
      float* dxr = dx + n * D;
      for (std::size_t j = 0; j < D; ++j) dxr[j] = (gr[j] - fma_rn(xh[j], bb, a)) * rs;
    }
  });
  column_dots(dy, xhat_.data(), N, D, dg, threads);
  column_sums(dy, N, D, db, threads);
}

void OpKernels::run(const ops::NormConfig& c, const ops::RmsNorm::FwdArgs<float>& args) {
  const auto& [x, w, y, rstd] = args;
  const std::size_t D = c.dim;
  const auto eps = static_cast<float>(c.eps);
  util::parallel_for(c.rows, threads, grain_for(4 * D), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t n = lo; n < hi; ++n) {
      const float* xr = x + n * D;
      const float ms = red::sumsq(xr, D) / static_cast<float>(D);
      const float rs = num::rsqrt(ms + eps);
      float* yr = y + n * D;
      for (std::size_t j = 0; j < D; ++j) yr[j] = (xr[j] * rs) * w[j];
      rstd[n] = rs;
    }
  });
}

void OpKernels::run(const ops::NormConfig& c, const ops::RmsNorm::BwdArgs<float>& args) {
  const auto& [x, w, rstd, dy, dx, dw] = args;
  const std::size_t D = c.dim, N = c.rows;
  xhat_.resize(N * D);
  util::parallel_for(N, threads, grain_for(4 * D), [&](std::size_t lo, std::size_t hi) {
    float* gr = scratch(D);
    for (std::size_t n = lo; n < hi; ++n) {
      const float rs = rstd[n];
      float* xh = xhat_.data() + n * D;
      const float* xr = x + n * D;
      const float* dyr = dy + n * D;
      for (std::size_t j = 0; j < D; ++j) {
        xh[j] = xr[j] * rs;
        gr[j] = dyr[j] * w[j];
      }
      const float bb = red::dot(gr, xh, D) / static_cast<float>(D);
      float* dxr = dx + n * D;
      for (std::size_t j = 0; j < D; ++j) dxr[j] = (gr[j] - xh[j] * bb) * rs;
    }
  });
  column_dots(dy, xhat_.data(), N, D, dw, threads);
}

// --- activations ------------------------------------------------------------------

// GELU: t = tanh(u(x)) is kept for the backward. Per piece: u, then the
// tanh of the whole run (tanh_n: num::tanh bit for bit), then y.
void OpKernels::run(const ops::ElementwiseConfig& c, const ops::Gelu::FwdArgs<float>& args, Aux& aux) {
  const auto& [x, y] = args;
  aux.a.resize(c.n);
  float* ts = aux.a.data();
  util::parallel_for(c.n, threads, grain_for(16), [&](std::size_t lo, std::size_t hi) {
    // In runs that stay in L1 (three passes over a run, one over memory).
    for (std::size_t r0 = lo; r0 < hi; r0 += kL1Run) {
      const std::size_t r1 = std::min(hi, r0 + kL1Run);
      for (std::size_t i = r0; i < r1; ++i) {
        float x2;
        ts[i] = ops::Gelu::inner(x[i], x2);
      }
      tanh_n(ts + r0, ts + r0, r1 - r0);
      for (std::size_t i = r0; i < r1; ++i) y[i] = (0.5f * x[i]) * (1.0f + ts[i]);
    }
  });
}

void OpKernels::run(const ops::ElementwiseConfig& c, const ops::Gelu::BwdArgs<float>& args, Aux& aux) {
  const auto& [x, dy, dx] = args;
  const bool kept = aux.a.size() == c.n;
  const float* ts = aux.a.data();
  const auto k0 = static_cast<float>(ops::Gelu::kSqrt2OverPi);
  const auto k3 = static_cast<float>(ops::Gelu::kCubic3);
  // dx = dy · GELU'(x) from t = tanh(u(x)): the spec's expression.
  auto dgelu = [k0, k3](float xi, float x2, float t, float d) {
    const float sech2 = fma_rn(-t, t, 1.0f);
    const float du = k0 * fma_rn(k3, x2, 1.0f);
    const float dydx = fma_rn((0.5f * xi) * sech2, du, 0.5f * (1.0f + t));
    return d * dydx;
  };
  if (kept) {  // tanh kept by the forward: a loop with no call in it, so it vectorizes
    util::parallel_for(c.n, threads, grain_for(1), [&](std::size_t lo, std::size_t hi) {
      for (std::size_t i = lo; i < hi; ++i) {
        float x2;
        (void)ops::Gelu::inner(x[i], x2);
        dx[i] = dgelu(x[i], x2, ts[i], dy[i]);
      }
    });
    return;
  }
  elementwise(c.n, threads, [&](std::size_t i) {
    float x2;
    const float t = num::tanh(ops::Gelu::inner(x[i], x2));
    dx[i] = dgelu(x[i], x2, t, dy[i]);
  });
}

// SwiGLU: σ(gate) is kept for the backward.
void OpKernels::run(const ops::ElementwiseConfig& c, const ops::SwiGlu::FwdArgs<float>& args, Aux& aux) {
  const auto& [gate, up, y] = args;
  aux.a.resize(c.n);
  float* sg = aux.a.data();
  util::parallel_for(c.n, threads, grain_for(16), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t r0 = lo; r0 < hi; r0 += kL1Run) {  // in runs that stay in L1
      const std::size_t r1 = std::min(hi, r0 + kL1Run);
      sigmoid_n(gate + r0, sg + r0, r1 - r0);
      for (std::size_t i = r0; i < r1; ++i) y[i] = (gate[i] * sg[i]) * up[i];
    }
  });
}

void OpKernels::run(const ops::ElementwiseConfig& c, const ops::SwiGlu::BwdArgs<float>& args, Aux& aux) {
  const auto& [gate, up, dy, dgate, dup] = args;
  const bool kept = aux.a.size() == c.n;
  const float* sg = aux.a.data();
  // The spec's expression from s = σ(gate).
  auto dswiglu = [&](std::size_t i, float s) {
    const float xg = gate[i];
    const float dsilu = s * fma_rn(xg, 1.0f - s, 1.0f);
    const float d = dy[i];
    dgate[i] = (d * up[i]) * dsilu;
    dup[i] = d * (xg * s);
  };
  if (kept) {  // σ kept by the forward: a loop with no call in it, so it vectorizes
    util::parallel_for(c.n, threads, grain_for(1), [&](std::size_t lo, std::size_t hi) {
      for (std::size_t i = lo; i < hi; ++i) dswiglu(i, sg[i]);
    });
    return;
  }
  elementwise(c.n, threads, [&](std::size_t i) { dswiglu(i, num::sigmoid(gate[i])); });
}

void OpKernels::run(const ops::ElementwiseConfig& c, const ops::ReluSqMul::FwdArgs<float>& args) {
  const auto& [gate, up, y] = args;
  elementwise(c.n, threads, [&](std::size_t i) {
    const float r = ops::max2(gate[i], 0.0f);
    y[i] = (r * r) * up[i];
  });
}

void OpKernels::run(const ops::ElementwiseConfig& c, const ops::ReluSqMul::BwdArgs<float>& args) {
  const auto& [gate, up, dy, dgate, dup] = args;
  elementwise(c.n, threads, [&](std::size_t i) {
    const float r = ops::max2(gate[i], 0.0f);
    const float d = dy[i];
    dgate[i] = (d * up[i]) * (2.0f * r);
    dup[i] = d * (r * r);
  });
}

void OpKernels::run(const ops::ElementwiseConfig& c, const ops::ResidualAdd::FwdArgs<float>& args) {
  const auto& [a, b, y] = args;
  elementwise(c.n, threads, [&](std::size_t i) { y[i] = a[i] + b[i]; });
}

// da = dy, db = dy: copies unless the caller routes them in place.
void OpKernels::run(const ops::ElementwiseConfig& c, const ops::ResidualAdd::BwdArgs<float>& args) {
  const auto& [dy, da, db] = args;
  if (da != dy) std::memcpy(da, dy, c.n * sizeof(float));
  if (db != dy) std::memcpy(db, dy, c.n * sizeof(float));
}

// --- RoPE -----------------------------------------------------------------------

const ops::Rope::Table<float>& OpKernels::rope_table(const ops::Rope::Config& c) {
  const ops::Rope::Config& k = rope_key_;
  const bool same = rope_valid_ && k.seq == c.seq && k.head_dim == c.head_dim && k.base == c.base &&
                    k.offset == c.offset;
  if (!same) {
    rope_tab_ = ops::Rope::table<float>(c);  // the spec's own table: the same bits
    rope_key_ = c;
    rope_valid_ = true;
  }
  return rope_tab_;
}

// y = R(±θ) x per head vector (ops::Rope::rotate), tokens on threads.
void OpKernels::rope_apply(const ops::Rope::Config& c, const float* x, float* y, bool inverse) {
  ops::Rope::validate(c);
  const auto& tab = rope_table(c);
  const std::size_t half = c.head_dim / 2;
  util::parallel_for(c.batch * c.seq, threads, grain_for(2 * c.heads * c.head_dim), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t r = lo; r < hi; ++r) {
      const std::size_t t = r % c.seq;
      const float* cs = tab.cos.data() + t * half;
      const float* sn = tab.sin.data() + t * half;
      for (std::size_t h = 0; h < c.heads; ++h) {
        const std::size_t base = (r * c.heads + h) * c.head_dim;
        for (std::size_t j = 0; j < half; ++j) {
          const std::size_t ia = base + ops::Rope::first(c, j), ib = base + ops::Rope::second(c, j);
          const float s = inverse ? -sn[j] : sn[j];
          const float a = x[ia], b = x[ib];
          y[ia] = a * cs[j] - b * s;
          y[ib] = b * cs[j] + a * s;
        }
      }
    }
  });
}

void OpKernels::run(const ops::Rope::Config& c, const ops::Rope::FwdArgs<float>& args) {
  rope_apply(c, args.x, args.y, false);
}
void OpKernels::run(const ops::Rope::Config& c, const ops::Rope::BwdArgs<float>& args) {
  rope_apply(c, args.dy, args.dx, true);
}

// --- cross-entropy ------------------------------------------------------------------

void OpKernels::run(const ops::CrossEntropy::Config& c, const ops::CrossEntropy::FwdArgs<float>& args) {
  const auto& [logits, targets, loss, lse] = args;
  const std::size_t V = c.vocab;
  for (std::size_t n = 0; n < c.rows; ++n)
    if (targets[n] >= 0) ops::CrossEntropy::target(c, targets[n]);  // throws like the spec
  util::parallel_for(c.rows, threads, grain_for(8 * V), [&](std::size_t lo, std::size_t hi) {
    float* e = scratch(V);
    for (std::size_t n = lo; n < hi; ++n) {
      const float* z = logits + n * V;
      const float m = red::max(z, V);
      for (std::size_t j = 0; j < V; ++j) e[j] = z[j] - m;
      exp_n(e, e, V);  // e_j = exp(z_j - m)
      const float l = m + num::log(red::sum(e, V));
      lse[n] = l;
      const Index t = targets[n];
      loss[n] = t < 0 ? 0.0f : l - z[static_cast<std::size_t>(t)];
    }
  });
}

void OpKernels::run(const ops::CrossEntropy::Config& c, const ops::CrossEntropy::BwdArgs<float>& args) {
  const auto& [logits, targets, lse, dloss, dlogits] = args;
  const std::size_t V = c.vocab;
  util::parallel_for(c.rows, threads, grain_for(8 * V), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t n = lo; n < hi; ++n) {
      const Index t = targets[n];
      float* dz = dlogits + n * V;
      if (t < 0) {
        std::fill(dz, dz + V, 0.0f);
        continue;
      }
      const auto tt = static_cast<std::size_t>(t);
      const float* z = logits + n * V;
      const float l = lse[n], dl = dloss[n];
      // p_j = exp(z_j - lse) (dz may alias z: each j reads z_j before writing dz_j).
      for (std::size_t j = 0; j < V; ++j) dz[j] = z[j] - l;
      exp_n(dz, dz, V);
      for (std::size_t j = 0; j < V; ++j) dz[j] = (j == tt ? dz[j] - 1.0f : dz[j]) * dl;
    }
  });
}

void OpKernels::add_into(std::size_t n, float* acc, const float* x) {
  elementwise(n, threads, [&](std::size_t i) { acc[i] = acc[i] + x[i]; });
}

}  // namespace lockstep::cpu
