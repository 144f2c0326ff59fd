// Attention through int8 units (ops/unit_attention.hpp, docs/UNITS.md):
//   * the CPU kernel (backend/cpu/unit_attention.cpp) computes the spec's bits,
//     forward and backward, on GPT-2's fused q|k|v rows and on separate
//     grouped-query tensors, on 1 and 3 threads;
//   * a row never depends on the batch or on later keys (batch invariance,
//     prefill = a prefix of the sequence, bit for bit);
//   * the model in --attention units (gpt2-micro, llama-micro) computes the
//     float composition of the op specs bit for bit, the mode changes the
//     loss, is saved in config.json, and a units-attention model refuses to
//     decode (the KV-cache attention is float);
//   * how far the unit attention lies from the float attention (printed).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/model/config.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/model/transformer.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/ops/unit_attention.hpp"

#include "../model/model_test_util.hpp"

namespace m = lockstep::model;
namespace mt = lockstep::model::testing;
namespace ops = lockstep::ops;
using lockstep::Tensor;
using lockstep::num::bits_of;
using UA = ops::UnitAttention;

namespace {

struct SplitSmallWork : ::testing::Environment {
  void SetUp() override { lockstep::cpu::set_min_parallel_work(256); }
};
const auto* const kSplit = ::testing::AddGlobalTestEnvironment(new SplitSmallWork);

std::size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  std::size_t n = a.size() == b.size() ? 0 : 1 + std::max(a.size(), b.size());
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += bits_of(a[i]) != bits_of(b[i]) ? 1 : 0;
  return n;
}

// Random q, k, v of config c as float tensors.
ops::Attention::Inputs<float> random_inputs(const UA::Config& c, std::uint64_t seed) {
  lockstep::ad::Rng rng(seed);
  return ops::cast_fields<ops::Attention::Inputs, float>(UA::sample(c, rng));
}

// The CPU kernel on inputs laid out fused (q|k|v in one row, GPT-2) or separately.
struct KernelRun {
  std::vector<float> o, lse, dq, dk, dv;
};
KernelRun cpu_kernel(const UA::Config& c, const ops::Attention::Inputs<float>& in, const std::vector<float>& dout,
                     bool fused, int threads) {
  const std::size_t rows = c.batch * c.seq, qw = c.q_heads * c.head_dim, kvw = c.kv_heads * c.head_dim;
  const std::size_t ld = fused ? qw + 2 * kvw : 0;
  std::vector<float> qkv(fused ? rows * ld : 0), dqkv(qkv.size(), 7.0f);
  const float *q = in.q.ptr(), *k = in.k.ptr(), *v = in.v.ptr();
  std::size_t ldq = qw, ldkv = kvw;
  KernelRun r{std::vector<float>(rows * qw), std::vector<float>(c.batch * c.q_heads * c.seq), {}, {}, {}};
  if (fused) {
    for (std::size_t t = 0; t < rows; ++t) {
      for (std::size_t e = 0; e < qw; ++e) qkv[t * ld + e] = in.q[t * qw + e];
      for (std::size_t e = 0; e < kvw; ++e) {
        qkv[t * ld + qw + e] = in.k[t * kvw + e];
        qkv[t * ld + qw + kvw + e] = in.v[t * kvw + e];
      }
    }
    q = qkv.data();
    k = q + qw;
    v = k + kvw;
    ldq = ldkv = ld;
  }
  lockstep::cpu::OpKernels kern;
  kern.threads = threads;
  kern.forward<UA>(c, {.q = q, .ldq = ldq, .k = k, .v = v, .ldkv = ldkv, .o = r.o.data(), .lse = r.lse.data()});
  std::vector<float> dq(rows * ldq), dk(rows * ldkv), dv(rows * ldkv);
  float* pdq = fused ? dqkv.data() : dq.data();
  float* pdk = fused ? pdq + qw : dk.data();
  float* pdv = fused ? pdk + kvw : dv.data();
  kern.backward<UA>(c, {.q = q, .ldq = ldq, .k = k, .v = v, .ldkv = ldkv, .o = r.o.data(), .lse = r.lse.data(),
                        .dout = dout.data(), .dq = pdq, .dk = pdk, .dv = pdv});
  r.dq.resize(rows * qw);
  r.dk.resize(rows * kvw);
  r.dv.resize(rows * kvw);
  for (std::size_t t = 0; t < rows; ++t) {
    for (std::size_t e = 0; e < qw; ++e) r.dq[t * qw + e] = pdq[t * ldq + e];
    for (std::size_t e = 0; e < kvw; ++e) {
      r.dk[t * kvw + e] = pdk[t * ldkv + e];
      r.dv[t * kvw + e] = pdv[t * ldkv + e];
    }
  }
  return r;
}

