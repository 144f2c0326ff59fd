// The transformer: the three families' forward and backward as the
// compositions their layer lists declare (layers.hpp), templated on the
// scalar T and on a kernel set K:
//
//   Engine<double, SpecKernels<double>>  the op specs in double: what the
//                                        whole-model gradient check differentiates;
//   Engine<float,  SpecKernels<float>>   the op specs in float: the canonical bits;
//   Engine<float,  cpu::OpKernels>       the fast CPU model (make_cpu_model): the
//                                        same bits, many times faster.
//
// A pass runs the stem list, every block's list, and the head list with
// run_forward, then (training) the head's, the blocks' (last layer first) and
// the stem's backward lists with run_backward. Each step's handler below calls
// the kernel of the step's op — nothing else computes. Glue that is not an op
// is exact and stated here:
//   * GPT-2's fused c_attn output [N, 3D] is read as q | k | v column blocks
//     (strided rows, no arithmetic);
//   * a tensor read by several ops (the residual stream, a norm's output
//     feeding q/k/v or gate/up, the tied embedding) receives the sum of their
//     gradients in the order the backward chain runs them: the first one
//     writes, each later one is added (acc = acc + g);
//   * the loss is the mean over the rows with a target (target < 0 ignores a
//     row): loss = sum(row losses) / n (canonical sum, one division), and each
//     row's loss cotangent is 1 / n;
//   * gradients: written into Param::grad, or with `accumulate` computed apart
//     and added: grad = grad + new.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "lockstep/model/config.hpp"
#include "lockstep/model/layers.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/model/params.hpp"
#include "lockstep/model/spec_kernels.hpp"

namespace lockstep::model {

// A parameter over any scalar (Param is the float one the trainer sees).
template <class T>
struct BasicParam {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<T> value;
  std::vector<T> grad;
  bool decay = true;
  bool trainable = true;
};
template <class T>
using ParamT = std::conditional_t<std::is_same_v<T, float>, Param, BasicParam<T>>;

template <class T>
std::vector<ParamT<T>> make_params(const ModelConfig& cfg) {
  std::vector<ParamT<T>> ps;
  for (const ParamSpec& s : param_specs(cfg)) {
    std::size_t n = 1;
    for (std::int64_t d : s.shape) n *= static_cast<std::size_t>(d);
    ParamT<T> p;
    p.name = s.name;
    p.shape = s.shape;
    p.value.assign(n, T(0));
    p.grad.assign(n, T(0));
    p.decay = s.decay;
    ps.push_back(std::move(p));
  }
  return ps;
}

// A trace line per step run: "forward block 0 ln_1:layernorm".
using Trace = std::vector<std::string>;

// What a kernel set may bring besides its kernels (a device kernel set brings
// all four; the host ones none):
//   K::Buffer<T>   the storage of activations and temporary gradients
//                  (default std::vector<T>);
//   K::Aux         what a forward keeps for its backward (default model::Aux);
//   stage_indices  copies the batch's token ids and targets where the kernels
//                  read them (default: the caller's host pointers);
//   loss_mean, fill, copy_to_host   the engine's glue on that storage
//                  (default: the canonical sum divided by the count of rows
//                  with a target, std::fill and a copy on the host).
template <class K, class T>
struct BufferOf {
  using type = std::vector<T>;
};
template <class K, class T>
  requires requires { typename K::template Buffer<T>; }
struct BufferOf<K, T> {
  using type = typename K::template Buffer<T>;
};
template <class K>
struct AuxOf {
  using type = Aux;
};
template <class K>
  requires requires { typename K::Aux; }
struct AuxOf<K> {
  using type = typename K::Aux;
};

// PT: the parameter type, whose value and grad live where K's kernels read them
// (ParamT<T> on the host; a device kernel set's model brings its own).
template <class T, class K, class PT = ParamT<T>>
class Engine {
 public:
  using Index = ops::Index;
  using Buf = typename BufferOf<K, T>::type;
  using Aux = typename AuxOf<K>::type;

  Engine(const ModelConfig& cfg, std::vector<PT>& params, K& kernels)
      : cfg_(cfg), params_(params), k_(kernels) {
    cfg_.validate();
    V_ = static_cast<std::size_t>(cfg.vocab_size);
    D_ = static_cast<std::size_t>(cfg.d_model);
    F_ = static_cast<std::size_t>(cfg.d_ff);
    L_ = static_cast<std::size_t>(cfg.n_layer);
    Hq_ = static_cast<std::size_t>(cfg.n_head);
    Hkv_ = static_cast<std::size_t>(cfg.n_kv_head);
    Dh_ = static_cast<std::size_t>(cfg.head_dim);
    qdim_ = Hq_ * Dh_;
    kvdim_ = Hkv_ * Dh_;
    index_params();
  }

  const ModelConfig& config() const { return cfg_; }
  Trace* trace = nullptr;  // when set, every step run is appended
  // Activation recomputation: between the passes only each block's input is
  // kept; a block's forward runs again (the same kernels on the same input:
  // the same bits) just before its backward. One block's activations live at
  // a time instead of n_layer blocks'.
  bool recompute_blocks = false;

