// The fused units paths in the model (ops/units_fused.hpp: what each fuses and
// why it changes no bit). With `--linear units`, a family's block handlers
// call these instead of separate unit linears where the kernel set has the
// fusions (cpu::OpKernels, cuda::OpKernels; the op specs, the reference, have
// none) and ops::units_fusion_enabled():
//   * LLaMA: q/k/v as one product over one quantization of the input norm's
//     output (the q_proj step computes k and v too; k_proj's and v_proj's
//     forward steps then do nothing), gate/up likewise (gate_proj's step);
//     backward: v_proj's step (the first of the three) computes the dW of
//     q, k and v in one product over x's column codes quantized once (unit
//     backward) or over one x̂ (float STE), and its own dx; k_proj's and
//     q_proj's steps their dx only; up_proj's / gate_proj's likewise.
//   * GPT-2: c_attn is one product already; the MLP chain c_fc -> GELU ->
//     c_proj runs in the c_fc step (GELU's and c_proj's forward steps then do
//     nothing; their backward steps run as before).
// The step lists are unchanged: every step still runs (and is traced); a
// fused one's work was done by the step that leads its group.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "lockstep/ops/units_fused.hpp"

namespace lockstep::model::units_fusion {

template <class K>
concept HasUnitsFusions = requires(K& k, const ops::UnitFwdPart* fp, const ops::UnitBwdPart* bp,
                                   const ops::UnitMlpGelu& mg, typename K::Aux& aux) {
  k.units_shared_fwd(std::size_t{}, std::size_t{}, static_cast<const float*>(nullptr), fp, std::size_t{});
  k.units_shared_bwd(std::size_t{}, std::size_t{}, bool{}, static_cast<const float*>(nullptr), bp, std::size_t{});
  k.units_mlp_gelu_fwd(mg, aux);
};

template <class E>
using KernelsOf = std::remove_cvref_t<decltype(std::declval<E&>().k_)>;
template <class E>
inline constexpr bool available_v =
    std::is_same_v<typename E::Scalar, float> && HasUnitsFusions<KernelsOf<E>>;

// Whether engine e runs its block linears through the fused units paths.
template <class E>
bool on(const E& e) {
  if constexpr (available_v<E>) return e.units_for(false) && ops::units_fusion_enabled();
  else return false;
}

// Parts over the engine's scalar (the handlers are compiled for double engines
// too, where nothing here runs).
template <class T>
struct FwdPart {
  const T* w;
  const T* b;
  std::size_t out;
  T* y;
};
template <class T>
struct BwdPart {
  const T* w;
  const T* dy;
  std::size_t out;
  T* dx;
  T* dw;
  T* db;
};

template <class E, class T>
void shared_fwd(E& e, std::size_t rows, std::size_t in, const T* x, std::initializer_list<FwdPart<T>> parts) {
  if constexpr (available_v<E>) {
    std::vector<ops::UnitFwdPart> v;
    for (const FwdPart<T>& p : parts) v.push_back({p.w, p.b, p.out, p.y});
    e.k_.units_shared_fwd(rows, in, x, v.data(), v.size());
  }
}
template <class E, class T>
void shared_bwd(E& e, std::size_t rows, std::size_t in, const T* x, std::initializer_list<BwdPart<T>> parts) {
  if constexpr (available_v<E>) {
    std::vector<ops::UnitBwdPart> v;
    for (const BwdPart<T>& p : parts) v.push_back({p.w, p.dy, p.out, p.dx, p.dw, p.db});
    e.k_.units_shared_bwd(rows, in, e.cfg_.unit_backward, x, v.data(), v.size());
  }
}
// GPT-2's MLP: fc = x·W1ᵀ + b1, act = GELU(fc) (tanh into aux), y = act·W2ᵀ + b2.
template <class E, class T, class Aux>
void mlp_gelu_fwd(E& e, std::size_t rows, std::size_t in, std::size_t hidden, const T* x, const T* w1, const T* b1,
                  const T* w2, const T* b2, T* fc, T* act, Aux& aux, T* y) {
  if constexpr (available_v<E>)
    e.k_.units_mlp_gelu_fwd({rows, in, hidden, x, w1, b1, w2, b2, fc, act, y}, aux);
}

}  // namespace lockstep::model::units_fusion
