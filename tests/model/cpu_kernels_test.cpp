// Every fast CPU kernel (backend/cpu/ops.hpp) against its op specification
// (through model::SpecKernels<float>, which calls ops::Op::forward/backward),
// bit for bit, for 1, 2 and 5 threads, driven from the op list: for every op
// of ops::ModelOps, on its gate shapes (Op::gate_cases(): ragged sizes,
// several 64-key attention blocks, grouped and multi-query heads, strided and
// fused q/k/v rows, rows longer than one 4096-element reduction chunk, ...)
// up to a size the single-threaded spec runs quickly, forward and backward,
// with the arguments the op's FwdArgs/BwdArgs fields describe
// (ops/kernel_args.hpp, seeded by ops/arg_arrays.hpp). Variants come from the
// fields: an output that may alias an input is also run in place (the
// engine's way), and a backward that takes an Aux runs with the fast
// forward's kept Aux and with none (recomputed). Every output and saved value
// is compared, every cell not an output included (outputs start as a NaN
// sentinel: a kernel that writes outside its output, or leaves a cell unset,
// differs).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/model/spec_kernels.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/ops/arg_arrays.hpp"
#include "model_test_util.hpp"

namespace m = lockstep::model;
namespace mt = lockstep::model::testing;
namespace ops = lockstep::ops;
using lockstep::cpu::OpKernels;

namespace {

std::uint64_t seed() {
  static const std::uint64_t s = [] {
    const std::uint64_t v = lockstep::ad::seed_from_env();
    std::printf("seed %llu (LOCKSTEP_SEED reproduces)\n", static_cast<unsigned long long>(v));
    return v;
  }();
  return s;
}

const float kSentinel = lockstep::num::float_of(0x7FC0DEADu);

// The spec is single-threaded and copies every argument: cases with more
// cells than this are left to the GPU gates (where the fast kernels are the
// reference) and to the model tests.
constexpr std::size_t kMaxCells = std::size_t{3} << 19;

using Arrays = std::vector<ops::HostArray>;

std::size_t total_cells(const Arrays& arrs) {
  std::size_t n = 0;
  for (const auto& a : arrs) n += a.cells();
  return n;
}

// Counts the cells of the outputs and saved values whose bits differ; `got`
// aliased: an output that may alias an input is read from that input.
struct Tally {
  std::size_t cells = 0, bad = 0;
  std::string first;
  void compare(Arrays& got, Arrays& want, bool aliased, const std::string& what) {
    for (std::size_t k = 0; k < want.size(); ++k) {
      const ops::HostArray& w = want[k];
      if (w.field.role == ops::Role::in || w.index) continue;
      const ops::HostArray* g = &got[k];
      if (aliased && !w.field.may_alias.empty()) g = ops::find(got, w.field.may_alias);
      const std::size_t n = mt::differing_bits(g->f, w.f);
      cells += w.f.size();
      bad += n;
      if (n > 0 && first.empty()) first = what + ": " + std::string(w.field.name);
    }
  }
};

template <class Op>
struct OpCheck {
  using Config = typename Op::Config;
  using GateCase = std::remove_cvref_t<decltype(Op::gate_cases().front())>;
  static constexpr bool kAux = ops::keeps_aux_v<Op>;

  template <class A>
  static A arranged(const GateCase& g) {
    A a{};
    if constexpr (requires { Op::gate_arrange(g, a); }) Op::gate_arrange(g, a);
    return a;
  }
  template <class K, class A>
  static void forward(K& k, const Config& c, const A& a, m::Aux& aux) {
    if constexpr (kAux) k.template forward<Op>(c, a, aux);
    else k.template forward<Op>(c, a);
  }
  template <class K, class A>
  static void backward(K& k, const Config& c, const A& a, m::Aux& aux) {
    if constexpr (kAux) k.template backward<Op>(c, a, aux);
    else k.template backward<Op>(c, a);
  }

  // The forward's arrays on the backward's inputs (by name; its other inputs
  // seeded afresh).
  static Arrays forward_arrays(const GateCase& g, Arrays& bwd, lockstep::ad::Rng& rng) {
    Arrays f = ops::arrays_of(g.config, arranged<ops::FwdArgsOf<Op, float>>(g));
    for (auto& fa : f) {
      const ops::HostArray* b = ops::find(bwd, fa.field.name);
      if (fa.field.role == ops::Role::in && b != nullptr && b->field.role == ops::Role::in) {
        fa.f = b->f;
        fa.i = b->i;
      } else {
        ops::prepare(fa, rng, kSentinel);
      }
    }
    return f;
  }

  static void check_forward(const GateCase& g, lockstep::ad::Rng& rng, Tally& t) {
    const Config& c = g.config;
    const auto proto = arranged<ops::FwdArgsOf<Op, float>>(g);
    Arrays start = ops::arrays_of(c, proto);
    for (auto& a : start) ops::prepare(a, rng, kSentinel);
    Arrays want = start;
    m::SpecKernels<float> spec;
    m::Aux none;
    forward(spec, c, ops::bind_host(c, proto, want), none);
    for (const int threads : {1, 2, 5})
      for (const bool alias : {false, true}) {
        if (alias && !ops::has_alias(start)) continue;
        Arrays got = start;
        OpKernels k;
        k.threads = threads;
        m::Aux aux;
        forward(k, c, ops::bind_host(c, proto, got, alias), aux);
        t.compare(got, want, alias, g.shape + " fwd, " + std::to_string(threads) + " threads" + (alias ? ", in place" : ""));
      }
  }

