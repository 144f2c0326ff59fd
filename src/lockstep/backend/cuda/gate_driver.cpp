// The gate driver (gate.hpp): one generic case runner over ops::ModelOps. For
// each op it takes the op's gate shapes (Op::gate_cases()) and the fields of
// its FwdArgs/BwdArgs (ops/kernel_args.hpp), and for every case and
// direction it
//   * allocates every argument on the host (lead cells included), seeds the
//     inputs as the field's Seed says (normals with -0, +0 and large values
//     sprinkled, rows of very different scales, token ids, targets...) and
//     fills every other cell with the pass's pattern (a NaN sentinel on the
//     clean pass, the allocator's poison on the dirty one), the same on the
//     CPU and the device, so a kernel that writes a cell it does not own, or
//     reads one it did not write, differs;
//   * for a backward, runs the CPU forward on the same inputs first and hands
//     its saved outputs (mean, rstd, lse, o) and its Aux to both backwards,
//     so a backward is judged on its own;
//   * uploads, runs cpu::OpKernels and cuda::OpKernels, and compares every
//     output and saved value (and the Aux a forward keeps) by bit pattern.
// Variants come from the fields too: an output that may alias an input runs
// once out of place and once with the device output aliased (the engine's
// in-place calls); a backward that takes an Aux runs with the forward's kept
// and with none (recomputed). A case marked `sweep` also runs once per kernel
// variant the CUDA backend may choose for the op instead of its rule: every
// GEMM block tile (ops that run the GEMM: Linear, BitLinear) and attention's
// backward paths (the dS tiles recomputed, or stored in chunks of one batch
// element). add_into, which is no op, has its own short list.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lockstep/ad/kernel_set.hpp"
#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/backend/cuda/attention_launch.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/gemm_launch.hpp"
#include "lockstep/backend/cuda/int8_gemm.hpp"
#include "lockstep/backend/cuda/ops.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/ops/all.hpp"
#include "lockstep/ops/arg_arrays.hpp"

