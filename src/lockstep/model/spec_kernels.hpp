// The specification kernels: every op of the model computed by its op
// specification (src/lockstep/ops/), templated on the scalar. The engine
// (transformer.hpp) runs the layer lists on a kernel set; with this one the
// model IS the composition of the op specs: each call copies its arguments
// into the op's Inputs, calls Op::forward / Op::backward, and copies the
// results out. Slow (copies, single thread) and obviously right: it is the
// reference the fast CPU kernels (backend/cpu/ops.hpp) must equal bit for bit
// in float, and what the whole-model gradient check differentiates in double.
//
// Kernel-set interface (shared with the fast sets): a run(config, args)
// overload per op and direction, called by op type through
// ad::KeyedKernels (ad/kernel_set.hpp); the args are the op's FwdArgs/
// BwdArgs (ops/kernel_args.hpp: named row-major arrays with the shapes of the
// op's Inputs/Outputs, and the outputs that may alias an input); add_into.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "lockstep/ad/kernel_set.hpp"
#include "lockstep/ad/legacy_kernel_names.hpp"
#include "lockstep/model/kernel_aux.hpp"
#include "lockstep/ops/all.hpp"

namespace lockstep::model {

template <class T>
class SpecKernels : public ad::KeyedKernels<SpecKernels<T>, T>, public ad::LegacyKernelNames<SpecKernels<T>, T> {
 public:
  using Index = ops::Index;
  using Aux = model::Aux;

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

  void run(const ops::Embedding::Config& c, const ops::Embedding::FwdArgs<T>& a) {
    ops::Embedding::Inputs<T> in{idx({c.tokens}, a.ids), ten({c.vocab, c.dim}, a.wte)};
    put(ops::Embedding::forward<T>(c, in).y, a.y);
  }
  void run(const ops::Embedding::Config& c, const ops::Embedding::BwdArgs<T>& a) {
    ops::Embedding::Inputs<T> in{idx({c.tokens}, a.ids), Tensor<T>({c.vocab, c.dim})};
    ops::Embedding::Outputs<T> d{ten({c.tokens, c.dim}, a.dy)};
    put(ops::Embedding::backward<T>(c, in, {}, d).wte, a.dwte);
  }

  void run(const ops::LearnedPositions::Config& c, const ops::LearnedPositions::FwdArgs<T>& a) {
    ops::LearnedPositions::Inputs<T> in{ten({c.batch, c.seq, c.dim}, a.x), ten({c.max_seq, c.dim}, a.wpe)};
    put(ops::LearnedPositions::forward<T>(c, in).y, a.y);
  }
  void run(const ops::LearnedPositions::Config& c, const ops::LearnedPositions::BwdArgs<T>& a) {
    ops::LearnedPositions::Outputs<T> d{ten({c.batch, c.seq, c.dim}, a.dy)};
    const auto g = ops::LearnedPositions::backward<T>(c, {}, {}, d);
    put(g.x, a.dx);
    put(g.wpe, a.dwpe);
  }

  void run(const ops::Linear::Config& c, const ops::Linear::FwdArgs<T>& a) {
    ops::Linear::Inputs<T> in{ten({c.rows, c.in}, a.x), ten({c.out, c.in}, a.w), {}};
    if (c.bias) in.b = ten({c.out}, a.b);
    put(ops::Linear::forward<T>(c, in).y, a.y);
  }
  void run(const ops::Linear::Config& c, const ops::Linear::BwdArgs<T>& a) {
    ops::Linear::Inputs<T> in{ten({c.rows, c.in}, a.x), ten({c.out, c.in}, a.w), {}};
    if (c.bias) in.b = Tensor<T>({c.out});
    ops::Linear::Outputs<T> d{ten({c.rows, c.out}, a.dy)};
    const auto g = ops::Linear::backward<T>(c, in, {}, d);
    put(g.x, a.dx);
    put(g.w, a.dw);
    if (c.bias) put(g.b, a.db);
  }