  // One pass over a batch: mean cross-entropy; with `backward`, the gradient
  // of that mean into every parameter (overwritten, or added with accumulate).
  T run(const Index* ids, const Index* targets, std::size_t batch, std::size_t seq, bool backward,
        bool accumulate) {
    start(batch, seq, Mode::Train);
    // The mean is over the rows with a target (counted on the host's copy).
    const std::size_t n_valid = check_tokens(ids, targets);
    targets_ = stage(targets, 1);
    ids_ = stage(ids, 0);
    forward_pass(ids_, targets_);
    T loss;
    if constexpr (requires { k_.loss_mean(s_.loss.data(), N_, n_valid); })
      loss = k_.loss_mean(s_.loss.data(), N_, n_valid);
    else
      loss = n_valid == 0 ? T(0) : ops::Math<T>::sum(s_.loss.data(), N_) / static_cast<T>(n_valid);
    if (!backward) return loss;
    const T dl = n_valid == 0 ? T(0) : T(1) / static_cast<T>(n_valid);
    if constexpr (requires { k_.fill(s_.dloss.data(), N_, dl); })
      k_.fill(s_.dloss.data(), N_, dl);
    else
      std::fill(s_.dloss.data(), s_.dloss.data() + N_, dl);
    prepare_grads(accumulate);
    backward_pass(ids_);
    finish_grads(accumulate);
    return loss;
  }

  // Logits of the last position of one sequence (batch 1): the stem and the
  // blocks over every position, the head over the last row only (a row's
  // values never depend on the rows computed with it).
  std::vector<T> last_logits(const Index* ids, std::size_t seq) {
    start(1, seq, Mode::Logits);
    check_tokens(ids, nullptr);
    ids_ = stage(ids, 0);
    targets_ = nullptr;
    forward_pass(ids_, nullptr);
    std::vector<T> out(V_);
    if constexpr (requires { k_.copy_to_host(out.data(), s_.logits.data(), V_); })
      k_.copy_to_host(out.data(), s_.logits.data(), V_);
    else
      std::copy(s_.logits.data(), s_.logits.data() + V_, out.data());
    return out;
  }

 private:
  enum class Mode { Train, Logits };

  // Every token id and target is checked on the host before any kernel runs,
  // with the op specifications' own messages: nothing is half-done, and a
  // device kernel set (whose kernels cannot throw) refuses what the CPU refuses.
  // Returns how many rows have a target (>= 0).
  std::size_t check_tokens(const Index* ids, const Index* targets) const {
    const ops::Embedding::Config ec{N_, V_, D_};
    const ops::CrossEntropy::Config cc{N_, V_};
    std::size_t with_target = 0;
    for (std::size_t n = 0; n < N_; ++n) {
      ops::Embedding::row_of(ec, ids[n]);
      if (targets != nullptr && targets[n] >= 0) {
        ops::CrossEntropy::target(cc, targets[n]);
        ++with_target;
      }
    }
    return with_target;
  }

  const Index* stage(const Index* host, int slot) {
    if constexpr (requires { k_.stage_indices(host, N_, slot); })
      return k_.stage_indices(host, N_, slot);
    else
      return host;
  }
  enum AuxSlot { kAct, kQ, kK, kV, kO, kGate, kUp, kDown, kAuxSlots };

  // Per-layer values the backward reads (a block's input x is the previous
  // block's output).
  struct LayerActs {
    Buf x, n1, n1_mean, n1_rstd, qkv, v, qr, kr, att, lse, sub1, sub1_rstd, mid, n2, n2_mean, n2_rstd,
        fc, gate, up, act, sub2, sub2_rstd;
    Aux aux[kAuxSlots];
    // Everything but the block input x changes hands (recompute_blocks).
    void swap_all_but_x(LayerActs& o) {
      using std::swap;
      for (auto f : {&LayerActs::n1, &LayerActs::n1_mean, &LayerActs::n1_rstd, &LayerActs::qkv, &LayerActs::v,
                     &LayerActs::qr, &LayerActs::kr, &LayerActs::att, &LayerActs::lse, &LayerActs::sub1,
                     &LayerActs::sub1_rstd, &LayerActs::mid, &LayerActs::n2, &LayerActs::n2_mean, &LayerActs::n2_rstd,
                     &LayerActs::fc, &LayerActs::gate, &LayerActs::up, &LayerActs::act, &LayerActs::sub2,
                     &LayerActs::sub2_rstd})
        swap(this->*f, o.*f);
      for (std::size_t i = 0; i < kAuxSlots; ++i) swap(aux[i], o.aux[i]);
    }
  };
  // Values used within one step pair, and the backward's running gradients.
  struct Shared {
    Buf emb, q, k, branch, h, hn, hn_mean, hn_rstd, logits, loss, lse, dloss;
    Buf dx, dn, dtmp, datt, dsub1, dqkv, dq, dqr, dk, dkr, dv, dfc, dup, dact, dsub2, demb;
  };
  // Parameter indices of one layer (npos where the family has none).
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  struct LayerParams {
    std::size_t n1_w = npos, n1_b = npos, attn_w = npos, attn_b = npos, q_w = npos, k_w = npos, v_w = npos,
                sub1_w = npos, o_w = npos, o_b = npos, n2_w = npos, n2_b = npos, fc_w = npos, fc_b = npos,
                gate_w = npos, up_w = npos, sub2_w = npos, down_w = npos, down_b = npos;
  };

