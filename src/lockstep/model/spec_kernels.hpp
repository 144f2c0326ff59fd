// The specification kernels: every op of the model computed by its op
// specification (src/lockstep/ops/), templated on the scalar. The engine
// (transformer.hpp) runs the layer lists on a kernel set; with this one the
// model IS the composition of the op specs: each call copies its arguments
// into the op's Inputs, calls Op::forward / Op::backward, and copies the
// results out. Slow (copies, single thread) and obviously right: it is the
// reference the fast CPU kernels (backend/cpu/ops.hpp) must equal bit for bit
// in float, and what the whole-model gradient check differentiates in double.
//
// Kernel-set interface (shared with the fast set; pointers are row-major
// arrays with the shapes of the op's Inputs/Outputs; "may alias" is stated
// where an output may be the same array as an input):
//   embedding_fwd/bwd, positions_fwd/bwd, linear_fwd/bwd, bitlinear_fwd/bwd,
//   layernorm_fwd/bwd, rmsnorm_fwd/bwd, gelu_fwd/bwd, swiglu_fwd/bwd,
//   relu2mul_fwd/bwd, residual_fwd/bwd, rope_fwd/bwd, attention_fwd/bwd,
//   ce_fwd/bwd, add_into.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "lockstep/model/kernel_aux.hpp"
#include "lockstep/ops/all.hpp"

namespace lockstep::model {

template <class T>
class SpecKernels {
 public:
  using Index = ops::Index;

  // BitLinear under the whole-model gradient check. Forward: the op.
  // Record: the op, and its inputs are kept (in call order). Surrogate: the
  // straight-through surrogate (ops/quant.hpp) with the detached corrections
  // taken at the recorded inputs of the same call site — the function whose
  // derivative the STE backward is, which finite differences can see.
  enum class Quant { Forward, Record, Surrogate };
  Quant quant = Quant::Forward;

  // Called by the engine at the start of every forward pass.
  void begin_forward() {
    next_point_ = 0;
    if (quant == Quant::Record) points_.clear();
  }

  void embedding_fwd(const ops::Embedding::Config& c, const Index* ids, const T* wte, T* y) {
    ops::Embedding::Inputs<T> in{idx({c.tokens}, ids), ten({c.vocab, c.dim}, wte)};
    put(ops::Embedding::forward<T>(c, in).y, y);
  }
  void embedding_bwd(const ops::Embedding::Config& c, const Index* ids, const T* dy, T* dwte) {
    ops::Embedding::Inputs<T> in{idx({c.tokens}, ids), Tensor<T>({c.vocab, c.dim})};
    ops::Embedding::Outputs<T> d{ten({c.tokens, c.dim}, dy)};
    put(ops::Embedding::backward<T>(c, in, {}, d).wte, dwte);
  }

  void positions_fwd(const ops::LearnedPositions::Config& c, const T* x, const T* wpe, T* y) {
    ops::LearnedPositions::Inputs<T> in{ten({c.batch, c.seq, c.dim}, x), ten({c.max_seq, c.dim}, wpe)};
    put(ops::LearnedPositions::forward<T>(c, in).y, y);
  }
  // dx may alias dy.
  void positions_bwd(const ops::LearnedPositions::Config& c, const T* dy, T* dx, T* dwpe) {
    ops::LearnedPositions::Outputs<T> d{ten({c.batch, c.seq, c.dim}, dy)};
    const auto g = ops::LearnedPositions::backward<T>(c, {}, {}, d);
    put(g.x, dx);
    put(g.wpe, dwpe);
  }

