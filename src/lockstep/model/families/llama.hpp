// LLaMA (LlamaForCausalLM): RMSNorm, separate q/k/v/o projections without
// bias, grouped-query attention, RoPE on q and k, SwiGLU MLP, LM head untied
// unless the config ties it. Its op lists, its parameter table, its
// activations and its step handlers (family.hpp says what a family declares).
// BitNet's block (bitnet.hpp) has this block's places and reuses its handlers.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>

#include "lockstep/model/families/family.hpp"
#include "lockstep/model/units_fusion.hpp"

namespace lockstep::model {

// The op lists. Places are the Hugging Face module names where there is one
// (the parameter names below are built from them).
namespace llama {
using Embed = Step<"embed_tokens", ops::Embedding>;
using Stem = Layer<Forward<Embed>, Backward<Embed>>;

using InputNorm = Step<"input_layernorm", ops::RmsNorm>;
using QProj = Step<"self_attn.q_proj", ops::Linear>;
using KProj = Step<"self_attn.k_proj", ops::Linear>;
using VProj = Step<"self_attn.v_proj", ops::Linear>;
using RopeQ = Step<"self_attn.rope_q", ops::Rope>;
using RopeK = Step<"self_attn.rope_k", ops::Rope>;
using Attn = Step<"self_attn", ops::Attention>;
using OProj = Step<"self_attn.o_proj", ops::Linear>;
using Residual1 = Step<"residual_attn", ops::ResidualAdd>;
using PostNorm = Step<"post_attention_layernorm", ops::RmsNorm>;
using GateProj = Step<"mlp.gate_proj", ops::Linear>;
using UpProj = Step<"mlp.up_proj", ops::Linear>;
using Act = Step<"mlp.act", ops::SwiGlu>;
using DownProj = Step<"mlp.down_proj", ops::Linear>;
using Residual2 = Step<"residual_mlp", ops::ResidualAdd>;
using Block = Layer<Forward<InputNorm, QProj, KProj, VProj, RopeQ, RopeK, Attn, OProj, Residual1, PostNorm, GateProj,
                            UpProj, Act, DownProj, Residual2>,
                    Backward<Residual2, DownProj, Act, UpProj, GateProj, PostNorm, Residual1, OProj, Attn, RopeK, RopeQ,
                             VProj, KProj, QProj, InputNorm>>;

using Norm = Step<"norm", ops::RmsNorm>;
using Head = HeadOf<Norm>;  // norm, lm_head, loss
}  // namespace llama

struct LlamaFamily : FamilyLayers<Family::Llama, llama::Stem, llama::Block, llama::Head> {
  // --- parameters -------------------------------------------------------------
  // Indices into the parameter list: block l's weights, and the stem's and
  // head's (no biases).
  struct BlockParams {
    std::size_t n1_w = npos, q_w = npos, k_w = npos, v_w = npos, o_w = npos, n2_w = npos, gate_w = npos, up_w = npos,
                down_w = npos;
  };
  struct OuterParams {
    std::size_t wte = npos, nf_w = npos, lm_head = npos;
  };
  // The table. A family with LLaMA's block and more (BitNet) writes its own
  // entries of block l with before_out(l, prefix, where), called just before
  // each output projection's (o_proj, down_proj).
  enum class OutProj { attention, mlp };
  struct NoEntries {
    void operator()(std::size_t, const std::string&, OutProj) const {}
  };
  template <class Table, class BeforeOut = NoEntries>
  static void param_table(const ModelConfig& c, Table& t, BeforeOut before_out = {}) {
    const ParamShapes s(c);
    using P = BlockParams;
    t.outer(s.matrix("model.embed_tokens.weight", s.V, s.D), &OuterParams::wte);
    for (std::size_t l = 0; l < static_cast<std::size_t>(c.n_layer); ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      t.block(l, s.ones(p + "input_layernorm.weight", s.D), &P::n1_w);
      t.block(l, s.matrix(p + "self_attn.q_proj.weight", s.qdim, s.D), &P::q_w);
      t.block(l, s.matrix(p + "self_attn.k_proj.weight", s.kvdim, s.D), &P::k_w);
      t.block(l, s.matrix(p + "self_attn.v_proj.weight", s.kvdim, s.D), &P::v_w);
      before_out(l, p, OutProj::attention);
      t.block(l, s.residual(p + "self_attn.o_proj.weight", s.D, s.qdim), &P::o_w);
      t.block(l, s.ones(p + "post_attention_layernorm.weight", s.D), &P::n2_w);
      t.block(l, s.matrix(p + "mlp.gate_proj.weight", s.F, s.D), &P::gate_w);
      t.block(l, s.matrix(p + "mlp.up_proj.weight", s.F, s.D), &P::up_w);
      before_out(l, p, OutProj::mlp);
      t.block(l, s.residual(p + "mlp.down_proj.weight", s.D, s.F), &P::down_w);
    }
    t.outer(s.ones("model.norm.weight", s.D), &OuterParams::nf_w);
    untied_lm_head<OuterParams>(s, t);
  }

