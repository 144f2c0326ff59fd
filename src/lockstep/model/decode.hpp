// The decode mode of the engine: a KV cache of several sequences, prefill and
// one-token decode passes, several sequences in one pass.
//
// A decode pass is the engine's own forward (transformer.hpp: the family's
// op lists and handlers, unchanged) over a kernel set DecodeKernels<K> that
// wraps the model's kernel set K: every kernel is K's, except three forwards
// whose rows it places:
//   * RoPE and the learned positions: each segment of rows (a run of one
//     sequence's tokens) at its own positions (K's kernel with that offset);
//   * attention: each segment's k and v rows are written into the cache of
//     its slot at its positions, then each query attends its slot's keys
//     0..pos. A segment starting at position 0 runs K's training attention
//     over its own rows (the tiled prefill kernel); any other runs the cached
//     attention (ops/cached_attention.hpp) over the cache.
// Both attentions are ops::Attention::attend's expression per query, every
// other op is row-wise or a matrix product whose order depends on K only, so
// a token's logits are the same bits whether it came in a prefill, chunk by
// chunk, or token by token, alone or among other sequences of other lengths,
// on any thread count (tests/infer/decode_test.cpp).
//
// The cache: per layer K and V [slots, ctx, kv_heads·head_dim] floats in K's
// buffers (host or device); slot s's row j holds position j (after RoPE for
// the keys). A sequence holds at most ctx <= max_seq positions; a pass that
// would pass ctx is refused before it runs (nothing changes).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <unordered_map>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "lockstep/backend/cpu/decode.hpp"
#include "lockstep/backend/cpu/gemm.hpp"
#include "lockstep/backend/cpu/panel_gemm.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/backend/cpu/ternary_gemm.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/model/transformer.hpp"
#include "lockstep/ops/cached_attention.hpp"
#include "lockstep/ops/quant.hpp"
#include "lockstep/tensor/convert.hpp"

