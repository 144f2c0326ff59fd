// Completeness by construction, shown with the compiler itself. This file is
// compiled (syntax only) once per CASE by tests/completeness/CMakeLists.txt:
// CASE 0 must compile; every other case must FAIL to compile with the named
// concept (or the missing handler) in the diagnostic.
//
//   0  intact: the real layer lists and families, a complete hand-made layer and
//      its runner
//   1  the GPT-2 block's backward chain with mlp.act (GELU) removed
//   2  a step whose op has a forward but no backward
//   3  a backward chain in the wrong order
//   4  a backward chain with a step the forward does not have
//   5  a forward that names the same place twice
//   6  a listed step the layer implementation has no handler for
//   7  a kernel set without an op's backward (model/kernel_set.hpp)
#include "lockstep/model/families/bitnet.hpp"
#include "lockstep/model/families/gpt2.hpp"
#include "lockstep/model/families/llama.hpp"
#include "lockstep/model/kernel_set.hpp"
#include "lockstep/model/layers.hpp"

#ifndef CASE
#error "compile with -DCASE=<n>"
#endif

namespace m = lockstep::model;
namespace ops = lockstep::ops;

// An op with everything but a backward (a copy of Gelu's interface).
struct NoBackwardOp {
  static constexpr std::string_view name = "no_backward";
  using Config = ops::ElementwiseConfig;
  template <class T>
  using Inputs = ops::Gelu::Inputs<T>;
  template <class T>
  using Outputs = ops::Gelu::Outputs<T>;
  template <class T>
  static Outputs<T> forward(const Config& c, const Inputs<T>& in) {
    return ops::Gelu::forward<T>(c, in);
  }
  static std::vector<Config> cases() { return ops::Gelu::cases(); }
  static Inputs<double> sample(const Config& c, lockstep::ad::Rng& rng) { return ops::Gelu::sample(c, rng); }
};

using A = m::Step<"a", ops::LayerNorm>;
using B = m::Step<"b", ops::Linear>;
using C = m::Step<"c", ops::Gelu>;

// A layer implementation: one handler per step.
struct Runner {
  int ran = 0;
  void forward(A) { ++ran; }
  void forward(B) { ++ran; }
  void backward(B) { ++ran; }
  void backward(A) { ++ran; }
};

// A kernel set with GELU's forward; its backward only where GELU_BACKWARD.
struct GeluKernels {
  struct Aux {};
  void run(const ops::ElementwiseConfig&, const ops::Gelu::FwdArgs<float>&, Aux&) {}
#if CASE == 0
  void run(const ops::ElementwiseConfig&, const ops::Gelu::BwdArgs<float>&, Aux&) {}
#endif
};
using GeluOnly = m::Layer<m::Forward<C>, m::Backward<C>>;

#if CASE == 0
static_assert(m::KernelSet<GeluKernels, float, GeluOnly>);
// The model's own lists are complete (forming them checks the concept).
static_assert(m::BackwardChainCoversForward<m::gpt2::Block::forward_steps, m::gpt2::Block::backward_steps>);
static_assert(m::gpt2::Block::missing == 0 && m::llama::Block::missing == 0 && m::bitnet::Block::missing == 0);
static_assert(m::gpt2::Stem::missing == 0 && m::gpt2::Head::missing == 0 && m::llama::Head::missing == 0);
static_assert(m::ModelFamily<m::Gpt2Family> && m::ModelFamily<m::LlamaFamily> && m::ModelFamily<m::BitnetFamily>);
using Complete = m::Layer<m::Forward<A, B>, m::Backward<B, A>>;
int run() {
  Runner r;
  m::run_forward<Complete>(r, [](std::string_view, std::string_view) {});
  m::run_backward<Complete>(r, [](std::string_view, std::string_view) {});
  return r.ran;
}
#elif CASE == 1
namespace g = m::gpt2;
using GptBlockMissingGeluBackward =
    m::Layer<m::Forward<g::Ln1, g::CAttn, g::Attn, g::AttnProj, g::Residual1, g::Ln2, g::CFc, g::Act, g::MlpProj,
                        g::Residual2>,
             m::Backward<g::Residual2, g::MlpProj, /* g::Act removed */ g::CFc, g::Ln2, g::Residual1, g::AttnProj,
                         g::Attn, g::CAttn, g::Ln1>>;
GptBlockMissingGeluBackward layer;
#elif CASE == 2
using NoBackwardStep = m::Step<"act", NoBackwardOp>;
NoBackwardStep step;
#elif CASE == 3
using WrongOrder = m::Layer<m::Forward<A, B, C>, m::Backward<C, A, B>>;
WrongOrder layer;
#elif CASE == 4
using Extra = m::Layer<m::Forward<A, B>, m::Backward<C, B, A>>;
Extra layer;
#elif CASE == 5
using Twice = m::Step<"a", ops::Linear>;  // same place as A
using Duplicate = m::Layer<m::Forward<A, Twice>, m::Backward<Twice, A>>;
Duplicate layer;
#elif CASE == 6
using WithUnhandled = m::Layer<m::Forward<A, B, C>, m::Backward<C, B, A>>;
int run() {
  Runner r;  // has no handler for C
  m::run_forward<WithUnhandled>(r, [](std::string_view, std::string_view) {});
  return r.ran;
}
#elif CASE == 7
static_assert(m::KernelSet<GeluKernels, float, GeluOnly>);
#endif