  void run(const ops::QuantLinearConfig& c, const ops::BitLinear::FwdArgs<T>& a, Aux&) {
    ops::BitLinear::Inputs<T> in{ten({c.rows, c.in}, a.x), ten({c.out, c.in}, a.w)};
    if (quant == Quant::Surrogate) {
      if (next_point_ >= points_.size()) throw std::logic_error("spec kernels: no recorded BitLinear point");
      put(ops::BitLinear::surrogate<T>(c, points_[next_point_++], in).y, a.y);
      return;
    }
    if (quant == Quant::Record) points_.push_back(in);
    put(ops::BitLinear::forward<T>(c, in).y, a.y);
  }
  void run(const ops::QuantLinearConfig& c, const ops::BitLinear::BwdArgs<T>& a, Aux&) {
    ops::BitLinear::Inputs<T> in{ten({c.rows, c.in}, a.x), ten({c.out, c.in}, a.w)};
    ops::BitLinear::Outputs<T> d{ten({c.rows, c.out}, a.dy)};
    const auto g = ops::BitLinear::backward<T>(c, in, {}, d);
    put(g.x, a.dx);
    put(g.w, a.dw);
  }

  void run(const ops::NormConfig& c, const ops::LayerNorm::FwdArgs<T>& a) {
    ops::LayerNorm::Inputs<T> in{ten({c.rows, c.dim}, a.x), ten({c.dim}, a.gamma), ten({c.dim}, a.beta)};
    const auto o = ops::LayerNorm::forward<T>(c, in);
    put(o.y, a.y);
    put(o.mean, a.mean);
    put(o.rstd, a.rstd);
  }
  void run(const ops::NormConfig& c, const ops::LayerNorm::BwdArgs<T>& a) {
    ops::LayerNorm::Inputs<T> in{ten({c.rows, c.dim}, a.x), ten({c.dim}, a.gamma), Tensor<T>({c.dim})};
    ops::LayerNorm::Outputs<T> o{{}, ten({c.rows}, a.mean), ten({c.rows}, a.rstd)};
    ops::LayerNorm::Outputs<T> d{ten({c.rows, c.dim}, a.dy), {}, {}};
    const auto gr = ops::LayerNorm::backward<T>(c, in, o, d);
    put(gr.x, a.dx);
    put(gr.gamma, a.dgamma);
    put(gr.beta, a.dbeta);
  }

  void run(const ops::NormConfig& c, const ops::RmsNorm::FwdArgs<T>& a) {
    ops::RmsNorm::Inputs<T> in{ten({c.rows, c.dim}, a.x), ten({c.dim}, a.w)};
    const auto o = ops::RmsNorm::forward<T>(c, in);
    put(o.y, a.y);
    put(o.rstd, a.rstd);
  }
  void run(const ops::NormConfig& c, const ops::RmsNorm::BwdArgs<T>& a) {
    ops::RmsNorm::Inputs<T> in{ten({c.rows, c.dim}, a.x), ten({c.dim}, a.w)};
    ops::RmsNorm::Outputs<T> o{{}, ten({c.rows}, a.rstd)};
    ops::RmsNorm::Outputs<T> d{ten({c.rows, c.dim}, a.dy), {}};
    const auto g = ops::RmsNorm::backward<T>(c, in, o, d);
    put(g.x, a.dx);
    put(g.w, a.dw);
  }