namespace lockstep::model {

// Where a backend's decode kernels are (specialized per kernel set: the CPU's
// below, the CUDA one in cuda_model.cpp):
//   State                                      what a session keeps for them
//   store_rows(k, src, ld, rows, width, dst)   rows of `width` floats, ld apart,
//                                              to contiguous rows at dst
//   attention(k, state, config, args)          ops::CachedAttention::forward
//                                              (args.slot, args.pos: host arrays)
template <class K>
struct DecodeBackend;

// The CPU's: the cached attention and the cache writes of backend/cpu/decode.cpp,
// and the projections on weights packed once per session (cpu::gemm packs
// its B operand on every call — for one token a pass that is most of the
// work): Linear = cpu::panel_gemm (gemm's chains on weights in contiguous
// column panels, the same bits) + the bias on the weights' most compact exact
// form: Q8 codes and f16 scales where every block of 32 weights is codes ×
// one scale (a Q8_0 file's: 1.0625 bytes a weight), f16 where f16 holds them
// all (an F16 file's, a tied F16 embedding as the head: 2 bytes), else f32 —
// on panels for a Linear of >= 4096 outputs (the head), through
// cpu::gemm_packed (the same chains) below;
// BitLinear = the spec's ternary weight codes and scale (ops::quantize_ternary,
// what the CPU kernel computes) packed once as 2-bit codes (cpu::pack_ternary:
// a pass reads 1/16 of the f32 codes' bytes), the activation rows quantized
// per call (ops::quantize_rows), the exact int32 code product and the op's
// epilogue (f32(acc)·step)·scale (cpu::ternary_gemm: AVX-512 VNNI where the
// CPU has it, else scalar; the same bits). A session reads each matrix as it
// was at its first use.
template <>
struct DecodeBackend<cpu::OpKernels> {
  // An f32 Linear of at least this many outputs (the LM head) runs on column
  // panels (cpu::panel_gemm: the same chains); a Q8 or f16 one always does.
  static constexpr std::size_t kPanelMinOut = 4096;
  struct Packed {
    std::vector<float> b;  // [K, ldb] (gemm_packed), or empty: the weights are in a panel form
    std::size_t ldb = 0;
    cpu::FloatPanels f32;
    cpu::HalfPanels half;
    cpu::Q8Panels q8;
    // What the forms hold on the heap (their capacities).
    std::size_t heap_bytes() const {
      return b.capacity() * sizeof(float) + f32.w.capacity() * sizeof(float) +
             half.w.capacity() * sizeof(std::uint16_t) + q8.codes.capacity() +
             q8.scales.capacity() * sizeof(std::uint16_t);
    }
    void shrink_to_fit() {
      b.shrink_to_fit();
      f32.w.shrink_to_fit();
      half.w.shrink_to_fit();
      q8.codes.shrink_to_fit();
      q8.scales.shrink_to_fit();
    }
  };
  // The packed weights, by the pointer the engine passes for the weight.
  struct Weights {
    std::unordered_map<const float*, Packed> packed;
    std::unordered_map<const float*, cpu::TernaryMatrix> ternary;
    // An untied token embedding held as f16 rows [V, D] (exact: f16 widens to f32).
    std::unordered_map<const float*, std::vector<std::uint16_t>> half_rows;
    std::size_t bytes() const;
  };
  struct State : Weights {
    // Set: the weights a decode-only model (model/decode_model.hpp) packed
    // once, under the keys its engine passes; a weight it lacks is a bug, refused.
    const Weights* held = nullptr;
  };
  // The packed form of the weight keyed `w` that a decode-only model holds.
  template <class Map>
  static const typename Map::mapped_type& held(const Map& map, const float* w, const char* what) {
    auto it = map.find(w);
    if (it == map.end())
      throw std::logic_error(fmt::format("decode-only model: no {} form held for a weight its engine passed", what));
    return it->second;
  }
  static const Packed& packed(State& st, const float* w, std::size_t out, std::size_t in, int threads) {
    if (st.held != nullptr) return held(st.held->packed, w, "packed linear");
    auto it = st.packed.find(w);
    if (it != st.packed.end()) return it->second;
    return st.packed.emplace(w, pack_linear(w, out, in, threads)).first->second;
  }
  // A Linear's weights [out, in] in the form linear() reads (the decode-only model packs with this too).
  static Packed pack_linear(const float* w, std::size_t out, std::size_t in, int threads) {
    Packed p;
    if (cpu::pack_q8(w, out, in, p.q8, threads) || cpu::pack_half(w, out, in, p.half, threads)) return p;
    if (out < kPanelMinOut) {
      p.ldb = cpu::packed_ld(out);
      p.b.resize(in * p.ldb);
      cpu::pack_b(out, in, w, 1, in, p.b.data(), threads);
    } else {
      p.f32 = cpu::pack_panels(w, out, in, threads);
    }
    return p;
  }
  static const cpu::TernaryMatrix& ternary(State& st, const float* w, std::size_t out, std::size_t in, int threads) {
    if (st.held != nullptr) return held(st.held->ternary, w, "ternary");
    auto it = st.ternary.find(w);
    if (it != st.ternary.end()) return it->second;
    return st.ternary.emplace(w, pack_bitlinear(w, out, in, threads)).first->second;
  }
  // A BitLinear's F32 weights as the spec quantizes them (ops::quantize_ternary), packed.
  static cpu::TernaryMatrix pack_bitlinear(const float* w, std::size_t out, std::size_t in, int threads) {
    const ops::TernaryCodes<float> t = ops::quantize_ternary(w, out * in);
    return cpu::pack_ternary(t.q.data(), out, in, t.scale, threads);
  }
  static void linear(cpu::OpKernels& k, State& st, const ops::Linear::Config& c, const ops::Linear::FwdArgs<float>& a) {
    const Packed& p = packed(st, a.w, c.out, c.in, k.threads);
    if (p.q8.rows != 0)
      cpu::panel_gemm(p.q8, a.x, c.rows, a.y, k.threads);
    else if (p.half.rows != 0)
      cpu::panel_gemm(p.half, a.x, c.rows, a.y, k.threads);
    else if (p.f32.rows != 0)
      cpu::panel_gemm(p.f32, a.x, c.rows, a.y, k.threads);
    else
      cpu::gemm_packed(c.rows, c.out, c.in, a.x, c.in, 1, p.b.data(), p.ldb, a.y, c.out, k.threads);
    if (!c.bias) return;
    for (std::size_t n = 0; n < c.rows; ++n)
      for (std::size_t m = 0; m < c.out; ++m) a.y[n * c.out + m] = a.y[n * c.out + m] + a.b[m];
  }
  static void linear(cpu::OpKernels& k, State& st, const ops::QuantLinearConfig& c,
                     const ops::BitLinear::FwdArgs<float>& a) {
    ops::BitLinear::validate(c);
    const cpu::TernaryMatrix& t = ternary(st, a.w, c.out, c.in, k.threads);
    const ops::RowCodes<float> r =
        ops::quantize_rows(a.x, c.rows, c.in, static_cast<float>(ops::BitLinear::kActFloor));
    cpu::ternary_gemm(t, r.q.data(), c.rows, r.step.data(), a.y, k.threads);
  }
  // The token embedding: K's kernel on f32 rows, except in a decode-only
  // model, which reads a tied embedding from the head's column panels (Q8,
  // f16 or f32) and an untied one from f16 rows where it holds them so (the
  // same values: Q8 and f16 widen exactly; a row is copied as the spec copies it).
  static void embedding(cpu::OpKernels& k, State& st, const ops::Embedding::Config& c,
                        const ops::Embedding::FwdArgs<float>& a) {
    if (st.held != nullptr) {
      if (auto it = st.held->packed.find(a.wte); it != st.held->packed.end() && it->second.b.empty()) {
        const Packed& p = it->second;
        for (std::size_t n = 0; n < c.tokens; ++n) {
          const std::size_t v = ops::Embedding::row_of(c, a.ids[n]);
          const std::size_t at = (v / cpu::HalfPanels::kWidth) * c.dim * cpu::HalfPanels::kWidth + v % cpu::HalfPanels::kWidth;
          float* y = a.y + n * c.dim;
          if (p.q8.rows != 0)
            for (std::size_t d = 0; d < c.dim; ++d) y[d] = p.q8.at(v, d);
          else if (p.half.rows != 0)
            for (std::size_t d = 0; d < c.dim; ++d) y[d] = tensor::f16_to_f32(p.half.w[at + d * cpu::HalfPanels::kWidth]);
          else
            for (std::size_t d = 0; d < c.dim; ++d) y[d] = p.f32.w[at + d * cpu::FloatPanels::kWidth];
        }
        return;
      }
      if (auto it = st.held->half_rows.find(a.wte); it != st.held->half_rows.end()) {
        for (std::size_t n = 0; n < c.tokens; ++n) {
          const std::uint16_t* row = it->second.data() + ops::Embedding::row_of(c, a.ids[n]) * c.dim;
          for (std::size_t d = 0; d < c.dim; ++d) a.y[n * c.dim + d] = tensor::f16_to_f32(row[d]);
        }
        return;
      }
    }
    k.run(c, a);
  }
  static void store_rows(cpu::OpKernels&, const float* src, std::size_t ld, std::size_t rows, std::size_t width,
                         float* dst) {
    cpu::store_rows(src, ld, rows, width, dst);
  }
  static void attention(cpu::OpKernels& k, State&, const ops::CachedAttention::Config& c,
                        const ops::CachedAttention::Args<float>& a) {
    cpu::cached_attention(c, a, k.threads);
  }
};

inline std::size_t DecodeBackend<cpu::OpKernels>::Weights::bytes() const {
  std::size_t n = 0;
  for (const auto& [w, p] : packed) n += p.heap_bytes();
  for (const auto& [w, t] : ternary) n += t.words.capacity() * sizeof(std::uint32_t);
  for (const auto& [w, r] : half_rows) n += r.capacity() * sizeof(std::uint16_t);
  return n;
}

// A run of one sequence's rows in a pass: slot, the position of its first
// row, the number of rows.
struct DecodeSegment {
  std::size_t slot = 0, pos = 0, rows = 0;
};

// CUDA graphs of decode passes, for a backend that has them
// (DecodeBackend<cuda::OpKernels>: Backend::Graph and the hooks below;
// docs/perf/DECODE_CUDA.md, "CUDA graphs"). A decode pass is captured once per
// row pattern (its segments' row counts, and which start at position 0: those
// run the prefill attention over their own rows) and replayed with
// everything that changes from pass to pass in device memory: the token ids,
// the rows' slots and positions (uploaded before the launch), the KV cache
// and the activations. What the graph bakes in is what the pattern fixes:
// shapes, the kernels chosen for them, the buffers' addresses. So a graph is
// replayed only while no device block has been handed back since its capture
// (Backend::memory_epoch: every buffer it reads is still the one it was
// captured with); otherwise the pattern is warmed and captured again.
//
// Per pattern: the first pass runs launched ("warm": the first-use work —
// packing weights, growing buffers, setting kernel attributes — happens
// outside any capture); the next one, if no block was freed since, is
// captured (nothing runs while capturing), then launched; later ones replay.
// A capture that fails (a call that cannot be captured: an allocation, a host
// wait) or that sees a host wait, an allocation or a freed block is abandoned,
// the pass is computed again launched, and the pattern is not captured again;
// so is a pattern whose pass reads a host-side position (the learned
// positions take their offset as an argument).
template <class Backend>
struct DecodeGraphs {
  static constexpr std::size_t kMaxPatterns = 64;
  enum class Mode { eager, warm, capture, replay };
  struct Entry {
    typename Backend::Graph graph;
    std::uint64_t epoch = 0;  // the memory epoch the graph was captured in
    bool warm = false;        // a pass of this pattern ran launched, at warm_epoch
    std::uint64_t warm_epoch = 0;
    bool banned = false;
    std::size_t waits = 0, allocs = 0;  // at the capture's start
  };
  std::map<std::vector<std::uint32_t>, Entry> entries;
  Mode mode = Mode::eager;
  Entry* current = nullptr;  // the pass's pattern (warm, capture, replay)
  Entry* failed = nullptr;   // a capture whose end threw
  bool launched = false;     // this replayed pass's graph is launched (early_launch)
};

template <class K>
class DecodeKernels : public ad::KeyedKernels<DecodeKernels<K>, float> {
 public:
  using Index = ops::Index;
  using Aux = typename AuxOf<K>::type;
  template <class U>
  using Buffer = typename BufferOf<K, U>::type;
  using Backend = DecodeBackend<K>;

