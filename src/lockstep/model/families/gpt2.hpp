// GPT-2 (GPT2LMHeadModel): pre-LN blocks, fused q/k/v projection with bias,
// GELU (tanh) MLP, learned positions, tied LM head. Its op lists, its
// parameter table, its activations and its step handlers (family.hpp says
// what a family declares).
//
// Glue that is not an op, exact: the fused c_attn output [N, 3D] is read as
// q | k | v column blocks (strided rows, no arithmetic).
#pragma once

#include <cstddef>
#include <string>

#include "lockstep/model/families/family.hpp"
#include "lockstep/model/units_fusion.hpp"

namespace lockstep::model {

// The op lists. Places are the Hugging Face module names where there is one
// (the parameter names below are built from them).
namespace gpt2 {
using Wte = Step<"wte", ops::Embedding>;
using Wpe = Step<"wpe", ops::LearnedPositions>;
using Stem = Layer<Forward<Wte, Wpe>, Backward<Wpe, Wte>>;

using Ln1 = Step<"ln_1", ops::LayerNorm>;
using CAttn = Step<"attn.c_attn", ops::Linear>;
using Attn = Step<"attn", ops::Attention>;
using AttnProj = Step<"attn.c_proj", ops::Linear>;
using Residual1 = Step<"residual_attn", ops::ResidualAdd>;
using Ln2 = Step<"ln_2", ops::LayerNorm>;
using CFc = Step<"mlp.c_fc", ops::Linear>;
using Act = Step<"mlp.act", ops::Gelu>;
using MlpProj = Step<"mlp.c_proj", ops::Linear>;
using Residual2 = Step<"residual_mlp", ops::ResidualAdd>;
using Block = Layer<Forward<Ln1, CAttn, Attn, AttnProj, Residual1, Ln2, CFc, Act, MlpProj, Residual2>,
                    Backward<Residual2, MlpProj, Act, CFc, Ln2, Residual1, AttnProj, Attn, CAttn, Ln1>>;

using LnF = Step<"ln_f", ops::LayerNorm>;
using Head = HeadOf<LnF>;  // ln_f, lm_head, loss
}  // namespace gpt2

struct Gpt2Family : FamilyLayers<Family::Gpt2, gpt2::Stem, gpt2::Block, gpt2::Head> {
  // --- parameters -------------------------------------------------------------
  // Indices into the parameter list: block l's (a weight and a bias per
  // module), and the stem's and head's.
  struct BlockParams {
    std::size_t n1_w = npos, n1_b = npos;      // ln_1
    std::size_t attn_w = npos, attn_b = npos;  // attn.c_attn
    std::size_t o_w = npos, o_b = npos;        // attn.c_proj
    std::size_t n2_w = npos, n2_b = npos;      // ln_2
    std::size_t fc_w = npos, fc_b = npos;      // mlp.c_fc
    std::size_t down_w = npos, down_b = npos;  // mlp.c_proj
  };
  struct OuterParams {
    std::size_t wte = npos, wpe = npos, nf_w = npos, nf_b = npos, lm_head = npos;
  };
  template <class Table>
  static void param_table(const ModelConfig& c, Table& t) {
    const ParamShapes s(c);
    using P = BlockParams;
    t.outer(s.matrix("transformer.wte.weight", s.V, s.D), &OuterParams::wte);
    t.outer(s.matrix("transformer.wpe.weight", s.S, s.D), &OuterParams::wpe);
    for (std::size_t l = 0; l < static_cast<std::size_t>(c.n_layer); ++l) {
      const std::string p = "transformer.h." + std::to_string(l) + ".";
      t.block(l, s.ones(p + "ln_1.weight", s.D), &P::n1_w);
      t.block(l, s.zeros(p + "ln_1.bias", s.D), &P::n1_b);
      t.block(l, s.matrix(p + "attn.c_attn.weight", 3 * s.D, s.D), &P::attn_w);
      t.block(l, s.zeros(p + "attn.c_attn.bias", 3 * s.D), &P::attn_b);
      t.block(l, s.residual(p + "attn.c_proj.weight", s.D, s.D), &P::o_w);
      t.block(l, s.zeros(p + "attn.c_proj.bias", s.D), &P::o_b);
      t.block(l, s.ones(p + "ln_2.weight", s.D), &P::n2_w);
      t.block(l, s.zeros(p + "ln_2.bias", s.D), &P::n2_b);
      t.block(l, s.matrix(p + "mlp.c_fc.weight", s.F, s.D), &P::fc_w);
      t.block(l, s.zeros(p + "mlp.c_fc.bias", s.F), &P::fc_b);
      t.block(l, s.residual(p + "mlp.c_proj.weight", s.D, s.F), &P::down_w);
      t.block(l, s.zeros(p + "mlp.c_proj.bias", s.D), &P::down_b);
    }
    t.outer(s.ones("transformer.ln_f.weight", s.D), &OuterParams::nf_w);
    t.outer(s.zeros("transformer.ln_f.bias", s.D), &OuterParams::nf_b);
    untied_lm_head<OuterParams>(s, t);
  }