namespace lockstep::cuda::gate {

// Every op a model runs has its CUDA kernels (model/kernel_set.hpp checks that
// every op of every layer is in ops::ModelOps).
static_assert(ad::KernelSetFor<OpKernels, float, ops::ModelOps>);
static_assert(ad::KernelSetFor<cpu::OpKernels, float, ops::ModelOps>);

namespace {

using Vec = std::vector<float>;
using Ids = std::vector<ops::Index>;
using HostAux = cpu::OpKernels::Aux;  // what the CPU kernels keep from a forward

constexpr std::uint32_t kSentinel = 0x7FC0DEADu;  // a NaN no kernel writes

// The value of every cell no input seeds: the sentinel, or the poison pattern
// on the dirty-buffer pass (what a fresh device allocation holds then).
float fill_value() {
  const std::optional<std::uint32_t> p = poison();
  return num::float_of(p ? *p : kSentinel);
}

// --- the arguments of one call (ops/arg_arrays.hpp), with their device twins ---

struct Array : ops::HostArray {
  DeviceBuffer<float> df;
  DeviceBuffer<ops::Index> di;
};

using ops::find;
using ops::has_alias;

void prepare_cells(Array& a, ad::Rng& rng) { ops::prepare(a, rng, fill_value()); }

template <class Args, class Config>
std::vector<Array> device_arrays(const Config& c, Args proto) {
  return ops::arrays_of<Array>(c, proto);
}

void upload(std::vector<Array>& arrs) {
  for (Array& a : arrs) {
    if (a.cells() == 0) continue;
    if (a.index) a.di.upload(a.i);
    else a.df.upload(a.f);
  }
}

// The args with their pointers into the host (device = false) or device
// arrays; with `alias`, every output that may alias an input is that input's
// array (the device runs aliased; the CPU reference never does).
template <class Args, class Config>
Args bind(const Config& c, Args a, std::vector<Array>& arrs, bool device, bool alias) {
  if (!device) return ops::bind_host(c, a, arrs, alias);
  std::size_t k = 0;
  ops::for_each_arg(a, c, [&](const ops::Field&, auto& p) {
    Array* x = &arrs[k++];
    using E = std::remove_cvref_t<decltype(*p)>;
    if (x->cells() == 0) {
      p = nullptr;
      return;
    }
    if (alias && !x->field.may_alias.empty()) x = find(arrs, x->field.may_alias);
    if constexpr (std::is_same_v<E, ops::Index>) p = x->di.data() + x->field.lead;
    else p = x->df.data() + x->field.lead;
  });
  return a;
}

std::string alias_label(const std::vector<Array>& arrs) {
  std::string s;
  for (const Array& a : arrs)
    if (a.field.role == ops::Role::out && !a.field.may_alias.empty())
      s += fmt::format(" {}={}", a.field.name, a.field.may_alias);
  return s;
}

// Every output and saved value, CPU against device, by bit pattern.
std::string compare(std::vector<Array>& arrs, bool alias) {
  for (Array& a : arrs) {
    if (a.field.role == ops::Role::in || a.cells() == 0) continue;
    const Array* d = alias && !a.field.may_alias.empty() ? find(arrs, a.field.may_alias) : &a;
    const std::string name = alias && d != &a ? fmt::format("{} (= {})", a.field.name, d->field.name)
                                              : std::string(a.field.name);
    std::string diff = first_difference(name, a.f, d->df.download(), a.field.row);
    if (!diff.empty()) return diff;
  }
  return "";
}

Vec downloaded(const DeviceBuffer<float>& b) { return b.empty() ? Vec{} : b.download(); }

// What the device keeps from a forward, against the CPU's Aux: the weight
// scale (and, for BitLinear, its inverse: the device keeps the quantizer's two
// parameters, the backward re-quantizes W with them), x̂ (a), and Ŵ (b) where
// the device keeps it (OpKernels::bitlinear_keeps_w(); otherwise it must keep
// none: the memory the backward's re-quantization saves).
std::string compare_aux(const HostAux& h, const Aux& g) {
  const float hs = h.s, gs = g.scale();
  std::string d = first_difference("aux.s (weight scale)", &hs, &gs, 1);
  if (d.empty() && g.s.size() > 1) {
    const float hinv = 1.0f / h.s, ginv = g.s.download()[1];
    d = first_difference("aux.s[1] (the weight scale's inverse)", &hinv, &ginv, 1);
  }
  if (d.empty()) d = first_difference("aux.a", h.a, downloaded(g.a));
  if (d.empty() && (OpKernels::bitlinear_keeps_w() || h.b.empty())) d = first_difference("aux.b", h.b, downloaded(g.b));
  if (d.empty() && !OpKernels::bitlinear_keeps_w() && !g.b.empty())
    d = fmt::format("aux.b: the device kept {} floats of Ŵ (it keeps none unless LOCKSTEP_CUDA_BITLINEAR_KEEP_W=1)",
                    g.b.size());
  return d;
}

// The CPU's Aux as the device keeps it (compare_aux): a BitLinear's parameters
// are the scale and its inverse (1 / scale, one rounding, as ternary_quantize
// computes it), and its Ŵ only where the device keeps Ŵ.
Aux upload_aux(const HostAux& h) {
  Aux g;
  if (!h.a.empty()) g.a.upload(h.a);
  if (!h.b.empty()) {
    if (OpKernels::bitlinear_keeps_w()) g.b.upload(h.b);
    g.s.upload(std::vector<float>{h.s, 1.0f / h.s});
  }
  return g;
}

// --- variants -------------------------------------------------------------------

// What a case runs beyond its shape: aliased outputs, the Aux, and the
// backend's forced choice (a GEMM block tile, attention's dS path).
struct Variant {
  std::string label;
  bool alias = false;
  bool aux_kept = true;
  int tile = 0;        // launch::gemm_tile_override (0: the rule)
  int ds_chunk = -1;   // OpKernels::attention_ds_chunk (-1: the budget's choice)
  int int8_impl = -1;  // int8_gemm_force (-1: the race's choice)
  int attn_fwd_tile = 0;  // launch::attention_fwd_tile_override (0: the rule)
  bool attn_dkdv_v4 = false;  // launch::attention_bwd_dkdv_v4_override
};

// Forces the variant's backend choice on the device kernel set for one scope
// (a case that forces no tile leaves the override as it found it).
struct Forced {
  Forced(const Variant& v, OpKernels& k)
      : tile(v.tile), int8_impl(v.int8_impl), attn_fwd_tile(v.attn_fwd_tile), attn_dkdv_v4(v.attn_dkdv_v4) {
    k.attention_ds_chunk = v.ds_chunk;
    if (tile != 0) launch::gemm_tile_override(tile);
    if (int8_impl >= 0) int8_gemm_force(int8_impl);
    if (attn_fwd_tile != 0) launch::attention_fwd_tile_override(attn_fwd_tile);
    if (attn_dkdv_v4) launch::attention_bwd_dkdv_v4_override(true);
  }
  ~Forced() {
    if (tile != 0) launch::gemm_tile_override(0);
    if (int8_impl >= 0) int8_gemm_force(-1);
    if (attn_fwd_tile != 0) launch::attention_fwd_tile_override(0);
    if (attn_dkdv_v4) launch::attention_bwd_dkdv_v4_override(false);
  }
  int tile, int8_impl, attn_fwd_tile;
  bool attn_dkdv_v4;
  Forced(const Forced&) = delete;
  Forced& operator=(const Forced&) = delete;
};

// Ops whose CUDA kernels choose among variants by shape (the backend's
// knowledge, not the op's): the GEMM's block tiles, attention's backward paths.
template <class Op>
inline constexpr bool runs_gemm_v = std::is_same_v<Op, ops::Linear> || std::is_same_v<Op, ops::BitLinear>;
// The int8 GEMM's implementations (int8_gemm.hpp), forced one by one where the
// op's products are int8 (the forward, the unit backward; the float STE
// backward runs the float GEMM's kernels, gated by the linear's swept cases).
template <class Op>
inline constexpr bool runs_int8_gemm_v = std::is_same_v<Op, ops::Int8Linear>;

template <class Op>
std::vector<Variant> backend_variants(const typename Op::Config& c, bool backward) {
  std::vector<Variant> v;
  if constexpr (runs_gemm_v<Op>) {
    for (int t = 1; t <= launch::kGemmTiles; ++t) {
      Variant x;
      x.label = fmt::format(" tile {}", t);
      x.tile = t;
      v.push_back(x);
    }
  }
  if constexpr (runs_int8_gemm_v<Op>) {
    if (!backward || c.unit_backward) {
      for (int i = 0; i < kInt8Impls; ++i) {
        Variant x;
        x.label = fmt::format(" int8 {}", int8_impl_name(static_cast<Int8Impl>(i)));
        x.int8_impl = i;
        v.push_back(x);
      }
    }
  }
  if constexpr (std::is_same_v<Op, ops::Attention>) {
    launch::AttentionShape s;
    s.key_block = c.key_block;
    s.head_dim = c.head_dim;
    // The forward's 64-query kernel, where the rule picks the 128-query one.
    if (!backward && launch::attention_fwd_tile(s) == 128) {
      Variant rows64;
      rows64.label = " 64-query tile";
      rows64.attn_fwd_tile = 64;
      v.push_back(rows64);
    }
    if (backward && launch::attention_tiled(s)) {
      Variant recompute;
      recompute.label = " dS recomputed";
      recompute.ds_chunk = 0;
      v.push_back(recompute);
      // v4's dk/dv loop, where v5's fixed loop runs (whole tiles off the diagonal: T > 128).
      if (c.seq > 128) {
        Variant v4;
        v4.label = " dk dv v4 loop";
        v4.attn_dkdv_v4 = true;
        v.push_back(v4);
      }
      if (c.batch >= 2) {
        Variant chunked;
        chunked.label = " dS in chunks of 1 batch element";
        chunked.ds_chunk = 1;
        v.push_back(chunked);
      }
    }
  }
  return v;
}

// --- one op ------------------------------------------------------------------------

template <class Op>
struct OpGates {
  using Config = typename Op::Config;
  using GateCase = std::remove_cvref_t<decltype(Op::gate_cases().front())>;
  static constexpr bool kAux = ops::keeps_aux_v<Op>;