  DecodeKernels(K& inner, const ModelConfig& cfg, std::size_t slots, std::size_t ctx)
      : inner_(inner),
        slots_(slots),
        ctx_(ctx),
        hq_(static_cast<std::size_t>(cfg.n_head)),
        hkv_(static_cast<std::size_t>(cfg.n_kv_head)),
        dh_(static_cast<std::size_t>(cfg.head_dim)),
        kvdim_(hkv_ * dh_) {
    kc_.resize(static_cast<std::size_t>(cfg.n_layer));
    vc_.resize(kc_.size());
    for (std::size_t l = 0; l < kc_.size(); ++l) {
      kc_[l].resize(slots_ * ctx_ * kvdim_);
      vc_[l].resize(slots_ * ctx_ * kvdim_);
    }
  }

  // The next pass's rows, segment after segment (DecodeSession sets them).
  std::vector<DecodeSegment> segments;
  // Whether the next pass may run as a CUDA graph (DecodeSession: its decode
  // passes, one token a sequence; not the prefill's).
  bool graph_pass = false;

  // The pass's rows: slot and position of each (a backend with rows_at below
  // keeps them where its kernels read them, once a pass).
  void begin_forward() {
    if constexpr (kGraphs) {  // the rows of the pass before (a planted bug replays with them)
      prev_slot_.swap(row_slot_);
      prev_pos_.swap(row_pos_);
    }
    row_slot_.clear();
    row_pos_.clear();
    for (const DecodeSegment& s : segments)
      for (std::size_t r = 0; r < s.rows; ++r) {
        row_slot_.push_back(static_cast<std::int32_t>(s.slot));
        row_pos_.push_back(static_cast<std::int32_t>(s.pos + r));
      }
    if constexpr (kRowsAt) Backend::begin_pass(inner_, state_, row_slot_, row_pos_);
    codes_of_ = nullptr;
    if constexpr (kDeferred) Backend::drop_pending(state_);
    inner_.begin_forward();
  }
  void begin_block(std::size_t l) { layer_ = l; }
  void add_into(std::size_t n, float* acc, const float* x) {
    if (replaying()) return;
    settle();
    inner_.add_into(n, acc, x);
  }
  // LoRA's y = y + u·s (model/lora_branch.hpp) where K has its own (the CUDA
  // set's gated kernel, on the device's buffers); a host K's session runs the
  // branch's host loop, as K's own passes do.
  void lora_scale_add(std::size_t n, float* y, const float* u, float s)
    requires requires(K& k) { k.lora_scale_add(n, y, u, s); }
  {
    if (replaying()) return;
    settle();  // the deferred BitLinear that wrote y launches first
    inner_.lora_scale_add(n, y, u, s);
  }
  // The engine stages the token ids after it has sized its buffers, and
  // before the pass's first kernel: where a graph pass is decided (and its
  // capture begins); it copies the logits to the host after the last: where
  // the graph is launched.
  const Index* stage_indices(const Index* host, std::size_t n, int slot)
    requires requires(K& k) { k.stage_indices(host, n, slot); }
  {
    if constexpr (kGraphs)
      // planted: a replay's graph may launch before the ids are up (only a
      // replay: a capture begun before the staging copy would be abandoned)
      if (slot == 0 && Backend::mutant_early_before_ids() && replay_ready()) {
        graph_start();
        return inner_.stage_indices(host, n, slot);
      }
    const Index* staged = inner_.stage_indices(host, n, slot);
    if constexpr (kGraphs)
      if (slot == 0) graph_start();
    return staged;
  }
  void copy_to_host(float* host, const float* dev, std::size_t n)
    requires requires(K& k) { k.copy_to_host(host, dev, n); }
  {
    if (!replaying()) settle();  // the pass's last kernels, inside its capture
    bool replayed = false;
    if constexpr (kGraphs) {
      replayed = replaying();
      graph_finish();
    }
    inner_.copy_to_host(host, dev, n);
    if constexpr (kGraphs)
      if (replayed) {
        using S = std::chrono::duration<double>;
        Backend::note_replayed_pass(S(launch_t_ - pass_t0_).count(),
                                    S(std::chrono::steady_clock::now() - launch_t_).count());
      }
  }
  // Where a replayed pass's host time starts (DecodeSession::decode's entry).
  void mark_pass_start() { pass_t0_ = std::chrono::steady_clock::now(); }
  // After a pass threw: if a graph capture was open or failed at its end, it
  // is abandoned (its pattern runs launched from now on) and true is returned:
  // nothing of the pass ran, so it can be computed again. False: the error
  // was the pass's own.
  bool abandon_graph() {
    if constexpr (kGraphs) {
      auto* e = graphs_.mode == Graphs::Mode::capture ? graphs_.current : graphs_.failed;
      graphs_.mode = Graphs::Mode::eager;
      graphs_.current = graphs_.failed = nullptr;
      if (e == nullptr) return false;
      e->graph.abandon_capture();
      e->banned = true;
      return true;
    } else {
      return false;
    }
  }