  // --- activations ------------------------------------------------------------
  enum AuxSlot { kAct, kAuxSlots };
  template <class Buf, class Aux>
  struct BlockActs {
    Buf n1, n1_mean, n1_rstd, qkv, att, lse, mid, n2, n2_mean, n2_rstd, fc, act;
    Aux aux[kAuxSlots];
    void resize(const RunSizes& r) {
      const std::size_t N = r.N, D = r.D, F = r.F;
      n1.resize(N * D);
      n1_mean.resize(N);
      n1_rstd.resize(N);
      qkv.resize(N * 3 * D);
      att.resize(N * r.qdim);
      lse.resize(r.B * r.Hq * r.S);
      mid.resize(N * D);
      n2.resize(N * D);
      n2_mean.resize(N);
      n2_rstd.resize(N);
      fc.resize(N * F);
      act.resize(N * F);
    }
  };
  template <class Buf>
  struct Scratch {
    Buf emb, branch, hn_mean, hn_rstd;
    Buf dtmp, datt, dqkv, dfc, dact;
    void resize(const RunSizes& r, bool train) {
      const std::size_t N = r.N, D = r.D, F = r.F;
      emb.resize(N * D);
      branch.resize(N * D);
      hn_mean.resize(N);
      hn_rstd.resize(N);
      if (!train) return;
      dtmp.resize(N * D);
      datt.resize(N * r.qdim);
      dqkv.resize(N * 3 * D);
      dfc.resize(N * F);
      dact.resize(N * F);
    }
  };

  // --- the step handlers --------------------------------------------------------
  template <class E>
  struct StemHandlers {
    E& e;
    void forward(gpt2::Wte) {
      e.k_.template forward<ops::Embedding>({e.N_, e.V_, e.D_},
                                            {.ids = e.ids_, .wte = e.P(e.wte_), .y = e.s_.emb.data()});
    }
    void forward(gpt2::Wpe) {
      e.k_.template forward<ops::LearnedPositions>(
          e.positions(), {.x = e.s_.emb.data(), .wpe = e.P(e.outer_.wpe), .y = e.acts_[0].x.data()});
    }
    void backward(gpt2::Wpe) {
      e.k_.template backward<ops::LearnedPositions>(
          e.positions(), {.dy = e.s_.dx.data(), .dx = e.s_.dx.data(), .dwpe = e.G(e.outer_.wpe)});
    }
    void backward(gpt2::Wte) { e.embedding_backward(); }
  };

  template <class E>
  struct BlockHandlers {
    using T = typename E::Scalar;
    E& e;
    std::size_t l;
    typename E::LayerActs& a;
    const BlockParams& p;
    typename E::Shared& s;
    std::size_t N, D, F;
    BlockHandlers(E& en, std::size_t layer)
        : e(en), l(layer), a(en.acts_[layer]), p(en.layers_[layer]), s(en.s_), N(en.N_), D(en.D_), F(en.F_) {}