  static int calls() {
    if constexpr (requires { Op::gate_calls; }) return Op::gate_calls;
    return 1;
  }
  template <class A>
  static A arranged(const GateCase& g) {
    A a{};
    if constexpr (requires { Op::gate_arrange(g, a); }) Op::gate_arrange(g, a);
    return a;
  }
  template <class K, class A, class X>
  static void forward(K& k, const Config& c, const A& a, X& aux) {
    if constexpr (kAux) k.template forward<Op>(c, a, aux);
    else k.template forward<Op>(c, a);
  }
  template <class K, class A, class X>
  static void backward(K& k, const Config& c, const A& a, X& aux) {
    if constexpr (kAux) k.template backward<Op>(c, a, aux);
    else k.template backward<Op>(c, a);
  }
  static cpu::OpKernels cpu_kernels() {
    cpu::OpKernels k;
    k.threads = 0;  // all hardware threads (the bits do not depend on it)
    return k;
  }

  // A case's arrays for `proto`'s fields, every cell seeded from `rng` (inputs
  // drawn, outputs set to the pass's fill value).
  template <class Args>
  static std::vector<Array> seeded_arrays(const Config& c, const Args& proto, ad::Rng& rng) {
    std::vector<Array> arrs = device_arrays(c, proto);
    for (Array& a : arrs) prepare_cells(a, rng);
    return arrs;
  }