  void run(const ops::ElementwiseConfig& c, const ops::Gelu::FwdArgs<T>& a, Aux&) {
    put(ops::Gelu::forward<T>(c, {ten({c.n}, a.x)}).y, a.y);
  }
  void run(const ops::ElementwiseConfig& c, const ops::Gelu::BwdArgs<T>& a, Aux&) {
    put(ops::Gelu::backward<T>(c, {ten({c.n}, a.x)}, {}, {ten({c.n}, a.dy)}).x, a.dx);
  }
  void run(const ops::ElementwiseConfig& c, const ops::SwiGlu::FwdArgs<T>& a, Aux&) {
    put(ops::SwiGlu::forward<T>(c, {ten({c.n}, a.gate), ten({c.n}, a.up)}).y, a.y);
  }
  void run(const ops::ElementwiseConfig& c, const ops::SwiGlu::BwdArgs<T>& a, Aux&) {
    const auto g = ops::SwiGlu::backward<T>(c, {ten({c.n}, a.gate), ten({c.n}, a.up)}, {}, {ten({c.n}, a.dy)});
    put(g.gate, a.dgate);
    put(g.up, a.dup);
  }
  void run(const ops::ElementwiseConfig& c, const ops::ReluSqMul::FwdArgs<T>& a) {
    put(ops::ReluSqMul::forward<T>(c, {ten({c.n}, a.gate), ten({c.n}, a.up)}).y, a.y);
  }
  void run(const ops::ElementwiseConfig& c, const ops::ReluSqMul::BwdArgs<T>& a) {
    const auto g = ops::ReluSqMul::backward<T>(c, {ten({c.n}, a.gate), ten({c.n}, a.up)}, {}, {ten({c.n}, a.dy)});
    put(g.gate, a.dgate);
    put(g.up, a.dup);
  }
  void run(const ops::ElementwiseConfig& c, const ops::ResidualAdd::FwdArgs<T>& a) {
    put(ops::ResidualAdd::forward<T>(c, {ten({c.n}, a.a), ten({c.n}, a.b)}).y, a.y);
  }
  // da and db may alias dy (the engine routes the gradient without a copy).
  void run(const ops::ElementwiseConfig& c, const ops::ResidualAdd::BwdArgs<T>& a) {
    const auto g = ops::ResidualAdd::backward<T>(c, {}, {}, {ten({c.n}, a.dy)});
    put(g.a, a.da);
    put(g.b, a.db);
  }

  void run(const ops::Rope::Config& c, const ops::Rope::FwdArgs<T>& a) {
    put(ops::Rope::forward<T>(c, {ten({c.batch, c.seq, c.heads, c.head_dim}, a.x)}).y, a.y);
  }
  void run(const ops::Rope::Config& c, const ops::Rope::BwdArgs<T>& a) {
    put(ops::Rope::backward<T>(c, {}, {}, {ten({c.batch, c.seq, c.heads, c.head_dim}, a.dy)}).x, a.dx);
  }

  void run(const ops::Attention::Config& c, const ops::Attention::FwdArgs<T>& a) {
    const auto in = gather_qkv(c, a.q, a.ldq, a.k, a.v, a.ldkv);
    const auto out = ops::Attention::forward<T>(c, in);
    put(out.o, a.o);
    put(out.lse, a.lse);
  }
  void run(const ops::Attention::Config& c, const ops::Attention::BwdArgs<T>& a) {
    const auto in = gather_qkv(c, a.q, a.ldq, a.k, a.v, a.ldkv);
    const Shape oshape{c.batch, c.seq, c.q_heads, c.head_dim};
    ops::Attention::Outputs<T> out{ten(oshape, a.o), ten({c.batch, c.q_heads, c.seq}, a.lse)};
    ops::Attention::Outputs<T> d{ten(oshape, a.dout), {}};
    const auto g = ops::Attention::backward<T>(c, in, out, d);
    scatter_rows(g.q, c.q_heads * c.head_dim, a.dq, a.ldq);
    scatter_rows(g.k, c.kv_heads * c.head_dim, a.dk, a.ldkv);
    scatter_rows(g.v, c.kv_heads * c.head_dim, a.dv, a.ldkv);
  }

  void run(const ops::CrossEntropy::Config& c, const ops::CrossEntropy::FwdArgs<T>& a) {
    ops::CrossEntropy::Inputs<T> in{ten({c.rows, c.vocab}, a.logits), idx({c.rows}, a.targets)};
    const auto o = ops::CrossEntropy::forward<T>(c, in);
    put(o.loss, a.loss);
    put(o.lse, a.lse);
  }
  // dlogits may alias logits.
  void run(const ops::CrossEntropy::Config& c, const ops::CrossEntropy::BwdArgs<T>& a) {
    ops::CrossEntropy::Inputs<T> in{ten({c.rows, c.vocab}, a.logits), idx({c.rows}, a.targets)};
    ops::CrossEntropy::Outputs<T> o{{}, ten({c.rows}, a.lse)};
    ops::CrossEntropy::Outputs<T> d{ten({c.rows}, a.dloss), {}};
    put(ops::CrossEntropy::backward<T>(c, in, o, d).logits, a.dlogits);
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