  // b may be null (no bias; c.bias false).
  void linear_fwd(const ops::Linear::Config& c, const T* x, const T* w, const T* b, T* y) {
    ops::Linear::Inputs<T> in{ten({c.rows, c.in}, x), ten({c.out, c.in}, w), {}};
    if (c.bias) in.b = ten({c.out}, b);
    put(ops::Linear::forward<T>(c, in).y, y);
  }
  void linear_bwd(const ops::Linear::Config& c, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db) {
    ops::Linear::Inputs<T> in{ten({c.rows, c.in}, x), ten({c.out, c.in}, w), {}};
    if (c.bias) in.b = Tensor<T>({c.out});
    ops::Linear::Outputs<T> d{ten({c.rows, c.out}, dy)};
    const auto g = ops::Linear::backward<T>(c, in, {}, d);
    put(g.x, dx);
    put(g.w, dw);
    if (c.bias) put(g.b, db);
  }

  void bitlinear_fwd(const ops::QuantLinearConfig& c, const T* x, const T* w, T* y, Aux&) {
    ops::BitLinear::Inputs<T> in{ten({c.rows, c.in}, x), ten({c.out, c.in}, w)};
    if (quant == Quant::Surrogate) {
      if (next_point_ >= points_.size()) throw std::logic_error("spec kernels: no recorded BitLinear point");
      put(ops::BitLinear::surrogate<T>(c, points_[next_point_++], in).y, y);
      return;
    }
    if (quant == Quant::Record) points_.push_back(in);
    put(ops::BitLinear::forward<T>(c, in).y, y);
  }
  void bitlinear_bwd(const ops::QuantLinearConfig& c, const T* x, const T* w, const T* dy, T* dx, T* dw, Aux&) {
    ops::BitLinear::Inputs<T> in{ten({c.rows, c.in}, x), ten({c.out, c.in}, w)};
    ops::BitLinear::Outputs<T> d{ten({c.rows, c.out}, dy)};
    const auto g = ops::BitLinear::backward<T>(c, in, {}, d);
    put(g.x, dx);
    put(g.w, dw);
  }

  void layernorm_fwd(const ops::NormConfig& c, const T* x, const T* g, const T* b, T* y, T* mean, T* rstd) {
    ops::LayerNorm::Inputs<T> in{ten({c.rows, c.dim}, x), ten({c.dim}, g), ten({c.dim}, b)};
    const auto o = ops::LayerNorm::forward<T>(c, in);
    put(o.y, y);
    put(o.mean, mean);
    put(o.rstd, rstd);
  }
  void layernorm_bwd(const ops::NormConfig& c, const T* x, const T* g, const T* mean, const T* rstd, const T* dy,
                     T* dx, T* dg, T* db) {
    ops::LayerNorm::Inputs<T> in{ten({c.rows, c.dim}, x), ten({c.dim}, g), Tensor<T>({c.dim})};
    ops::LayerNorm::Outputs<T> o{{}, ten({c.rows}, mean), ten({c.rows}, rstd)};
    ops::LayerNorm::Outputs<T> d{ten({c.rows, c.dim}, dy), {}, {}};
    const auto gr = ops::LayerNorm::backward<T>(c, in, o, d);
    put(gr.x, dx);
    put(gr.gamma, dg);
    put(gr.beta, db);
  }

  void rmsnorm_fwd(const ops::NormConfig& c, const T* x, const T* w, T* y, T* rstd) {
    ops::RmsNorm::Inputs<T> in{ten({c.rows, c.dim}, x), ten({c.dim}, w)};
    const auto o = ops::RmsNorm::forward<T>(c, in);
    put(o.y, y);
    put(o.rstd, rstd);
  }
  void rmsnorm_bwd(const ops::NormConfig& c, const T* x, const T* w, const T* rstd, const T* dy, T* dx, T* dw) {
    ops::RmsNorm::Inputs<T> in{ten({c.rows, c.dim}, x), ten({c.dim}, w)};
    ops::RmsNorm::Outputs<T> o{{}, ten({c.rows}, rstd)};
    ops::RmsNorm::Outputs<T> d{ten({c.rows, c.dim}, dy), {}};
    const auto g = ops::RmsNorm::backward<T>(c, in, o, d);
    put(g.x, dx);
    put(g.w, dw);
  }

