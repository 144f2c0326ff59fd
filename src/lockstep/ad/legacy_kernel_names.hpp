// TRANSITIONAL: the kernel sets' former hand-named methods (embedding_fwd,
// linear_bwd, ...), each a one-line forwarder to the call by op type
// (ad/kernel_set.hpp), for the engine (model/transformer.hpp) until its calls
// are converted. Removed with the last caller.
#pragma once

#include <cstddef>

#include "lockstep/ad/kernel_set.hpp"
#include "lockstep/ops/all.hpp"

namespace lockstep::ad {

template <class Derived, class T>
class LegacyKernelNames {
 public:
  using Index = ops::Index;
  void embedding_fwd(const ops::Embedding::Config& c, const Index* ids, const T* wte, T* y) {
    k().template forward<ops::Embedding>(c, {ids, wte, y});
  }
  void embedding_bwd(const ops::Embedding::Config& c, const Index* ids, const T* dy, T* dwte) {
    k().template backward<ops::Embedding>(c, {ids, dy, dwte});
  }
  void positions_fwd(const ops::LearnedPositions::Config& c, const T* x, const T* wpe, T* y) {
    k().template forward<ops::LearnedPositions>(c, {x, wpe, y});
  }
  void positions_bwd(const ops::LearnedPositions::Config& c, const T* dy, T* dx, T* dwpe) {
    k().template backward<ops::LearnedPositions>(c, {dy, dx, dwpe});
  }
  void linear_fwd(const ops::Linear::Config& c, const T* x, const T* w, const T* b, T* y) {
    k().template forward<ops::Linear>(c, {x, w, b, y});
  }
  void linear_bwd(const ops::Linear::Config& c, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db) {
    k().template backward<ops::Linear>(c, {x, w, dy, dx, dw, db});
  }
  template <class Aux>
  void bitlinear_fwd(const ops::QuantLinearConfig& c, const T* x, const T* w, T* y, Aux& aux) {
    k().template forward<ops::BitLinear>(c, {x, w, y}, aux);
  }
  template <class Aux>
  void bitlinear_bwd(const ops::QuantLinearConfig& c, const T* x, const T* w, const T* dy, T* dx, T* dw, Aux& aux) {
    k().template backward<ops::BitLinear>(c, {x, w, dy, dx, dw}, aux);
  }
  void layernorm_fwd(const ops::NormConfig& c, const T* x, const T* g, const T* b, T* y, T* mean, T* rstd) {
    k().template forward<ops::LayerNorm>(c, {x, g, b, y, mean, rstd});
  }
  void layernorm_bwd(const ops::NormConfig& c, const T* x, const T* g, const T* mean, const T* rstd, const T* dy,
                     T* dx, T* dg, T* db) {
    k().template backward<ops::LayerNorm>(c, {x, g, mean, rstd, dy, dx, dg, db});
  }
  void rmsnorm_fwd(const ops::NormConfig& c, const T* x, const T* w, T* y, T* rstd) {
    k().template forward<ops::RmsNorm>(c, {x, w, y, rstd});
  }
  void rmsnorm_bwd(const ops::NormConfig& c, const T* x, const T* w, const T* rstd, const T* dy, T* dx, T* dw) {
    k().template backward<ops::RmsNorm>(c, {x, w, rstd, dy, dx, dw});
  }
  template <class Aux>
  void gelu_fwd(const ops::ElementwiseConfig& c, const T* x, T* y, Aux& aux) {
    k().template forward<ops::Gelu>(c, {x, y}, aux);
  }
  template <class Aux>
  void gelu_bwd(const ops::ElementwiseConfig& c, const T* x, const T* dy, T* dx, Aux& aux) {
    k().template backward<ops::Gelu>(c, {x, dy, dx}, aux);
  }
  template <class Aux>
  void swiglu_fwd(const ops::ElementwiseConfig& c, const T* gate, const T* up, T* y, Aux& aux) {
    k().template forward<ops::SwiGlu>(c, {gate, up, y}, aux);
  }
  template <class Aux>
  void swiglu_bwd(const ops::ElementwiseConfig& c, const T* gate, const T* up, const T* dy, T* dgate, T* dup,
                  Aux& aux) {
    k().template backward<ops::SwiGlu>(c, {gate, up, dy, dgate, dup}, aux);
  }
  template <class Aux>
  void relu2mul_fwd(const ops::ElementwiseConfig& c, const T* gate, const T* up, T* y, Aux&) {
    k().template forward<ops::ReluSqMul>(c, {gate, up, y});
  }
  template <class Aux>
  void relu2mul_bwd(const ops::ElementwiseConfig& c, const T* gate, const T* up, const T* dy, T* dgate, T* dup,
                    Aux&) {
    k().template backward<ops::ReluSqMul>(c, {gate, up, dy, dgate, dup});
  }
  void residual_fwd(const ops::ElementwiseConfig& c, const T* a, const T* b, T* y) {
    k().template forward<ops::ResidualAdd>(c, {a, b, y});
  }
  void residual_bwd(const ops::ElementwiseConfig& c, const T* dy, T* da, T* db) {
    k().template backward<ops::ResidualAdd>(c, {dy, da, db});
  }
  void rope_fwd(const ops::Rope::Config& c, const T* x, T* y) { k().template forward<ops::Rope>(c, {x, y}); }
  void rope_bwd(const ops::Rope::Config& c, const T* dy, T* dx) { k().template backward<ops::Rope>(c, {dy, dx}); }
  void attention_fwd(const ops::Attention::Config& c, const T* q, std::size_t ldq, const T* k_, const T* v,
                     std::size_t ldkv, T* o, T* lse) {
    k().template forward<ops::Attention>(c, {q, ldq, k_, v, ldkv, o, lse});
  }
  void attention_bwd(const ops::Attention::Config& c, const T* q, std::size_t ldq, const T* k_, const T* v,
                     std::size_t ldkv, const T* o, const T* lse, const T* dout, T* dq, T* dk, T* dv) {
    k().template backward<ops::Attention>(c, {q, ldq, k_, v, ldkv, o, lse, dout, dq, dk, dv});
  }
  void ce_fwd(const ops::CrossEntropy::Config& c, const T* logits, const Index* targets, T* loss, T* lse) {
    k().template forward<ops::CrossEntropy>(c, {logits, targets, loss, lse});
  }
  void ce_bwd(const ops::CrossEntropy::Config& c, const T* logits, const Index* targets, const T* lse,
              const T* dloss, T* dlogits) {
    k().template backward<ops::CrossEntropy>(c, {logits, targets, lse, dloss, dlogits});
  }

 private:
  Derived& k() { return static_cast<Derived&>(*this); }
};

}  // namespace lockstep::ad
