// The engine: a family's forward and backward as the compositions its layer
// lists declare (model/families/: the lists, the parameter table, the
// activations and the step handlers of gpt2, llama and bitnet), templated on
// the scalar T and on a kernel set K:
//
//   Engine<double, SpecKernels<double>>  the op specs in double: what the
//                                        whole-model gradient check differentiates;
//   Engine<float,  SpecKernels<float>>   the op specs in float: the canonical bits;
//   Engine<float,  cpu::OpKernels>       the fast CPU model (make_cpu_model): the
//                                        same bits, many times faster.
//
// A pass runs the stem list, every block's list, and the head list with
// run_forward, then (training) the head's, the blocks' (last layer first) and
// the stem's backward lists with run_backward. Each step's handler (in the
// family's file) calls the kernel of the step's op — nothing else computes.
// The engine knows no family: Engine<T, K> picks the family type once, from
// the config (with_family), and runs FamilyEngine<Family, T, K> over it.
// Glue that is not an op is exact and stated here (and a family's own, in its
// file):
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

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "lockstep/model/config.hpp"
#include "lockstep/model/families/with_family.hpp"
#include "lockstep/model/kernel_set.hpp"
#include "lockstep/model/layers.hpp"
#include "lockstep/model/lora_branch.hpp"
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

// What a caller sets on an engine between passes.
struct EngineOptions {
  Trace* trace = nullptr;  // when set, every step run is appended
  // Activation recomputation: between the passes only each block's input is
  // kept; a block's forward runs again (the same kernels on the same input:
  // the same bits) just before its backward. One block's activations live at
  // a time instead of n_layer blocks'.
  bool recompute_blocks = false;
  // LoRA (lora_branch.hpp): how the adapter tensors found in the parameter
  // list are applied; nullptr: not at all.
  const LoraRun* lora = nullptr;
};

// The passes of one family Fam. Its members are public because they are what
// the family's step handlers read: the kernels k_, the parameters through
// P(index) and the gradient destinations through G(index), the op configs of
// the run's shape, the buffers (acts_[l]: block l's input x and what the
// family keeps, s_: the per-pass buffers) and the family's parameter indices
// (layers_[l], outer_). PT: the parameter type, whose value and grad live
// where K's kernels read them (ParamT<T> on the host; a device kernel set's
// model brings its own). K has every op of the family's layers, forward and
// backward, called by op type (model/kernel_set.hpp).
template <ModelFamily Fam, class T, class K, class PT>
requires KernelSetForFamily<K, T, Fam>
class FamilyEngine {
 public:
  using Scalar = T;
  using Index = ops::Index;
  using Buf = typename BufferOf<K, T>::type;
  using Aux = typename AuxOf<K>::type;
  using BlockParams = typename Fam::BlockParams;
  // What block l's forward keeps for its backward: the family's buffers
  // (what recompute_blocks lends) and the block's input x (always kept; the
  // previous block's output).
  using Lent = typename Fam::template BlockActs<Buf, Aux>;
  struct LayerActs : Lent {
    Buf x;
  };
  // The buffers of one pass: the family's, and the residual stream's and the
  // head's: h (the last block's output), hn (the final norm's output, the LM
  // head's input), the logits, the row losses and their log-sum-exps, the
  // loss cotangents; the gradient of the residual stream dx, of a norm's
  // output dn, of the embedding matrix demb (tied: added to the head's).
  struct Shared : Fam::template Scratch<Buf> {
    Buf h, hn, logits, loss, lse, dloss;
    Buf dx, dn, demb;
  };

