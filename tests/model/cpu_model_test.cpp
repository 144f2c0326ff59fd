// make_cpu_model — the fast CPU model — computes exactly the float
// composition of the op specifications: the loss and every parameter gradient
// equal Engine<float, SpecKernels<float>>'s bit for bit, on every family and
// variant, for 1, 2 and 5 threads; gradient accumulation, the loss-only pass
// and next_logits too. Initialization is deterministic and thread-independent.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "lockstep/ad/rng.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/model/params.hpp"
#include "lockstep/model/transformer.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "model_test_util.hpp"

namespace m = lockstep::model;
namespace mt = lockstep::model::testing;
using lockstep::num::bits_of;

namespace {

std::uint64_t test_seed() {
  static const std::uint64_t s = [] {
    const std::uint64_t v = lockstep::ad::seed_from_env();
    std::printf("seed %llu (LOCKSTEP_SEED=%llu reproduces)\n", static_cast<unsigned long long>(v),
                static_cast<unsigned long long>(v));
    return v;
  }();
  return s;
}

struct Shape {
  std::size_t batch, seq;
};

}  // namespace

// Split even micro shapes into several pieces per thread count (the default
// keeps small work on one thread), so that the thread-count checks have teeth.
struct SplitSmallWork : ::testing::Environment {
  void SetUp() override { lockstep::cpu::set_min_parallel_work(256); }
};
const auto* const kSplit = ::testing::AddGlobalTestEnvironment(new SplitSmallWork);

TEST(CpuModel, LossAndEveryGradientEqualTheFloatSpecBitForBit) {
  const std::uint64_t seed = test_seed();
  for (const auto& nc : mt::micro_configs(true)) {
    const Shape sh = nc.cfg.max_seq > 64 ? Shape{1, 70} : Shape{2, 13};  // 70: two 64-key blocks
    m::SpecModel<float> spec(nc.cfg);
    mt::randomize(spec.params(), seed ^ 0x51, 0.2);
    auto fast = m::make_cpu_model(nc.cfg);
    mt::copy_values(spec.params(), fast->params());
    const auto b = mt::random_batch(sh.batch, sh.seq, nc.cfg.vocab_size, seed ^ 0x52, true);
    const float want = spec.run(b.ids, b.targets, sh.batch, sh.seq, true);
    for (int threads : {1, 2, 5}) {
      const float got = fast->forward_backward(b.ids, b.targets, static_cast<std::int64_t>(sh.batch),
                                               static_cast<std::int64_t>(sh.seq), false, threads);
      std::size_t cells = 0, mismatches = 0, tensors_off = 0;
      for (std::size_t i = 0; i < spec.params().size(); ++i) {
        const std::size_t d = mt::differing_bits(fast->params()[i].grad, spec.params()[i].grad);
        cells += spec.params()[i].grad.size();
        mismatches += d;
        tensors_off += d != 0;
        if (d) ADD_FAILURE() << nc.name << " threads " << threads << ": " << d << " cells of d"
                             << spec.params()[i].name << " differ";
      }
      std::printf("%-42s B=%zu T=%-3zu threads %d: loss %.9g (spec %.9g) %s; %zu gradient cells in %zu tensors, "
                  "%zu differ\n",
                  nc.name.c_str(), sh.batch, sh.seq, threads, static_cast<double>(got), static_cast<double>(want),
                  bits_of(got) == bits_of(want) ? "bit-equal" : "DIFFERENT", cells, spec.params().size(),
                  mismatches);
      EXPECT_EQ(bits_of(got), bits_of(want)) << nc.name << " threads " << threads;
      EXPECT_EQ(mismatches, 0u);
      EXPECT_EQ(tensors_off, 0u);
      // The loss alone (validation) is the same value.
      const float l = fast->loss(b.ids, b.targets, static_cast<std::int64_t>(sh.batch),
                                 static_cast<std::int64_t>(sh.seq), threads);
      EXPECT_EQ(bits_of(l), bits_of(want)) << nc.name;
    }
  }
}