  void gelu_fwd(const ops::ElementwiseConfig& c, const T* x, T* y, Aux&) {
    put(ops::Gelu::forward<T>(c, {ten({c.n}, x)}).y, y);
  }
  void gelu_bwd(const ops::ElementwiseConfig& c, const T* x, const T* dy, T* dx, Aux&) {
    put(ops::Gelu::backward<T>(c, {ten({c.n}, x)}, {}, {ten({c.n}, dy)}).x, dx);
  }
  void swiglu_fwd(const ops::ElementwiseConfig& c, const T* gate, const T* up, T* y, Aux&) {
    put(ops::SwiGlu::forward<T>(c, {ten({c.n}, gate), ten({c.n}, up)}).y, y);
  }
  void swiglu_bwd(const ops::ElementwiseConfig& c, const T* gate, const T* up, const T* dy, T* dgate, T* dup,
                  Aux&) {
    const auto g = ops::SwiGlu::backward<T>(c, {ten({c.n}, gate), ten({c.n}, up)}, {}, {ten({c.n}, dy)});
    put(g.gate, dgate);
    put(g.up, dup);
  }
  void relu2mul_fwd(const ops::ElementwiseConfig& c, const T* gate, const T* up, T* y, Aux&) {
    put(ops::ReluSqMul::forward<T>(c, {ten({c.n}, gate), ten({c.n}, up)}).y, y);
  }
  void relu2mul_bwd(const ops::ElementwiseConfig& c, const T* gate, const T* up, const T* dy, T* dgate, T* dup,
                    Aux&) {
    const auto g = ops::ReluSqMul::backward<T>(c, {ten({c.n}, gate), ten({c.n}, up)}, {}, {ten({c.n}, dy)});
    put(g.gate, dgate);
    put(g.up, dup);
  }
  void residual_fwd(const ops::ElementwiseConfig& c, const T* a, const T* b, T* y) {
    put(ops::ResidualAdd::forward<T>(c, {ten({c.n}, a), ten({c.n}, b)}).y, y);
  }
  // da and db may alias dy (the engine routes the gradient without a copy).
  void residual_bwd(const ops::ElementwiseConfig& c, const T* dy, T* da, T* db) {
    const auto g = ops::ResidualAdd::backward<T>(c, {}, {}, {ten({c.n}, dy)});
    put(g.a, da);
    put(g.b, db);
  }

  void rope_fwd(const ops::Rope::Config& c, const T* x, T* y) {
    put(ops::Rope::forward<T>(c, {ten({c.batch, c.seq, c.heads, c.head_dim}, x)}).y, y);
  }
  void rope_bwd(const ops::Rope::Config& c, const T* dy, T* dx) {
    put(ops::Rope::backward<T>(c, {}, {}, {ten({c.batch, c.seq, c.heads, c.head_dim}, dy)}).x, dx);
  }

  // q: rows of q_heads*head_dim values, ldq apart (one row per token); k, v:
  // rows of kv_heads*head_dim, ldkv apart; o, do: contiguous [tokens,
  // q_heads*head_dim]; lse [batch, q_heads, seq]; dq/dk/dv with ldq/ldkv.
  void attention_fwd(const ops::Attention::Config& c, const T* q, std::size_t ldq, const T* k, const T* v,
                     std::size_t ldkv, T* o, T* lse) {
    const auto in = gather_qkv(c, q, ldq, k, v, ldkv);
    const auto out = ops::Attention::forward<T>(c, in);
    put(out.o, o);
    put(out.lse, lse);
  }
  void attention_bwd(const ops::Attention::Config& c, const T* q, std::size_t ldq, const T* k, const T* v,
                     std::size_t ldkv, const T* o, const T* lse, const T* dout, T* dq, T* dk, T* dv) {
    const auto in = gather_qkv(c, q, ldq, k, v, ldkv);
    const Shape oshape{c.batch, c.seq, c.q_heads, c.head_dim};
    ops::Attention::Outputs<T> out{ten(oshape, o), ten({c.batch, c.q_heads, c.seq}, lse)};
    ops::Attention::Outputs<T> d{ten(oshape, dout), {}};
    const auto g = ops::Attention::backward<T>(c, in, out, d);
    scatter_rows(g.q, c.q_heads * c.head_dim, dq, ldq);
    scatter_rows(g.k, c.kv_heads * c.head_dim, dk, ldkv);
    scatter_rows(g.v, c.kv_heads * c.head_dim, dv, ldkv);
  }