  // Every kernel is K's ...
  template <class C, class A, class... X>
    requires requires(K& k, const C& c, const A& a, X&... x) { k.run(c, a, x...); }
  void run(const C& c, const A& a, X&... x) {
    if (replaying()) return;
    settle();
    inner_.run(c, a, x...);
  }
  // ... but the projections where the backend has its own for decoding
  // (DecodeBackend<cpu::OpKernels>: packed weights) ...
  void run(const ops::Linear::Config& c, const ops::Linear::FwdArgs<float>& a) {
    if (replaying()) return;
    settle();
    if constexpr (requires { Backend::linear(inner_, state_, c, a); })
      Backend::linear(inner_, state_, c, a);
    else
      inner_.run(c, a);
  }
  void run(const ops::QuantLinearConfig& c, const ops::BitLinear::FwdArgs<float>& a, Aux& aux) {
    if (replaying()) return;
    if constexpr (requires { Backend::linear(inner_, state_, c, a, aux, true); }) {
      // The backend may keep the activation codes of a.x: q, k and v (gate and
      // up) read one input, and no kernel ran between them that could change it.
      const bool held = codes_of_ == a.x && codes_rows_ == c.rows && codes_in_ == c.in;
      const bool keeps = Backend::linear(inner_, state_, c, a, aux, held);
      const auto x0 = reinterpret_cast<std::uintptr_t>(a.x), y0 = reinterpret_cast<std::uintptr_t>(a.y);
      const bool y_over_x = y0 < x0 + c.rows * c.in * sizeof(float) && x0 < y0 + c.rows * c.out * sizeof(float);
      codes_of_ = keeps && !y_over_x ? a.x : nullptr;
      codes_rows_ = c.rows;
      codes_in_ = c.in;
    } else if constexpr (requires { Backend::linear(inner_, state_, c, a); })
      Backend::linear(inner_, state_, c, a);
    else
      inner_.run(c, a, aux);
  }
  // ... RMSNorm where the backend fuses the activation codes of its output
  // into it (DecodeBackend<cuda::OpKernels>::rmsnorm: a BitLinear reading y
  // next finds them held, as q, k and v do) ...
  // (or, where the backend deferred the ReLU²·up whose output the norm reads,
  // the two in one launch: DecodeBackend<cuda::OpKernels>::act_norm) ...
  void run(const ops::NormConfig& c, const ops::RmsNorm::FwdArgs<float>& a) {
    if (replaying()) return;
    if constexpr (requires { Backend::act_norm(inner_, state_, c, a); }) {
      if (Backend::act_norm(inner_, state_, c, a)) {
        codes_of_ = a.y;
        codes_rows_ = c.rows;
        codes_in_ = c.dim;
        return;
      }
    }
    settle();
    if constexpr (requires { Backend::rmsnorm(inner_, state_, c, a); }) {
      if (Backend::rmsnorm(inner_, state_, c, a)) {
        codes_of_ = a.y;
        codes_rows_ = c.rows;
        codes_in_ = c.dim;
      }
    } else {
      inner_.run(c, a);
    }
  }
  // ... ReLU²·up where the backend defers it, to fold it into the norm that
  // reads its output next (DecodeBackend<cuda::OpKernels>::relu2mul; any other
  // kernel launches it first: settle) ...
  void run(const ops::ReluSqMul::Config& c, const ops::ReluSqMul::FwdArgs<float>& a) {
    if (replaying()) return;
    settle();
    if constexpr (requires { Backend::relu2mul(inner_, state_, c, a); }) {
      if (Backend::relu2mul(inner_, state_, c, a)) return;
    }
    inner_.run(c, a);
  }
  // ... the residual add where the backend folds it into the deferred
  // BitLinear whose output it reads (DecodeBackend<cuda::OpKernels>::residual:
  // o_proj and down_proj's launch adds it in its epilogue, the same add on the
  // same values); else, or when the backend declines, K's ...
  void run(const ops::ResidualAdd::Config& c, const ops::ResidualAdd::FwdArgs<float>& a) {
    if (replaying()) return;
    if constexpr (requires { Backend::residual(inner_, state_, c, a); }) {
      if (Backend::residual(inner_, state_, c, a)) {
        codes_of_ = nullptr;  // as settle: no BitLinear joins across it
        return;
      }
    }
    settle();
    inner_.run(c, a);
  }
  // ... the token embedding where the backend reads it from its own form ...
  void run(const ops::Embedding::Config& c, const ops::Embedding::FwdArgs<float>& a) {
    if (replaying()) return;
    settle();
    codes_of_ = nullptr;
    if constexpr (requires { Backend::embedding(inner_, state_, c, a); })
      Backend::embedding(inner_, state_, c, a);
    else
      inner_.run(c, a);
  }
  // ... and these three forwards, whose rows the segments place.
  void run(const ops::Rope::Config& c, const ops::Rope::FwdArgs<float>& a) {
    if (replaying()) return;
    if constexpr (kRowsAt && requires { Backend::defer_rope(inner_, state_, c, a, row_pos_.size(), ctx_); }) {
      // Deferred to the attention's cache writes (DecodeBackend<cuda::OpKernels>::rope_store).
      if (Backend::defer_rope(inner_, state_, c, a, row_pos_.size(), ctx_)) {
        codes_of_ = nullptr;
        return;
      }
    }
    settle();
    if constexpr (kRowsAt) {  // every row at its position in one launch
      Backend::rope(inner_, state_, c, a, row_pos_.size(), ctx_);
      return;
    }
    host_offsets_ = true;
    std::size_t row = 0;
    const std::size_t w = c.heads * c.head_dim;
    for (const DecodeSegment& s : segments) {
      ops::Rope::Config sc = c;
      sc.batch = 1;
      sc.seq = s.rows;
      sc.offset = s.pos;
      inner_.run(sc, ops::Rope::FwdArgs<float>{.x = a.x + row * w, .y = a.y + row * w});
      row += s.rows;
    }
  }
  void run(const ops::LearnedPositions::Config& c, const ops::LearnedPositions::FwdArgs<float>& a) {
    if (replaying()) return;
    settle();
    host_offsets_ = true;  // K's kernel takes the segment's offset as an argument: no graph
    std::size_t row = 0;
    for (const DecodeSegment& s : segments) {
      ops::LearnedPositions::Config sc = c;
      sc.batch = 1;
      sc.seq = s.rows;
      sc.offset = s.pos;
      inner_.run(sc, ops::LearnedPositions::FwdArgs<float>{
                         .x = a.x + row * c.dim, .wpe = a.wpe, .y = a.y + row * c.dim});
      row += s.rows;
    }
  }
  void run(const ops::Attention::Config& c, const ops::Attention::FwdArgs<float>& a) {
    if (replaying()) return;
    const std::size_t qw = hq_ * dh_;
    float* kc = kc_[layer_].data();
    float* vc = vc_[layer_].data();
    // The cache writes with the deferred RoPE of q and k in one launch, where
    // the backend has it (DecodeBackend<cuda::OpKernels>::rope_store) ...
    bool stored = false;
    if constexpr (kRowsAt && requires { Backend::rope_store(inner_, state_, a, row_pos_.size(), kvdim_, kc, vc, ctx_); })
      stored = Backend::rope_store(inner_, state_, a, row_pos_.size(), kvdim_, kc, vc, ctx_);
    settle();
    std::size_t row = 0;
    // ... else the cache first: every segment's keys and values at its positions.
    if constexpr (kRowsAt) {
      if (!stored) {
        Backend::store_rows_at(inner_, state_, a.k, a.ldkv, row_pos_.size(), kvdim_, kc, ctx_);
        Backend::store_rows_at(inner_, state_, a.v, a.ldkv, row_pos_.size(), kvdim_, vc, ctx_);
      }
    } else {
      for (const DecodeSegment& s : segments) {
        const std::size_t at = (s.slot * ctx_ + s.pos) * kvdim_;
        Backend::store_rows(inner_, a.k + row * a.ldkv, a.ldkv, s.rows, kvdim_, kc + at);
        Backend::store_rows(inner_, a.v + row * a.ldkv, a.ldkv, s.rows, kvdim_, vc + at);
        row += s.rows;
      }
    }
    // Then the queries: a segment from position 0 over its own rows (K's
    // attention); the rest, in runs of adjacent segments, over the cache.
    row = 0;
    slot_.clear();
    pos_.clear();
    std::size_t run_start = 0;
    auto flush = [&] {
      if (slot_.empty()) return;
      const ops::CachedAttention::Config cc{slot_.size(), hq_, hkv_, dh_, slots_, ctx_, c.key_block};
      const ops::CachedAttention::Args<float> ca{.q = a.q + run_start * a.ldq, .ldq = a.ldq, .k_cache = kc,
                                                 .v_cache = vc, .slot = slot_.data(), .pos = pos_.data(),
                                                 .o = a.o + run_start * qw};
      // A backend with the rows' slots and positions on the device reads this
      // run's there (rows run_start.., the same values as slot_ and pos_).
      if constexpr (kRowsAt)
        Backend::attention(inner_, state_, cc, ca, run_start);
      else
        Backend::attention(inner_, state_, cc, ca);
      slot_.clear();
      pos_.clear();
    };
    for (const DecodeSegment& s : segments) {
      if (s.pos == 0) {
        flush();
        ops::Attention::Config sc = c;
        sc.batch = 1;
        sc.seq = s.rows;
        inner_.run(sc, ops::Attention::FwdArgs<float>{.q = a.q + row * a.ldq, .ldq = a.ldq, .k = a.k + row * a.ldkv,
                                                      .v = a.v + row * a.ldkv, .ldkv = a.ldkv, .o = a.o + row * qw,
                                                      .lse = a.lse + row * hq_});
      } else {
        if (slot_.empty()) run_start = row;
        for (std::size_t r = 0; r < s.rows; ++r) {
          slot_.push_back(static_cast<std::int32_t>(s.slot));
          pos_.push_back(static_cast<std::int32_t>(s.pos + r));
        }
      }
      row += s.rows;
    }
    flush();
  }