// Recomputing each block's activations before its backward gives the kept
// activations' bits: the loss and every gradient, fresh and accumulated, and the
// spec engine traces the recomputation (each block's forward list again, just
// before its backward list).
TEST(CpuModel, RecomputedActivationsGiveTheKeptActivationsBits) {
  const std::uint64_t seed = test_seed();
  for (const auto& nc : mt::micro_configs(true)) {
    const Shape sh = nc.cfg.max_seq > 64 ? Shape{1, 70} : Shape{2, 13};
    auto keep = m::make_cpu_model(nc.cfg), recompute = m::make_cpu_model(nc.cfg);
    keep->init(seed);
    recompute->init(seed);
    recompute->set_recompute(true);
    std::size_t cells = 0;
    for (bool accumulate : {false, true}) {
      const auto b = mt::random_batch(sh.batch, sh.seq, nc.cfg.vocab_size, seed ^ (accumulate ? 0x61 : 0x62), true);
      const auto B = static_cast<std::int64_t>(sh.batch), T = static_cast<std::int64_t>(sh.seq);
      const float lk = keep->forward_backward(b.ids, b.targets, B, T, accumulate, 2);
      const float lr = recompute->forward_backward(b.ids, b.targets, B, T, accumulate, 2);
      EXPECT_EQ(bits_of(lk), bits_of(lr)) << nc.name;
      for (std::size_t i = 0; i < keep->params().size(); ++i) {
        EXPECT_EQ(mt::differing_bits(keep->params()[i].grad, recompute->params()[i].grad), 0u)
            << nc.name << " d" << keep->params()[i].name << (accumulate ? " (accumulated)" : "");
        cells += keep->params()[i].grad.size();
      }
    }
    std::printf("%-42s recomputed activations: loss and %zu gradient cells bit-equal to kept\n", nc.name.c_str(),
                cells);
  }
  // The trace: with recomputation every block's forward list runs a second time.
  const auto cfg = mt::micro_configs(true).front().cfg;
  m::SpecModel<float> spec(cfg);
  m::Trace trace;
  spec.engine().trace = &trace;
  spec.engine().recompute_blocks = true;
  const auto b = mt::random_batch(1, 8, cfg.vocab_size, seed, false);
  spec.run(b.ids, b.targets, 1, 8, true);
  std::size_t recomputed = 0;
  for (const std::string& line : trace) recomputed += line.rfind("recompute block", 0) == 0;
  EXPECT_GT(recomputed, 0u);
  std::printf("trace: %zu steps, %zu of them recomputation\n", trace.size(), recomputed);
}

TEST(CpuModel, AccumulationAddsTheNewGradientInCallOrder) {
  const std::uint64_t seed = test_seed();
  for (const auto& nc : mt::micro_configs(false)) {
    m::SpecModel<float> spec(nc.cfg);
    mt::randomize(spec.params(), seed ^ 0x61, 0.2);
    auto fast = m::make_cpu_model(nc.cfg);
    mt::copy_values(spec.params(), fast->params());
    const auto b1 = mt::random_batch(2, 5, nc.cfg.vocab_size, seed ^ 0x62);
    const auto b2 = mt::random_batch(2, 5, nc.cfg.vocab_size, seed ^ 0x63);
    // Separately: g1, g2.
    fast->forward_backward(b1.ids, b1.targets, 2, 5, false, 2);
    std::vector<std::vector<float>> g1;
    for (const auto& p : fast->params()) g1.push_back(p.grad);
    fast->forward_backward(b2.ids, b2.targets, 2, 5, false, 2);
    std::vector<std::vector<float>> g2;
    for (const auto& p : fast->params()) g2.push_back(p.grad);
    // Accumulated: g1 then g1 + g2.
    fast->forward_backward(b1.ids, b1.targets, 2, 5, false, 1);
    fast->forward_backward(b2.ids, b2.targets, 2, 5, true, 5);
    spec.run(b1.ids, b1.targets, 2, 5, true, false);
    spec.run(b2.ids, b2.targets, 2, 5, true, true);
    std::size_t cells = 0, bad_sum = 0, bad_spec = 0;
    for (std::size_t i = 0; i < g1.size(); ++i) {
      std::vector<float> sum(g1[i].size());
      for (std::size_t e = 0; e < sum.size(); ++e) sum[e] = g1[i][e] + g2[i][e];
      cells += sum.size();
      bad_sum += mt::differing_bits(fast->params()[i].grad, sum);
      bad_spec += mt::differing_bits(fast->params()[i].grad, spec.params()[i].grad);
    }
    std::printf("%-14s accumulate: %zu cells, %zu differ from g1 + g2, %zu differ from the spec\n", nc.name.c_str(),
                cells, bad_sum, bad_spec);
    EXPECT_EQ(bad_sum, 0u);
    EXPECT_EQ(bad_spec, 0u);
  }
}