    void forward(gpt2::Ln1) {
      e.k_.template forward<ops::LayerNorm>(e.norm(N, D), {.x = a.x.data(), .gamma = e.P(p.n1_w), .beta = e.P(p.n1_b),
                                                           .y = a.n1.data(), .mean = a.n1_mean.data(),
                                                           .rstd = a.n1_rstd.data()});
    }
    void forward(gpt2::CAttn) {
      e.linear_fwd({N, D, 3 * D, true},
                                         {.x = a.n1.data(), .w = e.P(p.attn_w), .b = e.P(p.attn_b), .y = a.qkv.data()});
    }
    void forward(gpt2::Attn) {
      const T* qkv = a.qkv.data();
      e.attention_fwd({.q = qkv, .ldq = 3 * D, .k = qkv + D, .v = qkv + 2 * D,
                       .ldkv = 3 * D, .o = a.att.data(), .lse = a.lse.data()});
    }
    void forward(gpt2::AttnProj) {
      e.linear_fwd({N, D, D, true},
                                         {.x = a.att.data(), .w = e.P(p.o_w), .b = e.P(p.o_b), .y = s.branch.data()});
    }
    void forward(gpt2::Residual1) {
      e.k_.template forward<ops::ResidualAdd>(e.elems(N * D),
                                              {.a = a.x.data(), .b = s.branch.data(), .y = a.mid.data()});
    }
    void forward(gpt2::Ln2) {
      e.k_.template forward<ops::LayerNorm>(e.norm(N, D), {.x = a.mid.data(), .gamma = e.P(p.n2_w), .beta = e.P(p.n2_b),
                                                           .y = a.n2.data(), .mean = a.n2_mean.data(),
                                                           .rstd = a.n2_rstd.data()});
    }
    // Units fusion (model/units_fusion.hpp): the MLP chain runs in c_fc's step.
    void forward(gpt2::CFc) {
      if (units_fusion::on(e))
        return units_fusion::mlp_gelu_fwd(e, N, D, F, a.n2.data(), e.P(p.fc_w), e.P(p.fc_b), e.P(p.down_w),
                                          e.P(p.down_b), a.fc.data(), a.act.data(), a.aux[kAct], s.branch.data());
      e.linear_fwd({N, D, F, true},
                                         {.x = a.n2.data(), .w = e.P(p.fc_w), .b = e.P(p.fc_b), .y = a.fc.data()});
    }
    void forward(gpt2::Act) {
      if (units_fusion::on(e)) return;  // done by c_fc's fused chain
      e.k_.template forward<ops::Gelu>(e.elems(N * F), {.x = a.fc.data(), .y = a.act.data()}, a.aux[kAct]);
    }
    void forward(gpt2::MlpProj) {
      if (units_fusion::on(e)) return;  // done by c_fc's fused chain
      e.linear_fwd(
          {N, F, D, true}, {.x = a.act.data(), .w = e.P(p.down_w), .b = e.P(p.down_b), .y = s.branch.data()});
    }
    void forward(gpt2::Residual2) {
      e.k_.template forward<ops::ResidualAdd>(e.elems(N * D),
                                              {.a = a.mid.data(), .b = s.branch.data(), .y = e.block_out(l)});
    }