  void ce_fwd(const ops::CrossEntropy::Config& c, const T* logits, const Index* targets, T* loss, T* lse) {
    ops::CrossEntropy::Inputs<T> in{ten({c.rows, c.vocab}, logits), idx({c.rows}, targets)};
    const auto o = ops::CrossEntropy::forward<T>(c, in);
    put(o.loss, loss);
    put(o.lse, lse);
  }
  // dlogits may alias logits.
  void ce_bwd(const ops::CrossEntropy::Config& c, const T* logits, const Index* targets, const T* lse,
              const T* dloss, T* dlogits) {
    ops::CrossEntropy::Inputs<T> in{ten({c.rows, c.vocab}, logits), idx({c.rows}, targets)};
    ops::CrossEntropy::Outputs<T> o{{}, ten({c.rows}, lse)};
    ops::CrossEntropy::Outputs<T> d{ten({c.rows}, dloss), {}};
    put(ops::CrossEntropy::backward<T>(c, in, o, d).logits, dlogits);
  }

  // The gradient of a tensor read by several ops: acc = acc + x, element-wise.
  void add_into(std::size_t n, T* acc, const T* x) {
    for (std::size_t i = 0; i < n; ++i) acc[i] = acc[i] + x[i];
  }

 private:
  static Tensor<T> ten(Shape s, const T* p) {
    Tensor<T> t(std::move(s));
    for (std::size_t i = 0; i < t.numel(); ++i) t[i] = p[i];
    return t;
  }
  static Tensor<Index> idx(Shape s, const Index* p) {
    Tensor<Index> t(std::move(s));
    for (std::size_t i = 0; i < t.numel(); ++i) t[i] = p[i];
    return t;
  }
  static void put(const Tensor<T>& t, T* dst) {
    for (std::size_t i = 0; i < t.numel(); ++i) dst[i] = t[i];
  }
  static Tensor<T> gather_rows(Shape s, const T* p, std::size_t width, std::size_t ld) {
    Tensor<T> t(std::move(s));
    const std::size_t rows = t.numel() / width;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t e = 0; e < width; ++e) t[r * width + e] = p[r * ld + e];
    return t;
  }
  static void scatter_rows(const Tensor<T>& t, std::size_t width, T* p, std::size_t ld) {
    const std::size_t rows = t.numel() / width;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t e = 0; e < width; ++e) p[r * ld + e] = t[r * width + e];
  }
  static ops::Attention::Inputs<T> gather_qkv(const ops::Attention::Config& c, const T* q, std::size_t ldq,
                                              const T* k, const T* v, std::size_t ldkv) {
    return {gather_rows({c.batch, c.seq, c.q_heads, c.head_dim}, q, c.q_heads * c.head_dim, ldq),
            gather_rows({c.batch, c.seq, c.kv_heads, c.head_dim}, k, c.kv_heads * c.head_dim, ldkv),
            gather_rows({c.batch, c.seq, c.kv_heads, c.head_dim}, v, c.kv_heads * c.head_dim, ldkv)};
  }

  std::vector<ops::BitLinear::Inputs<T>> points_;
  std::size_t next_point_ = 0;
};

}  // namespace lockstep::model
