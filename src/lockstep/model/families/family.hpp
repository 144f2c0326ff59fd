// What a family declares, and the pieces the families share.
//
// A family (gpt2.hpp, llama.hpp, bitnet.hpp) is data for the engine
// (transformer.hpp): a struct that names
//   id, Stem, Block, Head        its Family and its three layers (layers.hpp:
//                                typed op lists), through FamilyLayers;
//   BlockParams, OuterParams     the indices of its parameters (one block's; the
//                                stem's and the head's), filled from
//   param_table(cfg, table)      its parameter table: every tensor's Hugging Face
//                                name, shape, decay and init, in checkpoint
//                                order, each with the index it fills — the one
//                                place its names are written (params.cpp's
//                                param_specs and the engine's indexing both read it);
//   BlockActs<Buf, Aux>          what one block's forward keeps for its backward
//                                (the engine adds the block input x), sized by
//                                its resize(RunSizes);
//   Scratch<Buf>                 the buffers used within one step pair and the
//                                backward's running gradients (the engine adds
//                                the residual stream's and the head's own);
//   StemHandlers<E>, BlockHandlers<E>, HeadHandlers<E>
//                                one handler per listed step, over the engine E:
//                                each calls its op's kernel, e.k_.<kernel>(...).
// The engine checks the shape of it with the ModelFamily concept; a listed
// step without a handler does not compile (run_forward / run_backward).
#pragma once

#include <concepts>
#include <cstddef>
#include <vector>

#include "lockstep/model/config.hpp"
#include "lockstep/model/kernel_aux.hpp"
#include "lockstep/model/layers.hpp"
#include "lockstep/model/params.hpp"

namespace lockstep::model {

// A parameter index a family has not filled (yet).
inline constexpr std::size_t npos = static_cast<std::size_t>(-1);

// The sizes a pass's buffers are made from (the config's and the batch's).
struct RunSizes {
  std::size_t B, S, N;          // batch, sequence, rows N = B·S
  std::size_t V, D, F;          // vocabulary, model width, FFN width
  std::size_t Hq, qdim, kvdim;  // query heads, q width, k/v width
};

// A family's name and layers (the struct that declares a family derives
// from this).
template <Family Id, class StemLayer, class BlockLayer, class HeadLayer>
struct FamilyLayers {
  static constexpr Family id = Id;
  using Stem = StemLayer;
  using Block = BlockLayer;
  using Head = HeadLayer;
};

// Every family's head ends alike: its final norm, then the LM head and the
// loss (LmHeadAndLoss below runs those two).
template <class FinalNormStep>
using HeadOf = Layer<Forward<FinalNormStep, Step<"lm_head", ops::Linear>, Step<"loss", ops::CrossEntropy>>,
                     Backward<Step<"loss", ops::CrossEntropy>, Step<"lm_head", ops::Linear>, FinalNormStep>>;

// Every family's last entry: the LM head's own matrix, unless it is tied to
// the token embedding (then the engine reads the embedding in its place).
template <class OuterParams, class Table>
void untied_lm_head(const ParamShapes& s, Table& t) {
  if (!s.tied) t.outer(s.matrix("lm_head.weight", s.V, s.D), &OuterParams::lm_head);
}

// A layer's handlers assembled from parts (each a struct of handlers built
// from the engine): the parts' overloads side by side.
template <class... Parts>
struct Assembled : Parts... {
  template <class E>
  explicit Assembled(E& e) : Parts{e}... {}
  using Parts::forward...;
  using Parts::backward...;
};

// The end of every family's head: the LM head (the tied embedding or
// lm_head.weight) over the final norm's output, and the loss. In Logits mode
// the LM head runs on the last row only and the loss step does nothing.
template <class E>
struct LmHeadAndLoss {
  E& e;
  std::size_t rows;  // rows of the final norm's output the LM head reads
  explicit LmHeadAndLoss(E& en) : e(en), rows(en.head_rows()) {}
  void forward(Step<"lm_head", ops::Linear>) {
    e.linear_fwd({rows, e.D_, e.V_, false},
                 {.x = e.s_.hn.data(), .w = e.P(e.head_), .b = nullptr, .y = e.s_.logits.data()}, true);
  }
  void forward(Step<"loss", ops::CrossEntropy>) {
    if (e.logits_only()) return;
    e.k_.template forward<ops::CrossEntropy>(
        {e.N_, e.V_},
        {.logits = e.s_.logits.data(), .targets = e.targets_, .loss = e.s_.loss.data(), .lse = e.s_.lse.data()});
  }
  // The logits' gradient overwrites the logits (they are not read again).
  void backward(Step<"loss", ops::CrossEntropy>) {
    e.k_.template backward<ops::CrossEntropy>({e.N_, e.V_}, {.logits = e.s_.logits.data(), .targets = e.targets_,
                                                             .lse = e.s_.lse.data(), .dloss = e.s_.dloss.data(),
                                                             .dlogits = e.s_.logits.data()});
  }
  void backward(Step<"lm_head", ops::Linear>) {
    e.linear_bwd({e.N_, e.D_, e.V_, false},
                 {.x = e.s_.hn.data(), .w = e.P(e.head_), .dy = e.s_.logits.data(), .dx = e.s_.dn.data(),
                  .dw = e.G(e.head_), .db = nullptr},
                 true);
  }
};

template <class F>
concept ModelFamily = requires {
  { F::id } -> std::convertible_to<Family>;
  typename F::Stem;
  typename F::Block;
  typename F::Head;
  typename F::BlockParams;
  typename F::OuterParams;
  typename F::template BlockActs<std::vector<float>, Aux>;
  typename F::template Scratch<std::vector<float>>;
}
&&requires(typename F::OuterParams o, typename F::template BlockActs<std::vector<float>, Aux> a,
           typename F::template Scratch<std::vector<float>> s, const RunSizes& r) {
  o.wte;      // every family has a token embedding
  o.lm_head;  // and an LM head (npos when tied)
  a.resize(r);
  s.resize(r, true);
};

}  // namespace lockstep::model