  static void check_backward(const GateCase& g, lockstep::ad::Rng& rng, Tally& t) {
    const Config& c = g.config;
    const auto proto = arranged<ops::BwdArgsOf<Op, float>>(g);
    const auto fproto = arranged<ops::FwdArgsOf<Op, float>>(g);
    Arrays start = ops::arrays_of(c, proto);
    for (auto& a : start) ops::prepare(a, rng, kSentinel);
    Arrays fwd = forward_arrays(g, start, rng);
    {
      // The saved values of the spec's forward.
      m::SpecKernels<float> spec;
      m::Aux none;
      Arrays f = fwd;
      forward(spec, c, ops::bind_host(c, fproto, f), none);
      for (auto& a : start)
        if (a.field.role == ops::Role::saved) a.f = ops::find(f, a.field.name)->f;
    }
    Arrays want = start;
    m::SpecKernels<float> spec;
    m::Aux none;
    backward(spec, c, ops::bind_host(c, proto, want), none);
    for (const int threads : {1, 2, 5})
      for (const bool alias : {false, true})
        for (const bool kept : {true, false}) {
          if ((alias && !ops::has_alias(start)) || (!kept && !kAux)) continue;
          OpKernels k;
          k.threads = threads;
          m::Aux aux;
          if (kAux && kept) {
            Arrays f = fwd;
            forward(k, c, ops::bind_host(c, fproto, f), aux);
          }
          Arrays got = start;
          backward(k, c, ops::bind_host(c, proto, got, alias), aux);
          t.compare(got, want, alias,
                    g.shape + " bwd, " + std::to_string(threads) + " threads" + (alias ? ", in place" : "") +
                        (kAux ? (kept ? ", aux kept" : ", aux recomputed") : ""));
        }
  }

  static void check(std::uint64_t s) {
    lockstep::ad::Rng rng(s);
    Tally fwd, bwd;
    std::size_t shapes = 0, skipped = 0;
    for (const GateCase& g : Op::gate_cases()) {
      const Arrays a = ops::arrays_of(g.config, arranged<ops::BwdArgsOf<Op, float>>(g));
      const Arrays b = ops::arrays_of(g.config, arranged<ops::FwdArgsOf<Op, float>>(g));
      if (total_cells(a) + total_cells(b) > kMaxCells) {
        ++skipped;
        continue;
      }
      ++shapes;
      check_forward(g, rng, fwd);
      check_backward(g, rng, bwd);
    }
    std::printf("%-14s %3zu shapes (%zu larger left to the GPU gates): fwd %9zu cells, %zu differ; bwd %9zu cells, "
                "%zu differ\n",
                std::string(Op::name).c_str(), shapes, skipped, fwd.cells, fwd.bad, bwd.cells, bwd.bad);
    EXPECT_GT(shapes, 0u) << Op::name;
    EXPECT_EQ(fwd.bad, 0u) << Op::name << ", first at " << fwd.first;
    EXPECT_EQ(bwd.bad, 0u) << Op::name << ", first at " << bwd.first;
  }
};

template <class Op>
class CpuKernelsOp : public ::testing::Test {};

template <class List>
struct GTestTypes;
template <class... Ops>
struct GTestTypes<lockstep::ad::OpList<Ops...>> {
  using type = ::testing::Types<Ops...>;
};
using ModelOpTypes = GTestTypes<ops::ModelOps>::type;

struct OpName {
  template <class Op>
  static std::string GetName(int) {
    return std::string(Op::name);
  }
};

}  // namespace

// Split even micro shapes into several pieces per thread count (the default
// keeps small work on one thread), so that the thread-count checks have teeth.
struct SplitSmallWork : ::testing::Environment {
  void SetUp() override { lockstep::cpu::set_min_parallel_work(256); }
};
const auto* const kSplit = ::testing::AddGlobalTestEnvironment(new SplitSmallWork);

TYPED_TEST_SUITE(CpuKernelsOp, ModelOpTypes, OpName);

TYPED_TEST(CpuKernelsOp, EqualsTheSpecBitForBit) {
  OpCheck<TypeParam>::check(lockstep::ad::derive_seed(seed(), TypeParam::name, 0));
}

// RoPE's kernels cache the cos/sin table of the last Config: one kernel object
// must follow a change of Config (another table in between).
TEST(CpuKernels, RopeTableFollowsTheConfig) {
  lockstep::ad::Rng rng(seed() ^ 3);
  for (auto layout : {ops::RopeLayout::rotate_half, ops::RopeLayout::interleaved}) {
    const ops::Rope::Config c{2, 37, 3, 12, 500000.0, layout, 5};
    std::vector<float> x(2 * 37 * 3 * 12);
    ops::seed_floats(ops::Seed::normal(), rng, x.data(), x.size());
    m::SpecKernels<float> spec;
    std::vector<float> y(x.size()), dx(x.size());
    spec.forward<ops::Rope>(c, {x.data(), y.data()});
    spec.backward<ops::Rope>(c, {x.data(), dx.data()});
    OpKernels f;
    std::size_t bad = 0;
    for (int threads : {1, 2, 5}) {
      f.threads = threads;
      std::vector<float> y2(y.size()), dx2(dx.size());
      ops::Rope::Config other = c;
      other.seq = 3;
      other.offset = 0;
      std::vector<float> scratch(2 * 3 * 3 * 12);
      f.forward<ops::Rope>(other, {x.data(), scratch.data()});  // another table in between
      f.forward<ops::Rope>(c, {x.data(), y2.data()});
      f.backward<ops::Rope>(c, {x.data(), dx2.data()});
      bad += mt::differing_bits(y2, y) + mt::differing_bits(dx2, dx);
    }
    EXPECT_EQ(bad, 0u) << (layout == ops::RopeLayout::rotate_half ? "rotate-half" : "interleaved");
  }
}