std::vector<UA::Config> shapes() {
  return {UA::of({2, 70, 4, 4, 16, 0.0, 64}),  // multi-head, crosses a 64-key block, GPT-2's layout
          UA::of({3, 37, 6, 2, 8, 0.0, 16}),   // grouped-query, key block 16
          UA::of({1, 130, 2, 1, 33, 0.0, 64})};
}

}  // namespace

TEST(UnitAttention, CpuKernelIsTheSpecBitForBit) {
  for (const UA::Config& c : shapes())
    for (bool fused : {true, false}) {
      if (fused && c.q_heads != c.kv_heads) continue;
      const auto in = random_inputs(c, 5 + c.seq);
      const auto want = UA::forward(c, in);
      Tensor<float> dout(want.o.shape);
      for (std::size_t e = 0; e < dout.numel(); ++e) dout[e] = std::sin(0.37f * static_cast<float>(e));
      const auto g = UA::backward(c, in, want, ops::Attention::Outputs<float>{dout, {}});
      for (int threads : {1, 3}) {
        const KernelRun r = cpu_kernel(c, in, dout.data, fused, threads);
        const std::string what = "T " + std::to_string(c.seq) + " Hq " + std::to_string(c.q_heads) + " Hkv " +
                                 std::to_string(c.kv_heads) + (fused ? " fused" : " separate") + " threads " +
                                 std::to_string(threads);
        EXPECT_EQ(differing(r.o, want.o.data), 0u) << what << ": o";
        EXPECT_EQ(differing(r.lse, want.lse.data), 0u) << what << ": lse";
        EXPECT_EQ(differing(r.dq, g.q.data), 0u) << what << ": dq";
        EXPECT_EQ(differing(r.dk, g.k.data), 0u) << what << ": dk";
        EXPECT_EQ(differing(r.dv, g.v.data), 0u) << what << ": dv";
      }
    }
}

// Each batch entry computed alone, and each prefix of a sequence (the rows a
// prefill of T' tokens computes), gives the full run's rows bit for bit.
TEST(UnitAttention, RowsAreBatchAndPrefixInvariant) {
  for (const UA::Config& c : shapes()) {
    const auto in = random_inputs(c, 11 + c.seq);
    const std::vector<float> dout(c.batch * c.seq * c.q_heads * c.head_dim, 0.5f);
    const KernelRun full = cpu_kernel(c, in, dout, false, 2);
    const std::size_t qw = c.q_heads * c.head_dim, kvw = c.kv_heads * c.head_dim;
    for (std::size_t b = 0; b < c.batch; ++b)
      for (std::size_t Tp : {std::size_t{1}, c.seq / 2, c.seq}) {
        UA::Config cp = c;
        cp.batch = 1;
        cp.seq = Tp;
        ops::Attention::Inputs<float> sub{Tensor<float>({1, Tp, c.q_heads, c.head_dim}),
                                          Tensor<float>({1, Tp, c.kv_heads, c.head_dim}),
                                          Tensor<float>({1, Tp, c.kv_heads, c.head_dim})};
        for (std::size_t t = 0; t < Tp; ++t) {
          for (std::size_t e = 0; e < qw; ++e) sub.q[t * qw + e] = in.q[(b * c.seq + t) * qw + e];
          for (std::size_t e = 0; e < kvw; ++e) {
            sub.k[t * kvw + e] = in.k[(b * c.seq + t) * kvw + e];
            sub.v[t * kvw + e] = in.v[(b * c.seq + t) * kvw + e];
          }
        }
        const KernelRun part = cpu_kernel(cp, sub, std::vector<float>(Tp * qw, 0.5f), false, 1);
        std::vector<float> want(full.o.begin() + static_cast<std::ptrdiff_t>(b * c.seq * qw),
                                full.o.begin() + static_cast<std::ptrdiff_t>((b * c.seq + Tp) * qw));
        EXPECT_EQ(differing(part.o, want), 0u) << "batch entry " << b << ", first " << Tp << " of " << c.seq;
      }
  }
}