  // Attention through int8 units has no KV-cache form yet (the cached
  // attention is the float one): a units-attention model is refused before a
  // decoder is made (make_model.cpp); this is the last line of that refusal.
  [[noreturn]] void run(const ops::UnitAttention::Config&, const ops::UnitAttention::FwdArgs<float>&) {
    throw std::invalid_argument(
        "decoding: the model's attention runs through int8 units (lockstep_attention = units); the KV-cache "
        "attention is float only");
  }

  std::size_t slots() const { return slots_; }
  std::size_t context() const { return ctx_; }
  // What the backend keeps for the session (a decode-only model points it at its weights).
  typename Backend::State& backend_state() { return state_; }

 private:
  // A backend whose RoPE and cache writes take the rows' positions from its
  // own copy of them (DecodeBackend<cuda::OpKernels>: one launch each for all
  // segments); the others run K's RoPE per segment at its offset.
  static constexpr bool kRowsAt = requires { Backend::kRowsAt; };
  // A backend that may defer a BitLinear's launch to join it with the next
  // ones on the same codes (DecodeBackend<cuda::OpKernels>: q, k, v in one
  // launch): every other kernel first launches what waits (settle).
  static constexpr bool kDeferred = requires(K& k, typename Backend::State& st) {
    Backend::flush(k, st);
    Backend::drop_pending(st);
  };
  // Every kernel but a BitLinear forgets the held codes and launches the
  // deferred BitLinears first (they read the codes; it may read their outputs).
  void settle() {
    codes_of_ = nullptr;
    if constexpr (kDeferred) Backend::flush(inner_, state_);
  }
  // A backend with CUDA graphs (DecodeGraphs above).
  static constexpr bool kGraphs = requires { typename Backend::Graph; };
  using Graphs = DecodeGraphs<Backend>;
  bool replaying() const {
    if constexpr (kGraphs) return graphs_.mode == Graphs::Mode::replay;
    return false;
  }
  // The pass's row pattern: the key of its graph.
  std::vector<std::uint32_t> pattern_key() const {
    std::vector<std::uint32_t> key;
    if (!Backend::mutant_key_ignores_rows())
      for (const DecodeSegment& s : segments) key.push_back(static_cast<std::uint32_t>(2 * s.rows + (s.pos == 0)));
    return key;
  }
  // Whether graph_start will replay this pass (a captured graph of its
  // pattern, its buffers where they were).
  bool replay_ready() const {
    if (!graph_pass || !Backend::graphs_on()) return false;
    auto it = graphs_.entries.find(pattern_key());
    return it != graphs_.entries.end() && !it->second.banned && it->second.graph.ready() &&
           it->second.epoch == Backend::memory_epoch();
  }
  // The pass's pattern decided, its ids and rows on the device: launched,
  // warmed, captured from here, or replayed at copy_to_host.
  void graph_start() {
    graphs_.mode = Graphs::Mode::eager;
    graphs_.current = graphs_.failed = nullptr;
    graphs_.launched = false;
    host_offsets_ = false;
    if (!graph_pass || !Backend::graphs_on()) return;
    std::vector<std::uint32_t> key = pattern_key();
    auto it = graphs_.entries.find(key);
    if (it == graphs_.entries.end()) {
      if (graphs_.entries.size() >= Graphs::kMaxPatterns) return;
      it = graphs_.entries.emplace(std::move(key), typename Graphs::Entry{}).first;
    }
    auto& e = it->second;
    if (e.banned) return;
    const std::uint64_t epoch = Backend::memory_epoch();
    graphs_.current = &e;
    if (e.graph.ready()) {
      if (epoch == e.epoch || Backend::mutant_no_epoch_check()) {
        if (Backend::mutant_rows_not_restaged()) Backend::begin_pass(inner_, state_, prev_slot_, prev_pos_);
        graphs_.mode = Graphs::Mode::replay;
        // Early: everything the graph reads that changes from pass to pass
        // (the ids just staged, the rows staged in begin_forward) is on the
        // device, and the rest of a replayed pass launches and writes
        // nothing (every kernel returns at replaying()), so the graph may
        // run while the engine walks the pass's ops on the host.
        if (Backend::early_launch()) launch_replay(e);
        return;
      }
      e.graph.reset();  // a buffer it reads may have moved
      e.warm = false;
    }
    if (e.warm && e.warm_epoch == epoch) {
      e.epoch = epoch;
      e.waits = Backend::host_waits();
      e.allocs = Backend::allocations();
      graphs_.mode = Graphs::Mode::capture;  // set first: a capture that cannot begin is abandoned too
      e.graph.begin_capture();
      return;
    }
    graphs_.mode = Graphs::Mode::warm;
  }
  void graph_finish() {
    auto* e = graphs_.current;
    const typename Graphs::Mode mode = graphs_.mode;
    graphs_.mode = Graphs::Mode::eager;
    graphs_.current = nullptr;
    switch (mode) {
      case Graphs::Mode::eager:
        return;
      case Graphs::Mode::warm:
        if (host_offsets_)
          e->banned = true;
        else {
          e->warm = true;
          e->warm_epoch = Backend::memory_epoch();
        }
        return;
      case Graphs::Mode::capture:
        graphs_.failed = e;  // until the graph is known good (abandon_graph)
        e->graph.end_capture();
        if (host_offsets_ || Backend::host_waits() != e->waits || Backend::allocations() != e->allocs ||
            Backend::memory_epoch() != e->epoch)
          throw std::runtime_error(
              "decode: the CUDA graph capture of a pass saw a host wait, an allocation or a freed buffer (or a "
              "host-side position); the pass runs again without a graph");
        graphs_.failed = nullptr;
        e->graph.launch();
        return;
      case Graphs::Mode::replay:
        if (!graphs_.launched) launch_replay(*e);
        return;
    }
  }
  void launch_replay(typename Graphs::Entry& e) {
    e.graph.launch();
    graphs_.launched = true;
    launch_t_ = std::chrono::steady_clock::now();
  }
  K& inner_;
  std::size_t slots_, ctx_, hq_, hkv_, dh_, kvdim_;
  std::vector<std::int32_t> row_slot_, row_pos_;
  // The input whose activation codes the backend holds (null: none), and its shape:
  // every kernel but a BitLinear forgets it.
  const float* codes_of_ = nullptr;
  std::size_t codes_rows_ = 0, codes_in_ = 0;
  std::size_t layer_ = 0;
  std::vector<Buffer<float>> kc_, vc_;
  std::vector<std::int32_t> slot_, pos_;
  typename Backend::State state_;
  bool host_offsets_ = false;  // this pass ran a kernel at a host-side position offset
  std::chrono::steady_clock::time_point pass_t0_{}, launch_t_{};  // note_replayed_pass's clock
  std::vector<std::int32_t> prev_slot_, prev_pos_;
  struct NoGraphs {};
  [[no_unique_address]] std::conditional_t<kGraphs, Graphs, NoGraphs> graphs_;
};

// A decode session (model.hpp's Decoder) over a model's kernel set K and the
// parameters its engine reads (PT). before_pass(threads) is the model's own
// check-and-sync before a pass (runnable dtypes, parameters where K reads
// them, the thread count).
//
// lora: the model's LoRA run (model.hpp's LoraRun; nullptr: none), taken as it
// is when the session is made and applied as inference applies it, without
// dropout (training off): every adapted projection gets the engine's branch
// (lora_branch.hpp) over these kernels, y = base(x) + ((x·Aᵀ)·Bᵀ)·s, so a
// token's logits are next_logits' bits (tests/infer/decode_lora_test.cpp).
// Fixed for the session as its packed weights are (a CUDA graph of a pass
// holds the scale); set_lora afterwards reaches the next session.
template <class K, class PT, class BeforePass>
class DecodeSession final : public Decoder {
 public:
  DecodeSession(const ModelConfig& cfg, std::vector<PT>& params, K& kernels, std::size_t slots, std::size_t ctx,
                BeforePass before_pass, const LoraRun* lora = nullptr)
      : cfg_(cfg),
        dk_(kernels, cfg, check_slots(slots), check_ctx(cfg, ctx)),
        engine_(cfg, params, dk_),
        len_(slots, 0),
        before_pass_(std::move(before_pass)) {
    if (lora != nullptr) {
      lora_ = *lora;
      lora_.training = false;
      engine_.lora = &lora_;
    }
  }

