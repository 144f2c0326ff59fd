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
    void forward(gpt2::Wte) { e.k_.embedding_fwd({e.N_, e.V_, e.D_}, e.ids_, e.P(e.wte_), e.s_.emb.data()); }
    void forward(gpt2::Wpe) {
      e.k_.positions_fwd(e.positions(), e.s_.emb.data(), e.P(e.outer_.wpe), e.acts_[0].x.data());
    }
    void backward(gpt2::Wpe) {
      e.k_.positions_bwd(e.positions(), e.s_.dx.data(), e.s_.dx.data(), e.G(e.outer_.wpe));
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
      e.k_.layernorm_fwd(e.norm(N, D), a.x.data(), e.P(p.n1_w), e.P(p.n1_b), a.n1.data(), a.n1_mean.data(),
                         a.n1_rstd.data());
    }
    void forward(gpt2::CAttn) {
      e.k_.linear_fwd({N, D, 3 * D, true}, a.n1.data(), e.P(p.attn_w), e.P(p.attn_b), a.qkv.data());
    }
    void forward(gpt2::Attn) {
      const T* qkv = a.qkv.data();
      e.k_.attention_fwd(e.attention(), qkv, 3 * D, qkv + D, qkv + 2 * D, 3 * D, a.att.data(), a.lse.data());
    }
    void forward(gpt2::AttnProj) {
      e.k_.linear_fwd({N, D, D, true}, a.att.data(), e.P(p.o_w), e.P(p.o_b), s.branch.data());
    }
    void forward(gpt2::Residual1) { e.k_.residual_fwd(e.elems(N * D), a.x.data(), s.branch.data(), a.mid.data()); }
    void forward(gpt2::Ln2) {
      e.k_.layernorm_fwd(e.norm(N, D), a.mid.data(), e.P(p.n2_w), e.P(p.n2_b), a.n2.data(), a.n2_mean.data(),
                         a.n2_rstd.data());
    }
    void forward(gpt2::CFc) { e.k_.linear_fwd({N, D, F, true}, a.n2.data(), e.P(p.fc_w), e.P(p.fc_b), a.fc.data()); }
    void forward(gpt2::Act) { e.k_.gelu_fwd(e.elems(N * F), a.fc.data(), a.act.data(), a.aux[kAct]); }
    void forward(gpt2::MlpProj) {
      e.k_.linear_fwd({N, F, D, true}, a.act.data(), e.P(p.down_w), e.P(p.down_b), s.branch.data());
    }
    void forward(gpt2::Residual2) { e.k_.residual_fwd(e.elems(N * D), a.mid.data(), s.branch.data(), e.block_out(l)); }

    // s.dx holds the gradient of the block's output; the residual steps route
    // it unchanged to both inputs (no copy: both alias s.dx).
    void backward(gpt2::Residual2) { e.k_.residual_bwd(e.elems(N * D), s.dx.data(), s.dx.data(), s.dx.data()); }
    void backward(gpt2::MlpProj) {
      e.k_.linear_bwd({N, F, D, true}, a.act.data(), e.P(p.down_w), s.dx.data(), s.dact.data(), e.G(p.down_w),
                      e.G(p.down_b));
    }
    void backward(gpt2::Act) { e.k_.gelu_bwd(e.elems(N * F), a.fc.data(), s.dact.data(), s.dfc.data(), a.aux[kAct]); }
    void backward(gpt2::CFc) {
      e.k_.linear_bwd({N, D, F, true}, a.n2.data(), e.P(p.fc_w), s.dfc.data(), s.dn.data(), e.G(p.fc_w),
                      e.G(p.fc_b));
    }
    void backward(gpt2::Ln2) {
      e.k_.layernorm_bwd(e.norm(N, D), a.mid.data(), e.P(p.n2_w), a.n2_mean.data(), a.n2_rstd.data(), s.dn.data(),
                         s.dtmp.data(), e.G(p.n2_w), e.G(p.n2_b));
      e.k_.add_into(N * D, s.dx.data(), s.dtmp.data());
    }
    void backward(gpt2::Residual1) { e.k_.residual_bwd(e.elems(N * D), s.dx.data(), s.dx.data(), s.dx.data()); }
    void backward(gpt2::AttnProj) {
      e.k_.linear_bwd({N, D, D, true}, a.att.data(), e.P(p.o_w), s.dx.data(), s.datt.data(), e.G(p.o_w),
                      e.G(p.o_b));
    }
    void backward(gpt2::Attn) {
      const T* qkv = a.qkv.data();
      T* d = s.dqkv.data();
      e.k_.attention_bwd(e.attention(), qkv, 3 * D, qkv + D, qkv + 2 * D, 3 * D, a.att.data(), a.lse.data(),
                         s.datt.data(), d, d + D, d + 2 * D);
    }
    void backward(gpt2::CAttn) {
      e.k_.linear_bwd({N, D, 3 * D, true}, a.n1.data(), e.P(p.attn_w), s.dqkv.data(), s.dn.data(), e.G(p.attn_w),
                      e.G(p.attn_b));
    }
    void backward(gpt2::Ln1) {
      e.k_.layernorm_bwd(e.norm(N, D), a.x.data(), e.P(p.n1_w), a.n1_mean.data(), a.n1_rstd.data(), s.dn.data(),
                         s.dtmp.data(), e.G(p.n1_w), e.G(p.n1_b));
      e.k_.add_into(N * D, s.dx.data(), s.dtmp.data());
    }
  };

  // The head: ln_f, then the LM head and the loss (family.hpp).
  template <class E>
  struct FinalNorm {
    E& e;
    void forward(gpt2::LnF) {
      e.k_.layernorm_fwd(e.norm(e.head_rows(), e.D_), e.head_input(), e.P(e.outer_.nf_w), e.P(e.outer_.nf_b),
                         e.s_.hn.data(), e.s_.hn_mean.data(), e.s_.hn_rstd.data());
    }
    void backward(gpt2::LnF) {
      e.k_.layernorm_bwd(e.norm(e.N_, e.D_), e.s_.h.data(), e.P(e.outer_.nf_w), e.s_.hn_mean.data(),
                         e.s_.hn_rstd.data(), e.s_.dn.data(), e.s_.dx.data(), e.G(e.outer_.nf_w), e.G(e.outer_.nf_b));
    }
  };
  template <class E>
  using HeadHandlers = Assembled<FinalNorm<E>, LmHeadAndLoss<E>>;
};

}  // namespace lockstep::model