  static std::string run_forward(const GateCase& g, const Variant& v, std::uint64_t seed) {
    ad::Rng rng(seed);
    const Config& c = g.config;
    const auto proto = arranged<ops::FwdArgsOf<Op, float>>(g);
    std::vector<Array> arrs = seeded_arrays(c, proto, rng);
    upload(arrs);
    auto ck = cpu_kernels();
    HostAux haux;
    forward(ck, c, bind(c, proto, arrs, false, false), haux);
    OpKernels gk;
    Aux gaux;
    {
      Forced forced(v, gk);
      const auto d = bind(c, proto, arrs, true, v.alias);
      for (int rep = 0; rep < (v.alias ? 1 : calls()); ++rep) forward(gk, c, d, gaux);
      synchronize("gate");
    }
    std::string diff = compare(arrs, v.alias);
    if (diff.empty() && kAux) diff = compare_aux(haux, gaux);
    return diff;
  }

  static std::string run_backward(const GateCase& g, const Variant& v, std::uint64_t seed) {
    ad::Rng rng(seed);
    const Config& c = g.config;
    const auto proto = arranged<ops::BwdArgsOf<Op, float>>(g);
    std::vector<Array> arrs = seeded_arrays(c, proto, rng);
    bool needs_forward = kAux && v.aux_kept;
    for (const Array& a : arrs) needs_forward = needs_forward || a.field.role == ops::Role::saved;
    auto ck = cpu_kernels();
    HostAux haux;
    if (needs_forward) {
      // The CPU forward on the same inputs (the backward's, by name; its
      // other inputs seeded afresh): its saved outputs and Aux.
      const auto fproto = arranged<ops::FwdArgsOf<Op, float>>(g);
      std::vector<Array> farrs = device_arrays(c, fproto);
      for (Array& fa : farrs) {
        const Array* b = find(arrs, fa.field.name);
        if (fa.field.role == ops::Role::in && b != nullptr && b->field.role == ops::Role::in) {
          fa.f = b->f;
          fa.i = b->i;
        } else {
          prepare_cells(fa, rng);
        }
      }
      forward(ck, c, bind(c, fproto, farrs, false, false), haux);
      for (Array& a : arrs)
        if (a.field.role == ops::Role::saved) {
          const Array* fa = find(farrs, a.field.name);
          if (fa == nullptr) throw std::logic_error(fmt::format("gate: no forward output '{}'", a.field.name));
          a.f = fa->f;
        }
    }
    if (!v.aux_kept) haux = {};
    upload(arrs);
    Aux gaux = upload_aux(haux);
    backward(ck, c, bind(c, proto, arrs, false, false), haux);
    OpKernels gk;
    {
      Forced forced(v, gk);
      const auto d = bind(c, proto, arrs, true, v.alias);
      for (int rep = 0; rep < (v.alias ? 1 : calls()); ++rep) backward(gk, c, d, gaux);
      synchronize("gate");
    }
    return compare(arrs, v.alias);
  }