  FamilyEngine(const ModelConfig& cfg, std::vector<PT>& params, K& kernels, const EngineOptions& options)
      : cfg_(cfg), params_(params), k_(kernels), opt_(options) {
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
  FamilyEngine(const FamilyEngine&) = delete;
  FamilyEngine& operator=(const FamilyEngine&) = delete;

  // One pass over a batch: mean cross-entropy; with `backward`, the gradient
  // of that mean into every parameter (overwritten, or added with accumulate).
  T run(const Index* ids, const Index* targets, std::size_t batch, std::size_t seq, bool backward,
        bool accumulate) {
    start(batch, seq, Mode::Train);
    // The mean is over the rows with a target (counted on the host's copy).
    const std::size_t n_valid = check_tokens(ids, targets);
    targets_ = stage(targets, 1);
    ids_ = stage(ids, 0);
    forward_pass();
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
    backward_pass();
    finish_grads(accumulate);
    return loss;
  }

  // Logits of the last position of one sequence (batch 1): the stem and the
  // blocks over every position, the head over the last row only (a row's
  // values never depend on the rows computed with it).
  std::vector<T> last_logits(const Index* ids, std::size_t seq) { return logits_pass(ids, seq, Mode::Logits, true); }

  // Decoding (model/decode.hpp): `rows` token rows whose positions and
  // attention the kernel set places (its KV cache), the head over the last
  // row, or over every row with all_rows; returns their logits [1 or rows, V].
  // The engine calls K::begin_block(l) before block l's steps.
  std::vector<T> decode_logits(const Index* ids, std::size_t rows, bool all_rows) {
    return logits_pass(ids, rows, all_rows ? Mode::AllLogits : Mode::Logits, false);
  }

  // --- what the handlers read -------------------------------------------------
  // A BitLinear weight held as TERNARY2 codes (a frozen LoRA base on the CPU
  // or CUDA model, model::hold_frozen_ternary_as_codes) has no floats: its key
  // is the address of its code bytes (on the device for the CUDA model), which
  // only proj_fwd / proj_bwd read (codes_at). The parameter type's
  // frozen_value says where they are: tensor::Storage on the host, the CUDA
  // model's device copy (bytes() with data(), scales(), numel()) there.
  const T* P(std::size_t i) const {
    if constexpr (requires { params_[i].frozen_value; })
      if (params_[i].dtype == tensor::DType::ternary2)
        return reinterpret_cast<const T*>(params_[i].frozen_value.bytes().data());
    return params_[i].value.data();
  }
  // The codes of the parameter whose key is w, or nullptr (w is floats).
  auto codes_at(const T* w) const {
    if constexpr (requires { params_[0].frozen_value; }) {
      using Codes = decltype(params_[0].frozen_value);
      for (const auto& p : params_)
        if (p.dtype == tensor::DType::ternary2 && reinterpret_cast<const T*>(p.frozen_value.bytes().data()) == w)
          return static_cast<const Codes*>(&p.frozen_value);
      return static_cast<const Codes*>(nullptr);
    } else {
      return static_cast<const tensor::Storage*>(nullptr);
    }
  }
  // A frozen matrix's is nullptr (grad_skipped): the Linear and BitLinear
  // kernels of every set then compute no dW, only dx.
  T* G(std::size_t i) { return gdst_[i]; }
  ops::NormConfig norm(std::size_t rows, std::size_t dim) const { return {rows, dim, cfg_.norm_eps}; }
  ops::ElementwiseConfig elems(std::size_t n) const { return {n}; }
  ops::Attention::Config attention() const { return {B_, S_, Hq_, Hkv_, Dh_, 0.0, 64}; }
  ops::Rope::Config rope(std::size_t heads) const {
    return {B_,
            S_,
            heads,
            Dh_,
            cfg_.rope_theta,
            cfg_.rope_layout == RopeLayout::RotateHalf ? ops::RopeLayout::rotate_half : ops::RopeLayout::interleaved,
            0};
  }
  ops::LearnedPositions::Config positions() const { return {B_, S_, D_, static_cast<std::size_t>(cfg_.max_seq), 0}; }
  // The output of block l (the next block's input, or the head's).
  T* block_out(std::size_t l) { return l + 1 < L_ ? acts_[l + 1].x.data() : s_.h.data(); }
  // The head's forward reads rows of h from head_input(): all N rows, or in
  // Logits mode the last row only; in both logits modes the loss step does nothing.
  bool logits_only() const { return mode_ != Mode::Train; }
  std::size_t head_rows() const { return mode_ == Mode::Logits ? 1 : N_; }
  const T* head_input() const { return s_.h.data() + (mode_ == Mode::Logits ? N_ - 1 : 0) * D_; }

  // A linear step (a Step of ops::Linear) in the run's linear mode
  // (ModelConfig::linear, data, not a copy of the lists): the float product,
  // or the int8 unit (ops::Int8Linear, with the config's unit backward) —
  // for the LM head (`head`) only with units_head. Every kernel set serves
  // both (model/kernel_set.hpp: a Linear step requires Int8Linear's kernels).
  bool units_for(bool head) const {
    return cfg_.linear == LinearMode::Units && (!head || cfg_.units_head);
  }
  ops::Int8LinearConfig unit_config(const ops::Linear::Config& c) const {
    return {c.rows, c.in, c.out, c.bias, cfg_.unit_backward};
  }
  void linear_fwd(const ops::Linear::Config& c, const ops::Linear::FwdArgs<T>& a, bool head = false) {
    if (units_for(head))
      k_.template forward<ops::Int8Linear>(unit_config(c), {.x = a.x, .w = a.w, .b = a.b, .y = a.y});
    else
      k_.template forward<ops::Linear>(c, a);
  }
  void linear_bwd(const ops::Linear::Config& c, const ops::Linear::BwdArgs<T>& a, bool head = false) {
    if (units_for(head)) {
      k_.template backward<ops::Int8Linear>(unit_config(c),
                                            {.x = a.x, .w = a.w, .dy = a.dy, .dx = a.dx, .dw = a.dw, .db = a.db});
    } else {
      k_.template backward<ops::Linear>(c, a);
    }
  }

  // An attention step in the run's attention mode (ModelConfig::attention):
  // the float flash attention or ops::UnitAttention, on the same arguments.
  void attention_fwd(const ops::Attention::FwdArgs<T>& a) {
    if (cfg_.attention == AttentionMode::Units)
      k_.template forward<ops::UnitAttention>(ops::UnitAttention::of(attention()), a);
    else
      k_.template forward<ops::Attention>(attention(), a);
  }
  void attention_bwd(const ops::Attention::BwdArgs<T>& a) {
    if (cfg_.attention == AttentionMode::Units)
      k_.template backward<ops::UnitAttention>(ops::UnitAttention::of(attention()), a);
    else
      k_.template backward<ops::Attention>(attention(), a);
  }

  // A weight held as codes (codes_at) runs on the kernel set's codes kernels
  // (cpu:: and cuda::OpKernels::bitlinear_codes_*: the F32 masters' bits); only BitLinear
  // weights are ever held so, and a kernel set without them is refused.
  auto proj_codes(const T* w, bool bitlinear) const {
    const auto* codes = codes_at(w);
    if (codes != nullptr && !bitlinear)
      throw std::logic_error("model: a weight held as TERNARY2 codes reached a float linear step");
    return codes;
  }
  template <class Op>
  void proj_fwd(std::size_t rows, std::size_t in, std::size_t out, const T* x, const T* w, T* y, Aux& aux) {
    const auto* codes = proj_codes(w, std::is_same_v<Op, ops::BitLinear>);
    if constexpr (std::is_same_v<Op, ops::BitLinear>) {
      if constexpr (requires { k_.bitlinear_codes_fwd({rows, in, out}, x, nullptr, 1.0f, y); }) {
        if (codes != nullptr)
          k_.bitlinear_codes_fwd({rows, in, out}, x, codes->bytes().data(), codes->scales()[0], y);
        else
          k_.template forward<ops::BitLinear>({rows, in, out}, {.x = x, .w = w, .y = y}, aux);
      } else {
        if (codes != nullptr) throw std::logic_error("model: this kernel set runs no BitLinear weight held as codes");
        k_.template forward<ops::BitLinear>({rows, in, out}, {.x = x, .w = w, .y = y}, aux);
      }
    } else {
      linear_fwd({rows, in, out, false}, {.x = x, .w = w, .b = nullptr, .y = y});
    }
    if (auto* slot = lora_.slot_for(*this, w)) lora_.forward(*this, *slot, rows, in, out, x, y);
  }
  template <class Op>
  void proj_bwd(std::size_t rows, std::size_t in, std::size_t out, const T* x, const T* w, const T* dy, T* dx, T* dw,
                Aux& aux) {
    const auto* codes = proj_codes(w, std::is_same_v<Op, ops::BitLinear>);
    if constexpr (std::is_same_v<Op, ops::BitLinear>) {
      if constexpr (requires { k_.bitlinear_codes_bwd({rows, in, out}, nullptr, 1.0f, dy, dx); }) {
        if (codes != nullptr) {
          if (dw != nullptr) throw std::logic_error("model: a weight held as codes is frozen: it has no dW");
          k_.bitlinear_codes_bwd({rows, in, out}, codes->bytes().data(), codes->scales()[0], dy, dx);
        } else {
          k_.template backward<ops::BitLinear>({rows, in, out}, {.x = x, .w = w, .dy = dy, .dx = dx, .dw = dw},
                                               aux);
        }
      } else {
        if (codes != nullptr) throw std::logic_error("model: this kernel set runs no BitLinear weight held as codes");
        k_.template backward<ops::BitLinear>({rows, in, out}, {.x = x, .w = w, .dy = dy, .dx = dx, .dw = dw},
                                             aux);
      }
    } else {
      linear_bwd({rows, in, out, false}, {.x = x, .w = w, .dy = dy, .dx = dx, .dw = dw, .db = nullptr});
    }
    if (auto* slot = lora_.slot_for(*this, w)) lora_.backward(*this, *slot, rows, in, out, x, dy, dx);
  }

  // The embedding's gradient; tied to the LM head, it is the second
  // contribution to the shared matrix (the head's came first).
  void embedding_backward() {
    if (!params_[wte_].trainable) return;  // frozen: nothing reads its gradient
    if (cfg_.tie_embeddings) {
      k_.template backward<ops::Embedding>({N_, V_, D_}, {.ids = ids_, .dy = s_.dx.data(), .dwte = s_.demb.data()});
      k_.add_into(V_ * D_, G(wte_), s_.demb.data());
    } else {
      k_.template backward<ops::Embedding>({N_, V_, D_}, {.ids = ids_, .dy = s_.dx.data(), .dwte = G(wte_)});
    }
  }

  ModelConfig cfg_;
  std::vector<PT>& params_;
  K& k_;
  const EngineOptions& opt_;
  std::size_t V_ = 0, D_ = 0, F_ = 0, L_ = 0, Hq_ = 0, Hkv_ = 0, Dh_ = 0, qdim_ = 0, kvdim_ = 0;
  std::size_t B_ = 0, S_ = 0, N_ = 0;
  const Index* ids_ = nullptr;
  const Index* targets_ = nullptr;
  std::vector<BlockParams> layers_;
  typename Fam::OuterParams outer_;
  std::size_t wte_ = npos, head_ = npos;  // the token embedding; the LM head (= wte_ when tied)
  std::vector<LayerActs> acts_;
  Lent work_;  // recompute_blocks: the one block's activations, lent to the block being run
  Shared s_;
  LoraBranch<T, Buf> lora_;  // the adapted projections

 private:
  enum class Mode { Train, Logits, AllLogits };
  using StemHandlers = typename Fam::template StemHandlers<FamilyEngine>;
  using BlockHandlers = typename Fam::template BlockHandlers<FamilyEngine>;
  using HeadHandlers = typename Fam::template HeadHandlers<FamilyEngine>;

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

  // --- parameters -----------------------------------------------------------
  std::size_t find(const std::string& name) const {
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].name == name) return i;
    throw std::invalid_argument("model: no parameter named " + name);
  }
  // The family's table names every parameter and the index it fills.
  struct Indexer {
    FamilyEngine& e;
    template <class M>
    void outer(const ParamSpec& s, M slot) {
      e.outer_.*slot = e.find(s.name);
    }
    template <class M>
    void block(std::size_t l, const ParamSpec& s, M slot) {
      e.layers_[l].*slot = e.find(s.name);
    }
  };
  void index_params() {
    layers_.assign(L_, {});
    Indexer indexer{*this};
    Fam::param_table(cfg_, indexer);
    wte_ = outer_.wte;
    head_ = cfg_.tie_embeddings ? wte_ : outer_.lm_head;
  }
  // Checked at each pass (a device model sizes its buffers just before it):
  // a value of numel(shape); a gradient of numel(shape), which a frozen
  // parameter need not hold (nothing writes it: prepare_grads).
  void check_param_sizes() const {
    for (const auto& p : params_) {
      std::size_t n = 1;
      for (std::int64_t d : p.shape) n *= static_cast<std::size_t>(d);
      if constexpr (requires { p.frozen_value; }) {  // held as TERNARY2 codes: no floats
        if (p.dtype == tensor::DType::ternary2 && !p.trainable) {
          if (!p.value.empty() || !p.grad.empty() || p.frozen_value.numel() != n)
            throw std::invalid_argument("model: parameter " + p.name + " held as codes has floats or another size");
          continue;
        }
      }
      if (p.value.size() != n || (p.grad.size() != n && (p.trainable || !p.grad.empty())))
        throw std::invalid_argument("model: parameter " + p.name + " has value/grad sizes that do not match its shape");
    }
  }
  std::size_t numel(std::size_t i) const { return params_[i].value.size(); }

  // Whether no kernel computes a frozen parameter's gradient: a matrix is read
  // by the Linear and BitLinear kernels, which compute no dW for dw = nullptr
  // (host and CUDA), or is the embedding, whose backward is skipped when frozen.
  // The exceptions write theirs into a discarded buffer: GPT-2's learned
  // positions, every matrix under the int8 units (their kernels always write
  // dW), and the vectors (norm weights, biases: a row's worth each).
  bool grad_skipped(std::size_t i) const {
    if constexpr (requires { params_[i].frozen_value; })
      if (params_[i].dtype == tensor::DType::ternary2) return true;  // codes: only BitLinear reads them, no dW
    if (params_[i].trainable || params_[i].shape.size() != 2 || cfg_.linear == LinearMode::Units) return false;
    if constexpr (requires { outer_.wpe; })
      if (i == outer_.wpe) return false;
    return true;
  }
  void prepare_grads(bool accumulate) {
    gdst_.assign(params_.size(), nullptr);
    if (gtmp_.size() != params_.size()) gtmp_.resize(params_.size());
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (grad_skipped(i)) {
        gtmp_[i] = Buf();  // G(i) is nullptr: nothing is held for it
      } else if (accumulate || !params_[i].trainable) {
        gtmp_[i].resize(numel(i));
        gdst_[i] = gtmp_[i].data();
      } else {
        gdst_[i] = params_[i].grad.data();
      }
    }
  }

 public:
  // Bytes the engine holds for gradients apart from Param::grad: the
  // accumulation buffers of trainable parameters, and the discarded
  // destinations of frozen ones that some kernel writes (grad_skipped).
  std::size_t grad_scratch_bytes() const {
    std::size_t b = 0;
    for (const Buf& g : gtmp_) b += g.size() * sizeof(T);
    return b;
  }

 private:
  void finish_grads(bool accumulate) {
    if (!accumulate) return;
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].trainable) k_.add_into(numel(i), params_[i].grad.data(), gtmp_[i].data());
  }

  // --- buffers ----------------------------------------------------------------
  static Lent& lent(LayerActs& a) { return a; }
  // check_seq: seq is a window of positions 0..seq-1 (a decode pass's rows are
  // placed by its kernel set, which checks their positions).
  void start(std::size_t batch, std::size_t seq, Mode mode, bool check_seq = true) {
    if (batch == 0 || seq == 0) throw std::invalid_argument("model: batch and seq must be > 0");
    if (check_seq && seq > static_cast<std::size_t>(cfg_.max_seq))
      throw std::invalid_argument(fmt::format("model: seq {} exceeds max_seq {}", seq, cfg_.max_seq));
    B_ = batch;
    S_ = seq;
    N_ = batch * seq;
    mode_ = mode;
    check_param_sizes();
    lora_.prepare(params_, opt_.lora);
    k_.begin_forward();
    const RunSizes r{B_, S_, N_, V_, D_, F_, Hq_, qdim_, kvdim_};
    const std::size_t N = N_, D = D_;
    acts_.resize(L_);
    // With recompute_blocks the per-layer activations other than x are sized
    // once, in work_, and lent to the block being run.
    for (LayerActs& a : acts_) {
      a.x.resize(N * D);
      if (opt_.recompute_blocks) {
        Lent released;  // what a keep-all pass left here is freed
        std::swap(lent(a), released);
      } else {
        lent(a).resize(r);
      }
    }
    if (opt_.recompute_blocks) work_.resize(r);
    Shared& s = s_;
    s.resize(r, mode == Mode::Train);
    s.h.resize(N * D);
    s.hn.resize(N * D);
    s.logits.resize((mode == Mode::Logits ? 1 : N) * V_);
    s.loss.resize(N);
    s.lse.resize(N);
    s.dloss.resize(N);
    if (mode == Mode::Train) {
      s.dx.resize(N * D);
      s.dn.resize(N * D);
      // The embedding's own gradient, added to the tied head's: only when it is trained.
      if (cfg_.tie_embeddings && params_[wte_].trainable)
        s.demb.resize(V_ * D);
      else
        s.demb = Buf();
    }
  }

  // --- the passes ---------------------------------------------------------------
  auto tracer(const char* phase, const char* part, std::size_t layer) {
    return [this, phase, part, layer](std::string_view place, std::string_view op) {
      if (!opt_.trace) return;
      if (std::string_view(part) == "block")
        opt_.trace->push_back(fmt::format("{} {} {} {}:{}", phase, part, layer, place, op));
      else
        opt_.trace->push_back(fmt::format("{} {} {}:{}", phase, part, place, op));
    };
  }

  // recompute_blocks: lends work_'s buffers to block l for the scope.
  struct Lend {
    FamilyEngine& e;
    std::size_t l;
    Lend(FamilyEngine& en, std::size_t layer) : e(en), l(layer) {
      if (e.opt_.recompute_blocks) std::swap(lent(e.acts_[l]), e.work_);
    }
    ~Lend() {
      if (e.opt_.recompute_blocks) std::swap(lent(e.acts_[l]), e.work_);
    }
    Lend(const Lend&) = delete;
    Lend& operator=(const Lend&) = delete;
  };

  // A forward pass of batch 1 and `seq` rows that leaves the logits of the
  // head's rows (head_rows) on the host.
  std::vector<T> logits_pass(const Index* ids, std::size_t seq, Mode mode, bool check_seq) {
    start(1, seq, mode, check_seq);
    check_tokens(ids, nullptr);
    ids_ = stage(ids, 0);
    targets_ = nullptr;
    forward_pass();
    const std::size_t n = head_rows() * V_;
    std::vector<T> out(n);
    if constexpr (requires { k_.copy_to_host(out.data(), s_.logits.data(), n); })
      k_.copy_to_host(out.data(), s_.logits.data(), n);
    else
      std::copy(s_.logits.data(), s_.logits.data() + n, out.data());
    return out;
  }

  void forward_pass() {
    StemHandlers stem{*this};
    run_forward<typename Fam::Stem>(stem, tracer("forward", "stem", 0));
    for (std::size_t l = 0; l < L_; ++l) {
      if constexpr (requires { k_.begin_block(l); }) k_.begin_block(l);
      Lend lend(*this, l);
      BlockHandlers b(*this, l);
      run_forward<typename Fam::Block>(b, tracer("forward", "block", l));
    }
    HeadHandlers h(*this);
    run_forward<typename Fam::Head>(h, tracer("forward", "head", 0));
  }

  void backward_pass() {
    HeadHandlers h(*this);
    run_backward<typename Fam::Head>(h, tracer("backward", "head", 0));
    for (std::size_t l = L_; l-- > 0;) {
      Lend lend(*this, l);
      BlockHandlers b(*this, l);
      if (opt_.recompute_blocks) run_forward<typename Fam::Block>(b, tracer("recompute", "block", l));
      run_backward<typename Fam::Block>(b, tracer("backward", "block", l));
    }
    StemHandlers stem{*this};
    run_backward<typename Fam::Stem>(stem, tracer("backward", "stem", 0));
  }

  Mode mode_ = Mode::Train;
  std::vector<T*> gdst_;
  std::vector<Buf> gtmp_;
};