  // --- parameters -----------------------------------------------------------
  std::size_t find(const std::string& name) const {
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].name == name) return i;
    throw std::invalid_argument("model: no parameter named " + name);
  }
  void index_params() {
    const bool gpt = cfg_.family == Family::Gpt2;
    layers_.assign(L_, {});
    for (std::size_t l = 0; l < L_; ++l) {
      LayerParams& p = layers_[l];
      if (gpt) {
        const std::string b = "transformer.h." + std::to_string(l) + ".";
        p.n1_w = find(b + "ln_1.weight");
        p.n1_b = find(b + "ln_1.bias");
        p.attn_w = find(b + "attn.c_attn.weight");
        p.attn_b = find(b + "attn.c_attn.bias");
        p.o_w = find(b + "attn.c_proj.weight");
        p.o_b = find(b + "attn.c_proj.bias");
        p.n2_w = find(b + "ln_2.weight");
        p.n2_b = find(b + "ln_2.bias");
        p.fc_w = find(b + "mlp.c_fc.weight");
        p.fc_b = find(b + "mlp.c_fc.bias");
        p.down_w = find(b + "mlp.c_proj.weight");
        p.down_b = find(b + "mlp.c_proj.bias");
      } else {
        const std::string b = "model.layers." + std::to_string(l) + ".";
        p.n1_w = find(b + "input_layernorm.weight");
        p.q_w = find(b + "self_attn.q_proj.weight");
        p.k_w = find(b + "self_attn.k_proj.weight");
        p.v_w = find(b + "self_attn.v_proj.weight");
        p.o_w = find(b + "self_attn.o_proj.weight");
        p.n2_w = find(b + "post_attention_layernorm.weight");
        p.gate_w = find(b + "mlp.gate_proj.weight");
        p.up_w = find(b + "mlp.up_proj.weight");
        p.down_w = find(b + "mlp.down_proj.weight");
        if (cfg_.family == Family::Bitnet) {
          p.sub1_w = find(b + "self_attn.attn_sub_norm.weight");
          p.sub2_w = find(b + "mlp.ffn_sub_norm.weight");
        }
      }
    }
    if (gpt) {
      wte_ = find("transformer.wte.weight");
      wpe_ = find("transformer.wpe.weight");
      nf_w_ = find("transformer.ln_f.weight");
      nf_b_ = find("transformer.ln_f.bias");
    } else {
      wte_ = find("model.embed_tokens.weight");
      nf_w_ = find("model.norm.weight");
    }
    head_ = cfg_.tie_embeddings ? wte_ : find("lm_head.weight");
    for (const auto& p : params_) {
      std::size_t n = 1;
      for (std::int64_t d : p.shape) n *= static_cast<std::size_t>(d);
      if (p.value.size() != n || p.grad.size() != n)
        throw std::invalid_argument("model: parameter " + p.name + " has value/grad sizes that do not match its shape");
    }
  }
  const T* P(std::size_t i) const { return params_[i].value.data(); }
  T* G(std::size_t i) { return gdst_[i]; }
  std::size_t numel(std::size_t i) const { return params_[i].value.size(); }

  void prepare_grads(bool accumulate) {
    gdst_.assign(params_.size(), nullptr);
    if (gtmp_.size() != params_.size()) gtmp_.resize(params_.size());
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (accumulate || !params_[i].trainable) {
        gtmp_[i].resize(numel(i));
        gdst_[i] = gtmp_[i].data();
      } else {
        gdst_[i] = params_[i].grad.data();
      }
    }
  }
  void finish_grads(bool accumulate) {
    if (!accumulate) return;
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].trainable) k_.add_into(numel(i), params_[i].grad.data(), gtmp_[i].data());
  }

  // --- buffers ----------------------------------------------------------------
  void start(std::size_t batch, std::size_t seq, Mode mode) {
    if (batch == 0 || seq == 0) throw std::invalid_argument("model: batch and seq must be > 0");
    if (seq > static_cast<std::size_t>(cfg_.max_seq))
      throw std::invalid_argument(fmt::format("model: seq {} exceeds max_seq {}", seq, cfg_.max_seq));
    B_ = batch;
    S_ = seq;
    N_ = batch * seq;
    mode_ = mode;
    k_.begin_forward();
    const bool gpt = cfg_.family == Family::Gpt2, bit = cfg_.family == Family::Bitnet;
    const std::size_t N = N_, D = D_, F = F_;
    auto sz = [](Buf& v, std::size_t n) { v.resize(n); };
    acts_.resize(L_);
    // With recompute_blocks the per-layer activations other than x are sized
    // once, in work_, and lent to the block being run.
    for (std::size_t li = 0; li <= L_; ++li) {
      if (li == L_ && !recompute_blocks) break;
      LayerActs& a = li < L_ ? acts_[li] : work_;
      if (recompute_blocks && li < L_) {
        sz(a.x, N * D);
        LayerActs released;  // what a keep-all pass left here is freed
        a.swap_all_but_x(released);
        continue;
      }
      sz(a.x, N * D);
      sz(a.n1, N * D);
      sz(a.n1_mean, gpt ? N : 0);
      sz(a.n1_rstd, N);
      sz(a.qkv, gpt ? N * 3 * D : 0);
      sz(a.v, gpt ? 0 : N * kvdim_);
      sz(a.qr, gpt ? 0 : N * qdim_);
      sz(a.kr, gpt ? 0 : N * kvdim_);
      sz(a.att, N * qdim_);
      sz(a.lse, B_ * Hq_ * S_);
      sz(a.sub1, bit ? N * qdim_ : 0);
      sz(a.sub1_rstd, bit ? N : 0);
      sz(a.mid, N * D);
      sz(a.n2, N * D);
      sz(a.n2_mean, gpt ? N : 0);
      sz(a.n2_rstd, N);
      sz(a.fc, gpt ? N * F : 0);
      sz(a.gate, gpt ? 0 : N * F);
      sz(a.up, gpt ? 0 : N * F);
      sz(a.act, N * F);
      sz(a.sub2, bit ? N * F : 0);
      sz(a.sub2_rstd, bit ? N : 0);
    }
    Shared& s = s_;
    sz(s.emb, gpt ? N * D : 0);
    sz(s.q, gpt ? 0 : N * qdim_);
    sz(s.k, gpt ? 0 : N * kvdim_);
    sz(s.branch, N * D);
    sz(s.h, N * D);
    sz(s.hn, N * D);
    sz(s.hn_mean, gpt ? N : 0);
    sz(s.hn_rstd, N);
    sz(s.logits, (mode == Mode::Logits ? 1 : N) * V_);
    sz(s.loss, N);
    sz(s.lse, N);
    sz(s.dloss, N);
    if (mode == Mode::Train) {
      sz(s.dx, N * D);
      sz(s.dn, N * D);
      sz(s.dtmp, N * D);
      sz(s.datt, N * qdim_);
      sz(s.dsub1, bit ? N * qdim_ : 0);
      sz(s.dqkv, gpt ? N * 3 * D : 0);
      sz(s.dq, gpt ? 0 : N * qdim_);
      sz(s.dqr, gpt ? 0 : N * qdim_);
      sz(s.dk, gpt ? 0 : N * kvdim_);
      sz(s.dkr, gpt ? 0 : N * kvdim_);
      sz(s.dv, gpt ? 0 : N * kvdim_);
      sz(s.dfc, N * F);
      sz(s.dup, gpt ? 0 : N * F);
      sz(s.dact, N * F);
      sz(s.dsub2, bit ? N * F : 0);
      sz(s.demb, V_ * D);
    }
  }

  // --- configs ----------------------------------------------------------------
  ops::NormConfig norm(std::size_t rows, std::size_t dim) const { return {rows, dim, cfg_.norm_eps}; }
  ops::ElementwiseConfig elems(std::size_t n) const { return {n}; }
  ops::Attention::Config attention() const { return {B_, S_, Hq_, Hkv_, Dh_, 0.0, 64}; }
  ops::Rope::Config rope(std::size_t heads) const {
    return {B_, S_, heads, Dh_, cfg_.rope_theta,
            cfg_.rope_layout == RopeLayout::RotateHalf ? ops::RopeLayout::rotate_half : ops::RopeLayout::interleaved,
            0};
  }
  // The output of block l (the next block's input, or the head's).
  T* block_out(std::size_t l) { return l + 1 < L_ ? acts_[l + 1].x.data() : s_.h.data(); }

  template <class Op>
  void proj_fwd(std::size_t rows, std::size_t in, std::size_t out, const T* x, const T* w, T* y, Aux& aux) {
    if constexpr (std::is_same_v<Op, ops::BitLinear>)
      k_.bitlinear_fwd({rows, in, out}, x, w, y, aux);
    else
      k_.linear_fwd({rows, in, out, false}, x, w, nullptr, y);
  }
  template <class Op>
  void proj_bwd(std::size_t rows, std::size_t in, std::size_t out, const T* x, const T* w, const T* dy, T* dx,
                T* dw, Aux& aux) {
    if constexpr (std::is_same_v<Op, ops::BitLinear>)
      k_.bitlinear_bwd({rows, in, out}, x, w, dy, dx, dw, aux);
    else
      k_.linear_bwd({rows, in, out, false}, x, w, dy, dx, dw, nullptr);
  }

  // --- the step handlers --------------------------------------------------------
  struct GptStem {
    Engine& e;
    void forward(gpt2::Wte) { e.k_.embedding_fwd({e.N_, e.V_, e.D_}, e.ids_, e.P(e.wte_), e.s_.emb.data()); }
    void forward(gpt2::Wpe) {
      e.k_.positions_fwd(e.positions(), e.s_.emb.data(), e.P(e.wpe_), e.acts_[0].x.data());
    }
    void backward(gpt2::Wpe) { e.k_.positions_bwd(e.positions(), e.s_.dx.data(), e.s_.dx.data(), e.G(e.wpe_)); }
    void backward(gpt2::Wte) { e.embedding_backward(); }
  };
  struct RopeStem {
    Engine& e;
    void forward(llama::Embed) { e.k_.embedding_fwd({e.N_, e.V_, e.D_}, e.ids_, e.P(e.wte_), e.acts_[0].x.data()); }
    void backward(llama::Embed) { e.embedding_backward(); }
  };
  ops::LearnedPositions::Config positions() const {
    return {B_, S_, D_, static_cast<std::size_t>(cfg_.max_seq), 0};
  }
  // The embedding's gradient; tied to the LM head, it is the second
  // contribution to the shared matrix (the head's came first).
  void embedding_backward() {
    if (cfg_.tie_embeddings) {
      k_.embedding_bwd({N_, V_, D_}, ids_, s_.dx.data(), s_.demb.data());
      k_.add_into(V_ * D_, G(wte_), s_.demb.data());
    } else {
      k_.embedding_bwd({N_, V_, D_}, ids_, s_.dx.data(), G(wte_));
    }
  }

  struct GptBlock {
    Engine& e;
    std::size_t l;
    LayerActs& a;
    const LayerParams& p;
    Shared& s;
    std::size_t N, D, F;
    GptBlock(Engine& en, std::size_t layer)
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

  // LLaMA and BitNet blocks: one handler set over the family's step types
  // (Fam::bit selects the BitNet-only steps and inputs).
  struct NoStep1 {};
  struct NoStep2 {};
  struct LlamaFam {
    using Block = llama::Block;
    using InputNorm = llama::InputNorm;
    using QProj = llama::QProj;
    using KProj = llama::KProj;
    using VProj = llama::VProj;
    using RopeQ = llama::RopeQ;
    using RopeK = llama::RopeK;
    using Attn = llama::Attn;
    using AttnSubNorm = NoStep1;
    using OProj = llama::OProj;
    using Residual1 = llama::Residual1;
    using PostNorm = llama::PostNorm;
    using GateProj = llama::GateProj;
    using UpProj = llama::UpProj;
    using Act = llama::Act;
    using FfnSubNorm = NoStep2;
    using DownProj = llama::DownProj;
    using Residual2 = llama::Residual2;
    static constexpr bool bit = false;
  };
  struct BitnetFam {
    using Block = bitnet::Block;
    using InputNorm = bitnet::InputNorm;
    using QProj = bitnet::QProj;
    using KProj = bitnet::KProj;
    using VProj = bitnet::VProj;
    using RopeQ = bitnet::RopeQ;
    using RopeK = bitnet::RopeK;
    using Attn = bitnet::Attn;
    using AttnSubNorm = bitnet::AttnSubNorm;
    using OProj = bitnet::OProj;
    using Residual1 = bitnet::Residual1;
    using PostNorm = bitnet::PostNorm;
    using GateProj = bitnet::GateProj;
    using UpProj = bitnet::UpProj;
    using Act = bitnet::Act;
    using FfnSubNorm = bitnet::FfnSubNorm;
    using DownProj = bitnet::DownProj;
    using Residual2 = bitnet::Residual2;
    static constexpr bool bit = true;
  };

  template <class Fam>
  struct RopeBlock {
    Engine& e;
    std::size_t l;
    LayerActs& a;
    const LayerParams& p;
    Shared& s;
    std::size_t N, D, F, qd, kvd;
    RopeBlock(Engine& en, std::size_t layer)
        : e(en), l(layer), a(en.acts_[layer]), p(en.layers_[layer]), s(en.s_), N(en.N_), D(en.D_), F(en.F_),
          qd(en.qdim_), kvd(en.kvdim_) {}
    template <class S>
    using op = typename S::op;
    // o_proj reads the attention output (BitNet: after its sub-norm);
    // down_proj reads the activation (BitNet: after its sub-norm).
    const T* oproj_in() const { return Fam::bit ? a.sub1.data() : a.att.data(); }
    const T* down_in() const { return Fam::bit ? a.sub2.data() : a.act.data(); }

    void forward(typename Fam::InputNorm) {
      e.k_.rmsnorm_fwd(e.norm(N, D), a.x.data(), e.P(p.n1_w), a.n1.data(), a.n1_rstd.data());
    }
    void forward(typename Fam::QProj) {
      e.template proj_fwd<op<typename Fam::QProj>>(N, D, qd, a.n1.data(), e.P(p.q_w), s.q.data(), a.aux[kQ]);
    }
    void forward(typename Fam::KProj) {
      e.template proj_fwd<op<typename Fam::KProj>>(N, D, kvd, a.n1.data(), e.P(p.k_w), s.k.data(), a.aux[kK]);
    }
    void forward(typename Fam::VProj) {
      e.template proj_fwd<op<typename Fam::VProj>>(N, D, kvd, a.n1.data(), e.P(p.v_w), a.v.data(), a.aux[kV]);
    }
    void forward(typename Fam::RopeQ) { e.k_.rope_fwd(e.rope(e.Hq_), s.q.data(), a.qr.data()); }
    void forward(typename Fam::RopeK) { e.k_.rope_fwd(e.rope(e.Hkv_), s.k.data(), a.kr.data()); }
    void forward(typename Fam::Attn) {
      e.k_.attention_fwd(e.attention(), a.qr.data(), qd, a.kr.data(), a.v.data(), kvd, a.att.data(), a.lse.data());
    }
    void forward(typename Fam::AttnSubNorm) {
      e.k_.rmsnorm_fwd(e.norm(N, qd), a.att.data(), e.P(p.sub1_w), a.sub1.data(), a.sub1_rstd.data());
    }
    void forward(typename Fam::OProj) {
      e.template proj_fwd<op<typename Fam::OProj>>(N, qd, D, oproj_in(), e.P(p.o_w), s.branch.data(), a.aux[kO]);
    }
    void forward(typename Fam::Residual1) {
      e.k_.residual_fwd(e.elems(N * D), a.x.data(), s.branch.data(), a.mid.data());
    }
    void forward(typename Fam::PostNorm) {
      e.k_.rmsnorm_fwd(e.norm(N, D), a.mid.data(), e.P(p.n2_w), a.n2.data(), a.n2_rstd.data());
    }
    void forward(typename Fam::GateProj) {
      e.template proj_fwd<op<typename Fam::GateProj>>(N, D, F, a.n2.data(), e.P(p.gate_w), a.gate.data(),
                                                      a.aux[kGate]);
    }
    void forward(typename Fam::UpProj) {
      e.template proj_fwd<op<typename Fam::UpProj>>(N, D, F, a.n2.data(), e.P(p.up_w), a.up.data(), a.aux[kUp]);
    }
    void forward(typename Fam::Act) {
      if constexpr (std::is_same_v<op<typename Fam::Act>, ops::SwiGlu>)
        e.k_.swiglu_fwd(e.elems(N * F), a.gate.data(), a.up.data(), a.act.data(), a.aux[kAct]);
      else
        e.k_.relu2mul_fwd(e.elems(N * F), a.gate.data(), a.up.data(), a.act.data(), a.aux[kAct]);
    }
    void forward(typename Fam::FfnSubNorm) {
      e.k_.rmsnorm_fwd(e.norm(N, F), a.act.data(), e.P(p.sub2_w), a.sub2.data(), a.sub2_rstd.data());
    }
    void forward(typename Fam::DownProj) {
      e.template proj_fwd<op<typename Fam::DownProj>>(N, F, D, down_in(), e.P(p.down_w), s.branch.data(),
                                                      a.aux[kDown]);
    }
    void forward(typename Fam::Residual2) {
      e.k_.residual_fwd(e.elems(N * D), a.mid.data(), s.branch.data(), e.block_out(l));
    }

    void backward(typename Fam::Residual2) {
      e.k_.residual_bwd(e.elems(N * D), s.dx.data(), s.dx.data(), s.dx.data());
    }
    void backward(typename Fam::DownProj) {
      e.template proj_bwd<op<typename Fam::DownProj>>(N, F, D, down_in(), e.P(p.down_w), s.dx.data(),
                                                      Fam::bit ? s.dsub2.data() : s.dact.data(), e.G(p.down_w),
                                                      a.aux[kDown]);
    }
    void backward(typename Fam::FfnSubNorm) {
      e.k_.rmsnorm_bwd(e.norm(N, F), a.act.data(), e.P(p.sub2_w), a.sub2_rstd.data(), s.dsub2.data(),
                       s.dact.data(), e.G(p.sub2_w));
    }
    void backward(typename Fam::Act) {
      if constexpr (std::is_same_v<op<typename Fam::Act>, ops::SwiGlu>)
        e.k_.swiglu_bwd(e.elems(N * F), a.gate.data(), a.up.data(), s.dact.data(), s.dfc.data(), s.dup.data(),
                        a.aux[kAct]);
      else
        e.k_.relu2mul_bwd(e.elems(N * F), a.gate.data(), a.up.data(), s.dact.data(), s.dfc.data(), s.dup.data(),
                          a.aux[kAct]);
    }
    // up_proj runs first in the backward chain: it writes the norm output's
    // gradient; gate_proj's is added.
    void backward(typename Fam::UpProj) {
      e.template proj_bwd<op<typename Fam::UpProj>>(N, D, F, a.n2.data(), e.P(p.up_w), s.dup.data(), s.dn.data(),
                                                    e.G(p.up_w), a.aux[kUp]);
    }
    void backward(typename Fam::GateProj) {
      e.template proj_bwd<op<typename Fam::GateProj>>(N, D, F, a.n2.data(), e.P(p.gate_w), s.dfc.data(),
                                                      s.dtmp.data(), e.G(p.gate_w), a.aux[kGate]);
      e.k_.add_into(N * D, s.dn.data(), s.dtmp.data());
    }
    void backward(typename Fam::PostNorm) {
      e.k_.rmsnorm_bwd(e.norm(N, D), a.mid.data(), e.P(p.n2_w), a.n2_rstd.data(), s.dn.data(), s.dtmp.data(),
                       e.G(p.n2_w));
      e.k_.add_into(N * D, s.dx.data(), s.dtmp.data());
    }
    void backward(typename Fam::Residual1) {
      e.k_.residual_bwd(e.elems(N * D), s.dx.data(), s.dx.data(), s.dx.data());
    }
    void backward(typename Fam::OProj) {
      e.template proj_bwd<op<typename Fam::OProj>>(N, qd, D, oproj_in(), e.P(p.o_w), s.dx.data(),
                                                   Fam::bit ? s.dsub1.data() : s.datt.data(), e.G(p.o_w),
                                                   a.aux[kO]);
    }
    void backward(typename Fam::AttnSubNorm) {
      e.k_.rmsnorm_bwd(e.norm(N, qd), a.att.data(), e.P(p.sub1_w), a.sub1_rstd.data(), s.dsub1.data(),
                       s.datt.data(), e.G(p.sub1_w));
    }
    void backward(typename Fam::Attn) {
      e.k_.attention_bwd(e.attention(), a.qr.data(), qd, a.kr.data(), a.v.data(), kvd, a.att.data(), a.lse.data(),
                         s.datt.data(), s.dqr.data(), s.dkr.data(), s.dv.data());
    }
    void backward(typename Fam::RopeK) { e.k_.rope_bwd(e.rope(e.Hkv_), s.dkr.data(), s.dk.data()); }
    void backward(typename Fam::RopeQ) { e.k_.rope_bwd(e.rope(e.Hq_), s.dqr.data(), s.dq.data()); }
    // v_proj runs first in the backward chain (it writes), then k, then q (added).
    void backward(typename Fam::VProj) {
      e.template proj_bwd<op<typename Fam::VProj>>(N, D, kvd, a.n1.data(), e.P(p.v_w), s.dv.data(), s.dn.data(),
                                                   e.G(p.v_w), a.aux[kV]);
    }
    void backward(typename Fam::KProj) {
      e.template proj_bwd<op<typename Fam::KProj>>(N, D, kvd, a.n1.data(), e.P(p.k_w), s.dk.data(), s.dtmp.data(),
                                                   e.G(p.k_w), a.aux[kK]);
      e.k_.add_into(N * D, s.dn.data(), s.dtmp.data());
    }
    void backward(typename Fam::QProj) {
      e.template proj_bwd<op<typename Fam::QProj>>(N, D, qd, a.n1.data(), e.P(p.q_w), s.dq.data(), s.dtmp.data(),
                                                   e.G(p.q_w), a.aux[kQ]);
      e.k_.add_into(N * D, s.dn.data(), s.dtmp.data());
    }
    void backward(typename Fam::InputNorm) {
      e.k_.rmsnorm_bwd(e.norm(N, D), a.x.data(), e.P(p.n1_w), a.n1_rstd.data(), s.dn.data(), s.dtmp.data(),
                       e.G(p.n1_w));
      e.k_.add_into(N * D, s.dx.data(), s.dtmp.data());
    }
  };

  // The head: final norm, LM head, loss. In Logits mode it runs on the last
  // row only and the loss step does nothing.
  struct Head {
    Engine& e;
    std::size_t rows, off;  // rows of the residual stream the head reads, from row `off`
    explicit Head(Engine& en)
        : e(en), rows(en.mode_ == Mode::Logits ? 1 : en.N_), off(en.mode_ == Mode::Logits ? en.N_ - 1 : 0) {}
    const T* h() const { return e.s_.h.data() + off * e.D_; }
    void forward(gpt2::LnF) {
      e.k_.layernorm_fwd(e.norm(rows, e.D_), h(), e.P(e.nf_w_), e.P(e.nf_b_), e.s_.hn.data(), e.s_.hn_mean.data(),
                         e.s_.hn_rstd.data());
    }
    void forward(llama::Norm) {
      e.k_.rmsnorm_fwd(e.norm(rows, e.D_), h(), e.P(e.nf_w_), e.s_.hn.data(), e.s_.hn_rstd.data());
    }
    void forward(gpt2::LmHead) {
      e.k_.linear_fwd({rows, e.D_, e.V_, false}, e.s_.hn.data(), e.P(e.head_), nullptr, e.s_.logits.data());
    }
    void forward(gpt2::Loss) {
      if (e.mode_ == Mode::Logits) return;
      e.k_.ce_fwd({e.N_, e.V_}, e.s_.logits.data(), e.targets_, e.s_.loss.data(), e.s_.lse.data());
    }
    // The logits' gradient overwrites the logits (they are not read again).
    void backward(gpt2::Loss) {
      e.k_.ce_bwd({e.N_, e.V_}, e.s_.logits.data(), e.targets_, e.s_.lse.data(), e.s_.dloss.data(),
                  e.s_.logits.data());
    }
    void backward(gpt2::LmHead) {
      e.k_.linear_bwd({e.N_, e.D_, e.V_, false}, e.s_.hn.data(), e.P(e.head_), e.s_.logits.data(), e.s_.dn.data(),
                      e.G(e.head_), nullptr);
    }
    void backward(gpt2::LnF) {
      e.k_.layernorm_bwd(e.norm(e.N_, e.D_), e.s_.h.data(), e.P(e.nf_w_), e.s_.hn_mean.data(), e.s_.hn_rstd.data(),
                         e.s_.dn.data(), e.s_.dx.data(), e.G(e.nf_w_), e.G(e.nf_b_));
    }
    void backward(llama::Norm) {
      e.k_.rmsnorm_bwd(e.norm(e.N_, e.D_), e.s_.h.data(), e.P(e.nf_w_), e.s_.hn_rstd.data(), e.s_.dn.data(),
                       e.s_.dx.data(), e.G(e.nf_w_));
    }
  };

  auto tracer(const char* phase, const char* part, std::size_t layer) {
    return [this, phase, part, layer](std::string_view place, std::string_view op) {
      if (!trace) return;
      if (std::string_view(part) == "block")
        trace->push_back(fmt::format("{} {} {} {}:{}", phase, part, layer, place, op));
      else
        trace->push_back(fmt::format("{} {} {}:{}", phase, part, place, op));
    };
  }

  // recompute_blocks: lends work_'s buffers to block l for the scope.
  struct Lend {
    Engine& e;
    std::size_t l;
    Lend(Engine& en, std::size_t layer) : e(en), l(layer) {
      if (e.recompute_blocks) e.acts_[l].swap_all_but_x(e.work_);
    }
    ~Lend() {
      if (e.recompute_blocks) e.acts_[l].swap_all_but_x(e.work_);
    }
    Lend(const Lend&) = delete;
    Lend& operator=(const Lend&) = delete;
  };

  void forward_pass(const Index*, const Index*) {
    if (cfg_.family == Family::Gpt2) {
      GptStem stem{*this};
      run_forward<gpt2::Stem>(stem, tracer("forward", "stem", 0));
      for (std::size_t l = 0; l < L_; ++l) {
        Lend lend(*this, l);
        GptBlock b(*this, l);
        run_forward<gpt2::Block>(b, tracer("forward", "block", l));
      }
      Head h(*this);
      run_forward<gpt2::Head>(h, tracer("forward", "head", 0));
    } else {
      RopeStem stem{*this};
      run_forward<llama::Stem>(stem, tracer("forward", "stem", 0));
      for (std::size_t l = 0; l < L_; ++l) {
        Lend lend(*this, l);
        if (cfg_.family == Family::Llama) {
          RopeBlock<LlamaFam> b(*this, l);
          run_forward<llama::Block>(b, tracer("forward", "block", l));
        } else {
          RopeBlock<BitnetFam> b(*this, l);
          run_forward<bitnet::Block>(b, tracer("forward", "block", l));
        }
      }
      Head h(*this);
      run_forward<llama::Head>(h, tracer("forward", "head", 0));
    }
  }

  void backward_pass(const Index*) {
    if (cfg_.family == Family::Gpt2) {
      Head h(*this);
      run_backward<gpt2::Head>(h, tracer("backward", "head", 0));
      for (std::size_t l = L_; l-- > 0;) {
        Lend lend(*this, l);
        GptBlock b(*this, l);
        if (recompute_blocks) run_forward<gpt2::Block>(b, tracer("recompute", "block", l));
        run_backward<gpt2::Block>(b, tracer("backward", "block", l));
      }
      GptStem stem{*this};
      run_backward<gpt2::Stem>(stem, tracer("backward", "stem", 0));
    } else {
      Head h(*this);
      run_backward<llama::Head>(h, tracer("backward", "head", 0));
      for (std::size_t l = L_; l-- > 0;) {
        Lend lend(*this, l);
        if (cfg_.family == Family::Llama) {
          RopeBlock<LlamaFam> b(*this, l);
          if (recompute_blocks) run_forward<llama::Block>(b, tracer("recompute", "block", l));
          run_backward<llama::Block>(b, tracer("backward", "block", l));
        } else {
          RopeBlock<BitnetFam> b(*this, l);
          if (recompute_blocks) run_forward<bitnet::Block>(b, tracer("recompute", "block", l));
          run_backward<bitnet::Block>(b, tracer("backward", "block", l));
        }
      }
      RopeStem stem{*this};
      run_backward<llama::Stem>(stem, tracer("backward", "stem", 0));
    }
  }

  ModelConfig cfg_;
  std::vector<PT>& params_;
  K& k_;
  std::size_t V_ = 0, D_ = 0, F_ = 0, L_ = 0, Hq_ = 0, Hkv_ = 0, Dh_ = 0, qdim_ = 0, kvdim_ = 0;
  std::size_t B_ = 0, S_ = 0, N_ = 0;
  Mode mode_ = Mode::Train;
  const Index* ids_ = nullptr;
  const Index* targets_ = nullptr;
  std::vector<LayerParams> layers_;
  std::size_t wte_ = npos, wpe_ = npos, nf_w_ = npos, nf_b_ = npos, head_ = npos;
  std::vector<LayerActs> acts_;
  LayerActs work_;  // recompute_blocks: the one block's activations, lent to the block being run
  Shared s_;
  std::vector<T*> gdst_;
  std::vector<Buf> gtmp_;
};

// The model over the op specifications, any scalar: parameters, kernels and
// engine in one object (the reference the tests compare everything with).
template <class T>
class SpecModel {
 public:
  explicit SpecModel(const ModelConfig& cfg) : params_(make_params<T>(cfg)), engine_(cfg, params_, kernels_) {}
  SpecModel(const SpecModel&) = delete;
  SpecModel& operator=(const SpecModel&) = delete;

  std::vector<ParamT<T>>& params() { return params_; }
  SpecKernels<T>& kernels() { return kernels_; }
  Engine<T, SpecKernels<T>>& engine() { return engine_; }
  T run(const std::vector<ops::Index>& ids, const std::vector<ops::Index>& targets, std::size_t batch,
        std::size_t seq, bool backward, bool accumulate = false) {
    if (ids.size() != batch * seq || targets.size() != batch * seq)
      throw std::invalid_argument("SpecModel::run: ids/targets must hold batch*seq values");
    return engine_.run(ids.data(), targets.data(), batch, seq, backward, accumulate);
  }

 private:
  std::vector<ParamT<T>> params_;
  SpecKernels<T> kernels_;
  Engine<T, SpecKernels<T>> engine_;
};

}  // namespace lockstep::model