  DecodeKernels<K>& decode_kernels() { return dk_; }
  std::size_t slots() const override { return dk_.slots(); }
  std::size_t context() const override { return dk_.context(); }
  std::size_t length(std::size_t slot) const override { return len_.at(check_slot(slot)); }
  void clear(std::size_t slot) override { len_.at(check_slot(slot)) = 0; }
  void truncate(std::size_t slot, std::size_t n) override {
    if (n > len_.at(check_slot(slot)))
      throw std::out_of_range(fmt::format("decode: slot {} holds {} tokens, cannot keep {}", slot, len_[slot], n));
    len_[slot] = n;  // the rows past n are written again before they are read
  }
  void set_prefill_chunk(std::size_t rows) override {
    if (rows == 0) throw std::invalid_argument("decode: the prefill chunk must be > 0 tokens");
    chunk_ = rows;
  }

  std::vector<float> prefill(std::size_t slot, std::span<const std::int32_t> tokens, bool all_rows,
                             int threads) override {
    check_slot(slot);
    if (tokens.empty()) throw std::invalid_argument("decode: prefill of no tokens");
    check_room(slot, tokens.size());
    before_pass_(threads);
    std::vector<float> out;
    dk_.graph_pass = false;
    for (std::size_t at = 0; at < tokens.size(); at += chunk_) {
      const std::size_t n = std::min(chunk_, tokens.size() - at);
      dk_.segments = {{slot, len_[slot], n}};
      const bool last = at + n == tokens.size();
      std::vector<float> logits = engine_.decode_logits(tokens.data() + at, n, all_rows);
      len_[slot] += n;
      if (all_rows)
        out.insert(out.end(), logits.begin(), logits.end());
      else if (last)
        out = std::move(logits);
    }
    return out;
  }