  static void add_cases(std::vector<Case>& out) {
    for (const GateCase& g : Op::gate_cases())
      for (const bool bwd : {false, true}) {
        std::vector<Variant> vs(1);
        {
          const std::vector<Array> arrs = bwd ? device_arrays(g.config, arranged<ops::BwdArgsOf<Op, float>>(g))
                                              : device_arrays(g.config, arranged<ops::FwdArgsOf<Op, float>>(g));
          if (has_alias(arrs)) {
            Variant a;
            a.label = alias_label(arrs);
            a.alias = true;
            vs.push_back(a);
          }
        }
        if (bwd && kAux) {
          vs[0].label = " (aux kept)";
          Variant r;
          r.label = " (aux recomputed)";
          r.aux_kept = false;
          vs.push_back(r);
        }
        if (g.sweep)
          for (const Variant& b : backend_variants<Op>(g.config, bwd)) vs.push_back(b);
        for (const Variant& v : vs) {
          Case c{fmt::format("{}_{}", Op::name, bwd ? "bwd" : "fwd"), g.shape + v.label, std::string(Op::name), v.tile,
                 [g, v, bwd](std::uint64_t seed) { return bwd ? run_backward(g, v, seed) : run_forward(g, v, seed); }};
          // Under a forced int8 implementation other than dp4a (the required
          // one), a difference refuses that implementation, as its own gate
          // cases do (int8_gemm.hpp), not the run.
          if (v.int8_impl > 0) {
            c.optional = true;
            const Int8Impl impl = static_cast<Int8Impl>(v.int8_impl);
            c.run = [g, v, bwd, impl, label = c.kernel + " on " + c.shape](std::uint64_t seed) {
              std::string d = bwd ? run_backward(g, v, seed) : run_forward(g, v, seed);
              if (!d.empty()) int8_gate_record(impl, d, label);
              return d;
            };
          }
          out.push_back(std::move(c));
        }
      }
  }
};

template <class... Ops>
void add_op_cases(std::vector<Case>& out, ad::OpList<Ops...>) {
  (OpGates<Ops>::add_cases(out), ...);
}

// add_into (no op: the gradient of a tensor read twice): acc = acc + x.
void add_into_cases(std::vector<Case>& out) {
  for (std::size_t n : {1, 5, 33, 97, 256, 5000, 130 * 97})
    out.push_back({"add_into", fmt::format("n {}", n), "add_into", 0, [n](std::uint64_t seed) -> std::string {
                     ad::Rng rng(seed);
                     // -0 + -0 = -0 in every fifth cell; sums past FLT_MAX overflow.
                     const ops::Seed s = ops::Seed::normal(1.0, 3e38f, 5);
                     Vec acc(n), x(n);
                     ops::seed_floats(s, rng, acc.data(), n);
                     ops::seed_floats(s, rng, x.data(), n);
                     DeviceBuffer<float> d_acc, d_x;
                     d_acc.upload(acc);
                     d_x.upload(x);
                     cpu::OpKernels().add_into(n, acc.data(), x.data());
                     OpKernels().add_into(n, d_acc.data(), d_x.data());
                     return first_difference("acc", acc, d_acc.download());
                   }});
}

}  // namespace

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  // The int8 GEMM's first: the int8 unit linear's cases call the GEMM's
  // dispatch, which reads their outcomes (int8_gemm.hpp).
  for (Case& c : int8_cases()) cases.push_back(std::move(c));
  for (Case& c : row_quantize_cases()) cases.push_back(std::move(c));
  for (Case& c : norm_quantize_cases()) cases.push_back(std::move(c));
  // Likewise the column quantizer's: the unit backward's calls read theirs (col_quant.hpp).
  for (Case& c : col_quant_cases()) cases.push_back(std::move(c));
  add_op_cases(cases, ops::ModelOps{});
  add_into_cases(cases);
  for (Case& c : bitlinear_codes_cases()) cases.push_back(std::move(c));
  for (Case& c : lora_cases()) cases.push_back(std::move(c));
  for (Case& c : train_cases()) cases.push_back(std::move(c));
  return cases;
}

}  // namespace lockstep::cuda::gate