TEST(CpuModel, NextLogitsEqualTheSpecsLastRowForEveryPrefix) {
  const std::uint64_t seed = test_seed();
  for (const auto& nc : mt::micro_configs(false)) {
    m::SpecModel<float> spec(nc.cfg);
    mt::randomize(spec.params(), seed ^ 0x71, 0.2);
    auto fast = m::make_cpu_model(nc.cfg);
    mt::copy_values(spec.params(), fast->params());
    const auto b = mt::random_batch(1, 12, nc.cfg.vocab_size, seed ^ 0x72);
    std::size_t cells = 0, bad = 0;
    for (std::size_t len = 1; len <= b.ids.size(); len += 5) {
      const auto got = fast->next_logits(std::span(b.ids.data(), len), 2);
      const auto want = spec.engine().last_logits(b.ids.data(), len);
      cells += want.size();
      bad += mt::differing_bits(got, want);
    }
    std::printf("%-14s next_logits: %zu logits over 3 prefixes, %zu differ\n", nc.name.c_str(), cells, bad);
    EXPECT_EQ(bad, 0u);
  }
}

TEST(CpuModel, InitIsPhiloxPerNameAndThreadIndependent) {
  for (const auto& nc : mt::micro_configs(false)) {
    auto a = m::make_cpu_model(nc.cfg);
    auto b = m::make_cpu_model(nc.cfg);
    a->init(7);
    b->init(7);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < a->params().size(); ++i) bad += mt::differing_bits(a->params()[i].value, b->params()[i].value);
    EXPECT_EQ(bad, 0u);
    // The fill is a pure function of (seed, name, index): 1 and 5 threads agree.
    const auto specs = m::param_specs(nc.cfg);
    for (std::size_t i = 0; i < specs.size(); ++i) {
      std::vector<float> t1(a->params()[i].value.size()), t5(t1.size());
      m::init_param(specs[i], t1.data(), t1.size(), 7, 1);
      m::init_param(specs[i], t5.data(), t5.size(), 7, 5);
      EXPECT_EQ(mt::differing_bits(t1, a->params()[i].value), 0u) << specs[i].name;
      EXPECT_EQ(mt::differing_bits(t5, a->params()[i].value), 0u) << specs[i].name;
    }
    // Norms at 1, biases at 0, matrices N(0, std) with the residual
    // projections scaled by 1/sqrt(2 n_layer); another seed changes them.
    b->init(8);
    for (std::size_t i = 0; i < specs.size(); ++i) {
      const auto& v = a->params()[i].value;
      const bool differs = mt::differing_bits(v, b->params()[i].value) != 0;
      if (specs[i].init == m::Init::One) {
        for (float x : v) ASSERT_EQ(x, 1.0f) << specs[i].name;
      } else if (specs[i].init == m::Init::Zero) {
        for (float x : v) ASSERT_EQ(x, 0.0f) << specs[i].name;
      } else {
        EXPECT_TRUE(differs) << specs[i].name;
        double s = 0, s2 = 0;
        for (float x : v) s += static_cast<double>(x), s2 += static_cast<double>(x) * static_cast<double>(x);
        const double n = static_cast<double>(v.size()), mean = s / n, sd = std::sqrt(s2 / n - mean * mean);
        const bool resid = specs[i].name.find("c_proj") != std::string::npos ||
                           specs[i].name.find("o_proj") != std::string::npos ||
                           specs[i].name.find("down_proj") != std::string::npos;
        const double want = resid ? 0.02 / std::sqrt(2.0 * static_cast<double>(nc.cfg.n_layer)) : 0.02;
        EXPECT_NEAR(sd / want, 1.0, 6.0 / std::sqrt(n)) << specs[i].name;  // ~6 standard errors
        EXPECT_NEAR(mean / want, 0.0, 6.0 / std::sqrt(n)) << specs[i].name;
      }
    }
    // At initialization the loss is near ln(vocab).
    const auto bt = mt::random_batch(2, 16, nc.cfg.vocab_size, 3);
    const float l = a->loss(bt.ids, bt.targets, 2, 16, 2);
    std::printf("%-14s initial loss %.4f, ln(vocab) %.4f\n", nc.name.c_str(), static_cast<double>(l),
                std::log(static_cast<double>(nc.cfg.vocab_size)));
    EXPECT_NEAR(static_cast<double>(l), std::log(static_cast<double>(nc.cfg.vocab_size)), 0.1);
  }
}