  std::vector<float> decode(std::span<const std::size_t> slots, std::span<const std::int32_t> tokens,
                            int threads) override {
    if (slots.empty() || slots.size() != tokens.size())
      throw std::invalid_argument(fmt::format("decode: {} slots and {} tokens (one token per slot, at least one)",
                                              slots.size(), tokens.size()));
    std::vector<bool> seen(len_.size(), false);
    for (std::size_t s : slots) {
      check_slot(s);
      if (seen[s]) throw std::invalid_argument(fmt::format("decode: slot {} listed twice in one pass", s));
      seen[s] = true;
      check_room(s, 1);
    }
    dk_.mark_pass_start();
    before_pass_(threads);
    dk_.segments.clear();
    for (std::size_t s : slots) dk_.segments.push_back({s, len_[s], 1});
    dk_.graph_pass = true;
    std::vector<float> logits;
    try {
      logits = engine_.decode_logits(tokens.data(), tokens.size(), true);
    } catch (...) {
      if (!dk_.abandon_graph()) throw;
      logits = engine_.decode_logits(tokens.data(), tokens.size(), true);  // launched: the pattern is banned
    }
    for (std::size_t s : slots) ++len_[s];
    return logits;
  }

 private:
  static std::size_t check_slots(std::size_t slots) {
    if (slots == 0) throw std::invalid_argument("decode: at least one sequence slot");
    return slots;
  }
  static std::size_t check_ctx(const ModelConfig& cfg, std::size_t ctx) {
    const auto max = static_cast<std::size_t>(cfg.max_seq);
    if (ctx == 0) return max;
    if (ctx > max)
      throw std::invalid_argument(fmt::format("decode: a context of {} positions exceeds the model's max_seq {}", ctx,
                                              max));
    return ctx;
  }
  std::size_t check_slot(std::size_t slot) const {
    if (slot >= len_.size())
      throw std::out_of_range(fmt::format("decode: slot {} of a session of {} slots", slot, len_.size()));
    return slot;
  }
  void check_room(std::size_t slot, std::size_t n) const {
    if (len_[slot] + n > context())
      throw std::length_error(fmt::format("decode: slot {} holds {} tokens; {} more exceed its context of {} positions",
                                          slot, len_[slot], n, context()));
  }

  ModelConfig cfg_;
  DecodeKernels<K> dk_;
  Engine<float, DecodeKernels<K>, PT> engine_;
  std::vector<std::size_t> len_;
  std::size_t chunk_ = 256;
  BeforePass before_pass_;
  LoraRun lora_;  // what engine_.lora points at, when the model has a run
};

}  // namespace lockstep::model