    // s.dx holds the gradient of the block's output; the residual steps route
    // it unchanged to both inputs (no copy: both alias s.dx).
    void backward(gpt2::Residual2) {
      e.k_.template backward<ops::ResidualAdd>(e.elems(N * D),
                                               {.dy = s.dx.data(), .da = s.dx.data(), .db = s.dx.data()});
    }
    void backward(gpt2::MlpProj) {
      e.linear_bwd({N, F, D, true}, {.x = a.act.data(), .w = e.P(p.down_w), .dy = s.dx.data(),
                                                            .dx = s.dact.data(), .dw = e.G(p.down_w),
                                                            .db = e.G(p.down_b)});
    }
    void backward(gpt2::Act) {
      e.k_.template backward<ops::Gelu>(e.elems(N * F), {.x = a.fc.data(), .dy = s.dact.data(), .dx = s.dfc.data()},
                                        a.aux[kAct]);
    }
    void backward(gpt2::CFc) {
      e.linear_bwd({N, D, F, true}, {.x = a.n2.data(), .w = e.P(p.fc_w), .dy = s.dfc.data(),
                                                            .dx = s.dn.data(), .dw = e.G(p.fc_w), .db = e.G(p.fc_b)});
    }
    void backward(gpt2::Ln2) { layernorm_backward(a.mid.data(), p.n2_w, p.n2_b, a.n2_mean.data(), a.n2_rstd.data()); }
    void backward(gpt2::Residual1) {
      e.k_.template backward<ops::ResidualAdd>(e.elems(N * D),
                                               {.dy = s.dx.data(), .da = s.dx.data(), .db = s.dx.data()});
    }
    void backward(gpt2::AttnProj) {
      e.linear_bwd({N, D, D, true}, {.x = a.att.data(), .w = e.P(p.o_w), .dy = s.dx.data(),
                                                            .dx = s.datt.data(), .dw = e.G(p.o_w), .db = e.G(p.o_b)});
    }
    void backward(gpt2::Attn) {
      const T* qkv = a.qkv.data();
      T* d = s.dqkv.data();
      e.attention_bwd({.q = qkv, .ldq = 3 * D, .k = qkv + D, .v = qkv + 2 * D,
                       .ldkv = 3 * D, .o = a.att.data(), .lse = a.lse.data(),
                       .dout = s.datt.data(), .dq = d, .dk = d + D,
                       .dv = d + 2 * D});
    }
    void backward(gpt2::CAttn) {
      e.linear_bwd({N, D, 3 * D, true}, {.x = a.n1.data(), .w = e.P(p.attn_w),
                                                                .dy = s.dqkv.data(), .dx = s.dn.data(),
                                                                .dw = e.G(p.attn_w), .db = e.G(p.attn_b)});
    }
    void backward(gpt2::Ln1) { layernorm_backward(a.x.data(), p.n1_w, p.n1_b, a.n1_mean.data(), a.n1_rstd.data()); }

    // A block norm's backward: its input's gradient (from the norm output's, dn)
    // is added to the residual stream's (dx), which the block input also feeds.
    void layernorm_backward(const T* x, std::size_t gamma, std::size_t beta, const T* mean, const T* rstd) {
      e.k_.template backward<ops::LayerNorm>(e.norm(N, D), {.x = x, .gamma = e.P(gamma), .mean = mean, .rstd = rstd,
                                                            .dy = s.dn.data(), .dx = s.dtmp.data(),
                                                            .dgamma = e.G(gamma), .dbeta = e.G(beta)});
      e.k_.add_into(N * D, s.dx.data(), s.dtmp.data());
    }
  };

  // The head: ln_f, then the LM head and the loss (family.hpp).
  template <class E>
  struct FinalNorm {
    E& e;
    void forward(gpt2::LnF) {
      e.k_.template forward<ops::LayerNorm>(e.norm(e.head_rows(), e.D_), {.x = e.head_input(),
                                                                          .gamma = e.P(e.outer_.nf_w),
                                                                          .beta = e.P(e.outer_.nf_b),
                                                                          .y = e.s_.hn.data(),
                                                                          .mean = e.s_.hn_mean.data(),
                                                                          .rstd = e.s_.hn_rstd.data()});
    }
    void backward(gpt2::LnF) {
      e.k_.template backward<ops::LayerNorm>(e.norm(e.N_, e.D_), {.x = e.s_.h.data(), .gamma = e.P(e.outer_.nf_w),
                                                                  .mean = e.s_.hn_mean.data(),
                                                                  .rstd = e.s_.hn_rstd.data(), .dy = e.s_.dn.data(),
                                                                  .dx = e.s_.dx.data(), .dgamma = e.G(e.outer_.nf_w),
                                                                  .dbeta = e.G(e.outer_.nf_b)});
    }
  };
  template <class E>
  using HeadHandlers = Assembled<FinalNorm<E>, LmHeadAndLoss<E>>;
};

}  // namespace lockstep::model