TEST(CpuModel, RejectsBadArguments) {
  auto f = m::make_cpu_model(m::preset("gpt2-micro"));
  const auto b = mt::random_batch(1, 8, 256, 1);
  EXPECT_THROW(f->forward_backward(b.ids, b.targets, 2, 8, false, 1), std::invalid_argument);  // size
  EXPECT_THROW(f->loss(b.ids, b.targets, 1, 0, 1), std::invalid_argument);
  auto bad = b;
  bad.ids[3] = 256;  // outside the vocabulary
  EXPECT_THROW(f->forward_backward(bad.ids, bad.targets, 1, 8, false, 1), std::out_of_range);
  bad = b;
  bad.targets[3] = 300;
  EXPECT_THROW(f->loss(bad.ids, bad.targets, 1, 8, 1), std::out_of_range);
  const auto long_b = mt::random_batch(1, 65, 256, 1);  // max_seq is 64
  EXPECT_THROW(f->loss(long_b.ids, long_b.targets, 1, 65, 1), std::invalid_argument);
  EXPECT_THROW(f->next_logits({}, 1), std::invalid_argument);
  m::ModelConfig c = m::preset("gpt2-micro");
  c.n_head = 3;  // does not divide d_model
  EXPECT_THROW(m::make_cpu_model(c), std::invalid_argument);
}

// The engine checks every id and target on the host before the first step
// runs (a device kernel set cannot throw from inside a kernel), with the op
// specifications' messages: no step of the pass has run when it throws.
TEST(CpuModel, BadTokensAreRefusedBeforeAnyStepRuns) {
  const auto cfg = m::preset("gpt2-micro");
  m::SpecModel<float> spec(cfg);
  m::Trace trace;
  spec.engine().trace = &trace;
  const auto b = mt::random_batch(1, 8, cfg.vocab_size, 5, false);
  const auto expect_refused = [&](const mt::Batch& bad, const std::string& message) {
    trace.clear();
    try {
      spec.run(bad.ids, bad.targets, 1, 8, true);
      ADD_FAILURE() << "accepted: " << message;
    } catch (const std::out_of_range& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
    EXPECT_TRUE(trace.empty()) << trace.size() << " steps ran first, e.g. " << trace.front();
  };
  auto bad = b;
  bad.ids[7] = static_cast<std::int32_t>(cfg.vocab_size);
  expect_refused(bad, "embedding: token id " + std::to_string(cfg.vocab_size) + " outside [0, " +
                          std::to_string(cfg.vocab_size) + ")");
  bad = b;
  bad.ids[0] = -2;
  expect_refused(bad, "embedding: token id -2 outside [0, " + std::to_string(cfg.vocab_size) + ")");
  bad = b;
  bad.targets[7] = static_cast<std::int32_t>(cfg.vocab_size) + 4;
  expect_refused(bad, "cross_entropy: target " + std::to_string(cfg.vocab_size + 4) + " >= vocab " +
                          std::to_string(cfg.vocab_size));
  bad = b;
  bad.targets[2] = -1;  // an ignored row is not an error
  trace.clear();
  EXPECT_NO_THROW(spec.run(bad.ids, bad.targets, 1, 8, true));
  EXPECT_FALSE(trace.empty());
}