  // --- activations ------------------------------------------------------------
  enum AuxSlot { kAct, kQ, kK, kV, kO, kGate, kUp, kDown, kAuxSlots };
  template <class Buf, class Aux>
  struct BlockActs {
    Buf n1, n1_rstd, v, qr, kr, att, lse, mid, n2, n2_rstd, gate, up, act;
    Aux aux[kAuxSlots];
    // What o_proj and down_proj read (BitNet: their sub-norms' outputs).
    const Buf& oproj_in() const { return att; }
    const Buf& down_in() const { return act; }
    void resize(const RunSizes& r) {
      const std::size_t N = r.N, D = r.D, F = r.F;
      n1.resize(N * D);
      n1_rstd.resize(N);
      v.resize(N * r.kvdim);
      qr.resize(N * r.qdim);
      kr.resize(N * r.kvdim);
      att.resize(N * r.qdim);
      lse.resize(r.B * r.Hq * r.S);
      mid.resize(N * D);
      n2.resize(N * D);
      n2_rstd.resize(N);
      gate.resize(N * F);
      up.resize(N * F);
      act.resize(N * F);
    }
  };
  template <class Buf>
  struct Scratch {
    Buf q, k, branch, hn_rstd;
    Buf dtmp, datt, dq, dqr, dk, dkr, dv, dfc, dup, dact;
    // Where o_proj's and down_proj's input gradients go (BitNet: to their sub-norms).
    Buf& d_oproj_in() { return datt; }
    Buf& d_down_in() { return dact; }
    void resize(const RunSizes& r, bool train) {
      const std::size_t N = r.N, D = r.D, F = r.F;
      q.resize(N * r.qdim);
      k.resize(N * r.kvdim);
      branch.resize(N * D);
      hn_rstd.resize(N);
      if (!train) return;
      dtmp.resize(N * D);
      datt.resize(N * r.qdim);
      dq.resize(N * r.qdim);
      dqr.resize(N * r.qdim);
      dk.resize(N * r.kvdim);
      dkr.resize(N * r.kvdim);
      dv.resize(N * r.kvdim);
      dfc.resize(N * F);
      dup.resize(N * F);
      dact.resize(N * F);
    }
  };

  // --- the step handlers --------------------------------------------------------
  template <class E>
  struct StemHandlers {
    E& e;
    void forward(llama::Embed) {
      e.k_.template forward<ops::Embedding>({e.N_, e.V_, e.D_},
                                            {.ids = e.ids_, .wte = e.P(e.wte_), .y = e.acts_[0].x.data()});
    }
    void backward(llama::Embed) { e.embedding_backward(); }
  };

  // The handlers of block B's steps at LLaMA's places (B: LLaMA's block, or
  // BitNet's: its buffers say what o_proj and down_proj read, and bitnet.hpp
  // replaces the activation's handlers and adds its sub-norms').
  template <class E, class B = llama::Block>
  struct BlockHandlers {
    E& e;
    std::size_t l;
    typename E::LayerActs& a;
    const typename E::BlockParams& p;
    typename E::Shared& s;
    std::size_t N, D, F, qd, kvd;
    BlockHandlers(E& en, std::size_t layer)
        : e(en),
          l(layer),
          a(en.acts_[layer]),
          p(en.layers_[layer]),
          s(en.s_),
          N(en.N_),
          D(en.D_),
          F(en.F_),
          qd(en.qdim_),
          kvd(en.kvdim_) {}
    template <class St>
    using op = typename St::op;
    template <class LlamaStep>
    using At = StepLike<B, LlamaStep>;  // B's step at LLaMA's place
    // Units fusion (model/units_fusion.hpp): q/k/v and gate/up over their
    // shared input as one product, led by q_proj's and gate_proj's forward
    // steps and by v_proj's and up_proj's backward steps (the first of each
    // group in the backward chain). Only where the projections are Linear
    // steps (BitNet's are BitLinear).
    bool fused() const {
      return std::is_same_v<op<At<llama::QProj>>, ops::Linear> && std::is_same_v<op<At<llama::GateProj>>, ops::Linear> &&
             units_fusion::on(e);
    }
    using T = typename E::Scalar;
    using FwdPart = units_fusion::FwdPart<T>;
    using BwdPart = units_fusion::BwdPart<T>;

