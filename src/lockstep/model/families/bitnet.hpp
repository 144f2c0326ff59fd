// BitNet b1.58 (HF BitNetForCausalLM): LLaMA's layout (llama.hpp) with
// BitLinear projections, an RMSNorm before o_proj (attn_sub_norm) and before
// down_proj (ffn_sub_norm), a ReLU²-gated MLP and a tied (float) LM head; RoPE
// θ from the config. Its op lists, its parameter table, its activations and
// the handlers where its block differs from LLaMA's (family.hpp says what a
// family declares).
#pragma once

#include <cstddef>
#include <string>

#include "lockstep/model/families/family.hpp"
#include "lockstep/model/families/llama.hpp"

namespace lockstep::model {

// The op lists: LLaMA's places, with BitLinear projections, a sub-norm
// before each output projection and ReLU²·up.
namespace bitnet {
// The same place with the same op as LLaMA's (the same step types).
using llama::Embed, llama::Stem, llama::InputNorm, llama::RopeQ, llama::RopeK, llama::Attn, llama::Residual1,
    llama::PostNorm, llama::Residual2, llama::Norm, llama::Head;

// LLaMA's places with other ops.
using QProj = llama::QProj::with_op<ops::BitLinear>;
using KProj = llama::KProj::with_op<ops::BitLinear>;
using VProj = llama::VProj::with_op<ops::BitLinear>;
using OProj = llama::OProj::with_op<ops::BitLinear>;
using GateProj = llama::GateProj::with_op<ops::BitLinear>;
using UpProj = llama::UpProj::with_op<ops::BitLinear>;
using Act = llama::Act::with_op<ops::ReluSqMul>;
using DownProj = llama::DownProj::with_op<ops::BitLinear>;
// BitNet's own.
using AttnSubNorm = Step<"self_attn.attn_sub_norm", ops::RmsNorm>;
using FfnSubNorm = Step<"mlp.ffn_sub_norm", ops::RmsNorm>;
using Block = Layer<Forward<InputNorm, QProj, KProj, VProj, RopeQ, RopeK, Attn, AttnSubNorm, OProj, Residual1, PostNorm,
                            GateProj, UpProj, Act, FfnSubNorm, DownProj, Residual2>,
                    Backward<Residual2, DownProj, FfnSubNorm, Act, UpProj, GateProj, PostNorm, Residual1, OProj,
                             AttnSubNorm, Attn, RopeK, RopeQ, VProj, KProj, QProj, InputNorm>>;
}  // namespace bitnet

struct BitnetFamily : FamilyLayers<Family::Bitnet, bitnet::Stem, bitnet::Block, bitnet::Head> {
  // --- parameters -------------------------------------------------------------
  struct BlockParams : LlamaFamily::BlockParams {
    std::size_t sub1_w = npos, sub2_w = npos;
  };
  using OuterParams = LlamaFamily::OuterParams;
  // LLaMA's table with a sub-norm weight before each output projection.
  template <class Table>
  static void param_table(const ModelConfig& c, Table& t) {
    const ParamShapes s(c);
    LlamaFamily::param_table(c, t, [&](std::size_t l, const std::string& p, LlamaFamily::OutProj where) {
      if (where == LlamaFamily::OutProj::attention)
        t.block(l, s.ones(p + "self_attn.attn_sub_norm.weight", s.qdim), &BlockParams::sub1_w);
      else
        t.block(l, s.ones(p + "mlp.ffn_sub_norm.weight", s.F), &BlockParams::sub2_w);
    });
  }

  // --- activations: LLaMA's and the sub-norms' ----------------------------------
  // LLaMA's slots (the handlers below use one of them).
  static constexpr auto kAct = LlamaFamily::kAct;
  template <class Buf, class Aux>
  struct BlockActs : LlamaFamily::BlockActs<Buf, Aux> {
    Buf sub1, sub1_rstd, sub2, sub2_rstd;
    // o_proj and down_proj read the sub-norms' outputs.
    const Buf& oproj_in() const { return sub1; }
    const Buf& down_in() const { return sub2; }
    void resize(const RunSizes& r) {
      LlamaFamily::BlockActs<Buf, Aux>::resize(r);
      sub1.resize(r.N * r.qdim);
      sub1_rstd.resize(r.N);
      sub2.resize(r.N * r.F);
      sub2_rstd.resize(r.N);
    }
  };
  template <class Buf>
  struct Scratch : LlamaFamily::Scratch<Buf> {
    Buf dsub1, dsub2;
    Buf& d_oproj_in() { return dsub1; }
    Buf& d_down_in() { return dsub2; }
    void resize(const RunSizes& r, bool train) {
      LlamaFamily::Scratch<Buf>::resize(r, train);
      if (!train) return;
      dsub1.resize(r.N * r.qdim);
      dsub2.resize(r.N * r.F);
    }
  };

  // --- the step handlers --------------------------------------------------------
  template <class E>
  using StemHandlers = LlamaFamily::StemHandlers<E>;
  template <class E>
  using HeadHandlers = LlamaFamily::HeadHandlers<E>;

  // LLaMA's handlers (o_proj and down_proj reading the sub-norms' outputs,
  // BlockActs above), the sub-norms', and ReLU²·up for the activation.
  template <class E>
  struct BlockHandlers : LlamaFamily::BlockHandlers<E, bitnet::Block> {
    using Base = LlamaFamily::BlockHandlers<E, bitnet::Block>;
    using Base::backward;
    using Base::Base;
    using Base::e, Base::a, Base::p, Base::s, Base::N, Base::F, Base::qd;
    using Base::forward;

    void forward(bitnet::AttnSubNorm) {
      e.k_.template forward<ops::RmsNorm>(
          e.norm(N, qd), {.x = a.att.data(), .w = e.P(p.sub1_w), .y = a.sub1.data(), .rstd = a.sub1_rstd.data()});
    }
    void forward(bitnet::Act) {
      e.k_.template forward<ops::ReluSqMul>(e.elems(N * F),
                                            {.gate = a.gate.data(), .up = a.up.data(), .y = a.act.data()});
    }
    void forward(bitnet::FfnSubNorm) {
      e.k_.template forward<ops::RmsNorm>(
          e.norm(N, F), {.x = a.act.data(), .w = e.P(p.sub2_w), .y = a.sub2.data(), .rstd = a.sub2_rstd.data()});
    }

    void backward(bitnet::FfnSubNorm) {
      e.k_.template backward<ops::RmsNorm>(e.norm(N, F), {.x = a.act.data(), .w = e.P(p.sub2_w),
                                                          .rstd = a.sub2_rstd.data(), .dy = s.dsub2.data(),
                                                          .dx = s.dact.data(), .dw = e.G(p.sub2_w)});
    }
    void backward(bitnet::Act) {
      e.k_.template backward<ops::ReluSqMul>(
          e.elems(N * F),
          {.gate = a.gate.data(), .up = a.up.data(), .dy = s.dact.data(), .dgate = s.dfc.data(), .dup = s.dup.data()});
    }
    void backward(bitnet::AttnSubNorm) {
      e.k_.template backward<ops::RmsNorm>(e.norm(N, qd), {.x = a.att.data(), .w = e.P(p.sub1_w),
                                                           .rstd = a.sub1_rstd.data(), .dy = s.dsub1.data(),
                                                           .dx = s.datt.data(), .dw = e.G(p.sub1_w)});
    }
  };
};

}  // namespace lockstep::model