// Not a bound: the measured distance of the unit attention from the float
// attention (max |o_unit - o_float| / max |v|), for docs/UNITS.md; and the
// mode is real (it changes the output).
TEST(UnitAttention, DistanceFromTheFloatAttention) {
  for (const UA::Config& c : shapes()) {
    const auto in = random_inputs(c, 21 + c.seq);
    const auto u = UA::forward(c, in), f = ops::Attention::forward(c, in);
    float vmax = 0.0f, worst = 0.0f;
    double sum = 0.0;
    for (float x : in.v.data) vmax = std::max(vmax, std::fabs(x));
    for (std::size_t e = 0; e < u.o.numel(); ++e) {
      worst = std::max(worst, std::fabs(u.o[e] - f.o[e]));
      sum += std::fabs(static_cast<double>(u.o[e] - f.o[e]));
    }
    std::printf("T %zu Hq %zu Hkv %zu Dh %zu: max |unit - float| = %.3g, mean %.3g (max |v| %.3g)\n", c.seq,
                c.q_heads, c.kv_heads, c.head_dim, static_cast<double>(worst), sum / static_cast<double>(u.o.numel()),
                static_cast<double>(vmax));
    EXPECT_GT(worst, 0.0f) << "the unit attention is the float attention";
    EXPECT_LT(worst, 0.1f * vmax);
  }
}

namespace {
m::ModelConfig attention_units(const char* preset, bool linear_units) {
  m::ModelConfig c = m::preset(preset);
  c.attention = m::AttentionMode::Units;
  if (linear_units) {
    c.linear = m::LinearMode::Units;
    c.unit_backward = true;
  }
  return c;
}
}  // namespace

TEST(UnitAttentionModel, CpuModelEqualsTheFloatSpecCompositionBitForBit) {
  for (const char* p : {"gpt2-micro", "llama-micro"})
    for (bool lu : {false, true}) {
      const m::ModelConfig cfg = attention_units(p, lu);
      const std::size_t B = 2, S = 13;
      m::SpecModel<float> spec(cfg);
      mt::randomize(spec.params(), 0x61, 0.2);
      const auto b = mt::random_batch(B, S, cfg.vocab_size, 0x62, true);
      const float want = spec.run(b.ids, b.targets, B, S, true);
      for (int threads : {1, 2}) {
        auto fast = m::make_cpu_model(cfg);
        mt::copy_values(spec.params(), fast->params());
        const float got = fast->forward_backward(b.ids, b.targets, B, S, false, threads);
        std::size_t differ = 0;
        for (std::size_t i = 0; i < spec.params().size(); ++i)
          differ += mt::differing_bits(fast->params()[i].grad, spec.params()[i].grad);
        EXPECT_EQ(bits_of(got), bits_of(want)) << p << (lu ? " linear units" : "") << " threads " << threads;
        EXPECT_EQ(differ, 0u) << p << (lu ? " linear units" : "") << " threads " << threads;
      }
      // The mode is applied: the float attention gives another loss.
      m::ModelConfig fcfg = cfg;
      fcfg.attention = m::AttentionMode::Float;
      m::SpecModel<float> fspec(fcfg);
      mt::copy_values(spec.params(), fspec.params());
      EXPECT_NE(bits_of(fspec.run(b.ids, b.targets, B, S, true)), bits_of(want)) << p << ": the mode changed nothing";
    }
}

TEST(UnitAttentionModel, SavedInConfigJsonAndRefusedByDecoding) {
  m::ModelConfig c = attention_units("gpt2-micro", false);
  const std::string j = m::to_hf_config_json(c);
  EXPECT_NE(j.find("\"lockstep_attention\": \"units\""), std::string::npos) << j;
  EXPECT_EQ(m::from_hf_config_json(j).attention, m::AttentionMode::Units);
  EXPECT_EQ(m::to_hf_config_json(m::preset("gpt2-micro")).find("lockstep_attention"), std::string::npos);
  std::string bad = j;
  bad.replace(bad.find("\"units\"", bad.find("lockstep_attention")), 7, "\"int4\"");
  EXPECT_THROW(m::from_hf_config_json(bad), std::runtime_error);
  auto model = m::make_cpu_model(c);
  try {
    (void)model->decoder(1, 16);
    ADD_FAILURE() << "a units-attention model made a decoder";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("int8 units"), std::string::npos) << e.what();
  }
}