    void forward(At<llama::InputNorm>) {
      e.k_.template forward<ops::RmsNorm>(
          e.norm(N, D), {.x = a.x.data(), .w = e.P(p.n1_w), .y = a.n1.data(), .rstd = a.n1_rstd.data()});
    }
    void forward(At<llama::QProj>) {
      if (fused())
        return units_fusion::shared_fwd(e, N, D, a.n1.data(),
                                        {FwdPart{e.P(p.q_w), nullptr, qd, s.q.data()},
                                         FwdPart{e.P(p.k_w), nullptr, kvd, s.k.data()},
                                         FwdPart{e.P(p.v_w), nullptr, kvd, a.v.data()}});
      e.template proj_fwd<op<At<llama::QProj>>>(N, D, qd, a.n1.data(), e.P(p.q_w), s.q.data(), a.aux[kQ]);
    }
    void forward(At<llama::KProj>) {
      if (fused()) return;  // done by q_proj's step
      e.template proj_fwd<op<At<llama::KProj>>>(N, D, kvd, a.n1.data(), e.P(p.k_w), s.k.data(), a.aux[kK]);
    }
    void forward(At<llama::VProj>) {
      if (fused()) return;  // done by q_proj's step
      e.template proj_fwd<op<At<llama::VProj>>>(N, D, kvd, a.n1.data(), e.P(p.v_w), a.v.data(), a.aux[kV]);
    }
    void forward(At<llama::RopeQ>) {
      e.k_.template forward<ops::Rope>(e.rope(e.Hq_), {.x = s.q.data(), .y = a.qr.data()});
    }
    void forward(At<llama::RopeK>) {
      e.k_.template forward<ops::Rope>(e.rope(e.Hkv_), {.x = s.k.data(), .y = a.kr.data()});
    }
    void forward(At<llama::Attn>) {
      e.attention_fwd({.q = a.qr.data(), .ldq = qd, .k = a.kr.data(),
                       .v = a.v.data(), .ldkv = kvd, .o = a.att.data(),
                       .lse = a.lse.data()});
    }
    void forward(At<llama::OProj>) {
      e.template proj_fwd<op<At<llama::OProj>>>(N, qd, D, a.oproj_in().data(), e.P(p.o_w), s.branch.data(), a.aux[kO]);
    }
    void forward(At<llama::Residual1>) {
      e.k_.template forward<ops::ResidualAdd>(e.elems(N * D),
                                              {.a = a.x.data(), .b = s.branch.data(), .y = a.mid.data()});
    }
    void forward(At<llama::PostNorm>) {
      e.k_.template forward<ops::RmsNorm>(
          e.norm(N, D), {.x = a.mid.data(), .w = e.P(p.n2_w), .y = a.n2.data(), .rstd = a.n2_rstd.data()});
    }
    void forward(At<llama::GateProj>) {
      if (fused())
        return units_fusion::shared_fwd(e, N, D, a.n2.data(),
                                        {FwdPart{e.P(p.gate_w), nullptr, F, a.gate.data()},
                                         FwdPart{e.P(p.up_w), nullptr, F, a.up.data()}});
      e.template proj_fwd<op<At<llama::GateProj>>>(N, D, F, a.n2.data(), e.P(p.gate_w), a.gate.data(), a.aux[kGate]);
    }
    void forward(At<llama::UpProj>) {
      if (fused()) return;  // done by gate_proj's step
      e.template proj_fwd<op<At<llama::UpProj>>>(N, D, F, a.n2.data(), e.P(p.up_w), a.up.data(), a.aux[kUp]);
    }
    void forward(At<llama::Act>) {
      static_assert(std::is_same_v<op<At<llama::Act>>, ops::SwiGlu>, "another activation needs its own handler");
      e.k_.template forward<ops::SwiGlu>(e.elems(N * F), {.gate = a.gate.data(), .up = a.up.data(), .y = a.act.data()},
                                         a.aux[kAct]);
    }
    void forward(At<llama::DownProj>) {
      e.template proj_fwd<op<At<llama::DownProj>>>(N, F, D, a.down_in().data(), e.P(p.down_w), s.branch.data(),
                                                   a.aux[kDown]);
    }
    void forward(At<llama::Residual2>) {
      e.k_.template forward<ops::ResidualAdd>(e.elems(N * D),
                                              {.a = a.mid.data(), .b = s.branch.data(), .y = e.block_out(l)});
    }