// The engine of a config: its family's FamilyEngine, picked once (with_family).
template <class T, class K, class PT = ParamT<T>>
class Engine : public EngineOptions {
 public:
  using Index = ops::Index;

  Engine(const ModelConfig& cfg, std::vector<PT>& params, K& kernels)
      : impl_(with_family(cfg, [&]<class Fam>(Fam) {
          return Impl(std::in_place_type<FamilyEngine<Fam, T, K, PT>>, cfg, params, kernels,
                      static_cast<const EngineOptions&>(*this));
        })) {}
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const ModelConfig& config() const {
    return std::visit([](const auto& e) -> const ModelConfig& { return e.cfg_; }, impl_);
  }
  std::size_t grad_scratch_bytes() const {
    return std::visit([](const auto& e) { return e.grad_scratch_bytes(); }, impl_);
  }
  // FamilyEngine::run, last_logits and decode_logits.
  T run(const Index* ids, const Index* targets, std::size_t batch, std::size_t seq, bool backward, bool accumulate) {
    return std::visit([&](auto& e) { return e.run(ids, targets, batch, seq, backward, accumulate); }, impl_);
  }
  std::vector<T> last_logits(const Index* ids, std::size_t seq) {
    return std::visit([&](auto& e) { return e.last_logits(ids, seq); }, impl_);
  }
  std::vector<T> decode_logits(const Index* ids, std::size_t rows, bool all_rows) {
    return std::visit([&](auto& e) { return e.decode_logits(ids, rows, all_rows); }, impl_);
  }

 private:
  using Impl = std::variant<FamilyEngine<Gpt2Family, T, K, PT>, FamilyEngine<LlamaFamily, T, K, PT>,
                            FamilyEngine<BitnetFamily, T, K, PT>>;
  Impl impl_;
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