    void backward(At<llama::Residual2>) {
      e.k_.template backward<ops::ResidualAdd>(e.elems(N * D),
                                               {.dy = s.dx.data(), .da = s.dx.data(), .db = s.dx.data()});
    }
    void backward(At<llama::DownProj>) {
      e.template proj_bwd<op<At<llama::DownProj>>>(N, F, D, a.down_in().data(), e.P(p.down_w), s.dx.data(),
                                                   s.d_down_in().data(), e.G(p.down_w), a.aux[kDown]);
    }
    void backward(At<llama::Act>) {
      static_assert(std::is_same_v<op<At<llama::Act>>, ops::SwiGlu>, "another activation needs its own handler");
      e.k_.template backward<ops::SwiGlu>(
          e.elems(N * F),
          {.gate = a.gate.data(), .up = a.up.data(), .dy = s.dact.data(), .dgate = s.dfc.data(), .dup = s.dup.data()},
          a.aux[kAct]);
    }
    // up_proj runs first in the backward chain: it writes the norm output's
    // gradient; gate_proj's is added.
    void backward(At<llama::UpProj>) {
      if (fused())  // up's dx, and the dW of up and gate in one product
        return units_fusion::shared_bwd(e, N, D, a.n2.data(),
                                        {BwdPart{e.P(p.up_w), s.dup.data(), F, s.dn.data(), e.G(p.up_w), nullptr},
                                         BwdPart{e.P(p.gate_w), s.dfc.data(), F, nullptr, e.G(p.gate_w), nullptr}});
      e.template proj_bwd<op<At<llama::UpProj>>>(N, D, F, a.n2.data(), e.P(p.up_w), s.dup.data(), s.dn.data(),
                                                 e.G(p.up_w), a.aux[kUp]);
    }
    void backward(At<llama::GateProj>) {
      if (fused()) {  // gate's dx (its dW: up_proj's step)
        units_fusion::shared_bwd(e, N, D, a.n2.data(),
                                 {BwdPart{e.P(p.gate_w), s.dfc.data(), F, s.dtmp.data(), nullptr, nullptr}});
        return e.k_.add_into(N * D, s.dn.data(), s.dtmp.data());
      }
      e.template proj_bwd<op<At<llama::GateProj>>>(N, D, F, a.n2.data(), e.P(p.gate_w), s.dfc.data(), s.dtmp.data(),
                                                   e.G(p.gate_w), a.aux[kGate]);
      e.k_.add_into(N * D, s.dn.data(), s.dtmp.data());
    }
    void backward(At<llama::PostNorm>) {
      e.k_.template backward<ops::RmsNorm>(e.norm(N, D), {.x = a.mid.data(), .w = e.P(p.n2_w), .rstd = a.n2_rstd.data(),
                                                          .dy = s.dn.data(), .dx = s.dtmp.data(), .dw = e.G(p.n2_w)});
      e.k_.add_into(N * D, s.dx.data(), s.dtmp.data());
    }
    void backward(At<llama::Residual1>) {
      e.k_.template backward<ops::ResidualAdd>(e.elems(N * D),
                                               {.dy = s.dx.data(), .da = s.dx.data(), .db = s.dx.data()});
    }
    void backward(At<llama::OProj>) {
      e.template proj_bwd<op<At<llama::OProj>>>(N, qd, D, a.oproj_in().data(), e.P(p.o_w), s.dx.data(),
                                                s.d_oproj_in().data(), e.G(p.o_w), a.aux[kO]);
    }
    void backward(At<llama::Attn>) {
      e.attention_bwd({.q = a.qr.data(), .ldq = qd, .k = a.kr.data(),
                       .v = a.v.data(), .ldkv = kvd, .o = a.att.data(),
                       .lse = a.lse.data(), .dout = s.datt.data(),
                       .dq = s.dqr.data(), .dk = s.dkr.data(),
                       .dv = s.dv.data()});
    }
    void backward(At<llama::RopeK>) {
      e.k_.template backward<ops::Rope>(e.rope(e.Hkv_), {.dy = s.dkr.data(), .dx = s.dk.data()});
    }
    void backward(At<llama::RopeQ>) {
      e.k_.template backward<ops::Rope>(e.rope(e.Hq_), {.dy = s.dqr.data(), .dx = s.dq.data()});
    }
    // v_proj runs first in the backward chain (it writes), then k, then q (added).
    void backward(At<llama::VProj>) {
      if (fused())  // v's dx, and the dW of v, k and q in one product
        return units_fusion::shared_bwd(e, N, D, a.n1.data(),
                                        {BwdPart{e.P(p.v_w), s.dv.data(), kvd, s.dn.data(), e.G(p.v_w), nullptr},
                                         BwdPart{e.P(p.k_w), s.dk.data(), kvd, nullptr, e.G(p.k_w), nullptr},
                                         BwdPart{e.P(p.q_w), s.dq.data(), qd, nullptr, e.G(p.q_w), nullptr}});
      e.template proj_bwd<op<At<llama::VProj>>>(N, D, kvd, a.n1.data(), e.P(p.v_w), s.dv.data(), s.dn.data(),
                                                e.G(p.v_w), a.aux[kV]);
    }
    void backward(At<llama::KProj>) {
      if (fused()) {  // k's dx (its dW: v_proj's step)
        units_fusion::shared_bwd(e, N, D, a.n1.data(),
                                 {BwdPart{e.P(p.k_w), s.dk.data(), kvd, s.dtmp.data(), nullptr, nullptr}});
        return e.k_.add_into(N * D, s.dn.data(), s.dtmp.data());
      }
      e.template proj_bwd<op<At<llama::KProj>>>(N, D, kvd, a.n1.data(), e.P(p.k_w), s.dk.data(), s.dtmp.data(),
                                                e.G(p.k_w), a.aux[kK]);
      e.k_.add_into(N * D, s.dn.data(), s.dtmp.data());
    }
    void backward(At<llama::QProj>) {
      if (fused()) {  // q's dx (its dW: v_proj's step)
        units_fusion::shared_bwd(e, N, D, a.n1.data(),
                                 {BwdPart{e.P(p.q_w), s.dq.data(), qd, s.dtmp.data(), nullptr, nullptr}});
        return e.k_.add_into(N * D, s.dn.data(), s.dtmp.data());
      }
      e.template proj_bwd<op<At<llama::QProj>>>(N, D, qd, a.n1.data(), e.P(p.q_w), s.dq.data(), s.dtmp.data(),
                                                e.G(p.q_w), a.aux[kQ]);
      e.k_.add_into(N * D, s.dn.data(), s.dtmp.data());
    }
    void backward(At<llama::InputNorm>) {
      e.k_.template backward<ops::RmsNorm>(e.norm(N, D), {.x = a.x.data(), .w = e.P(p.n1_w), .rstd = a.n1_rstd.data(),
                                                          .dy = s.dn.data(), .dx = s.dtmp.data(), .dw = e.G(p.n1_w)});
      e.k_.add_into(N * D, s.dx.data(), s.dtmp.data());
    }
  };

  // The head: the final RMSNorm, then the LM head and the loss (family.hpp).
  template <class E>
  struct FinalNorm {
    E& e;
    void forward(llama::Norm) {
      e.k_.template forward<ops::RmsNorm>(
          e.norm(e.head_rows(), e.D_),
          {.x = e.head_input(), .w = e.P(e.outer_.nf_w), .y = e.s_.hn.data(), .rstd = e.s_.hn_rstd.data()});
    }
    void backward(llama::Norm) {
      e.k_.template backward<ops::RmsNorm>(e.norm(e.N_, e.D_), {.x = e.s_.h.data(), .w = e.P(e.outer_.nf_w),
                                                                .rstd = e.s_.hn_rstd.data(), .dy = e.s_.dn.data(),
                                                                .dx = e.s_.dx.data(), .dw = e.G(e.outer_.nf_w)});
    }
  };
  template <class E>
  using HeadHandlers = Assembled<FinalNorm<E>, LmHeadAndLoss<E>>;
};

}  // namespace lockstep::model
