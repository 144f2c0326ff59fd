// Metamorphic properties and definitional absolutes: checks that need no
// reference implementation, so a bug written the same way into a forward and
// its backward (which finite differences, the kernel bit tests and the gates
// all accept: they compare lockstep with itself) still has something to fail.
//
// Relations (bit for bit, on the float spec model and the fast CPU model):
// permuting the rows of a batch permutes the outputs; changing a future token
// changes no earlier output; a row's outputs do not depend on the other rows
// of its batch; the loss is the mean of the position losses. A relation cannot
// see a uniform scale error (if `out` satisfies it, so does `c·out`: seed 001's
// c·out theorem), so beside them stand absolutes read off the definitions:
// uniform logits give exactly log V; linear layers scale exactly with powers of
// two; at unit scales the int8 and ternary units are the exact integer dot
// product; softmax rows sum to one within the proven bound; one key attends
// with probability one, identical keys average the values; RoPE at position 1
// rotates pair j by θ^(-2j/d); the norms honour eps; GELU (tanh form), SiLU and
// ReLU² equal their published formulas.
//
// A "position loss" is read through the public loss: with one target kept and
// every other set to -1, the mean over the one valid row is that row's
// cross-entropy exactly (the other rows contribute +0, the division is by 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "../common/test_seed.hpp"  // ad::seed_from_env: $LOCKSTEP_SEED or the clock, printed
#include "lockstep/ad/rng.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/model/transformer.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/ops/all.hpp"

namespace m = lockstep::model;
namespace ops = lockstep::ops;
using lockstep::Tensor;
using lockstep::num::bits_of;

namespace {

// The three families at test size, with the RoPE variants that matter.
std::vector<std::pair<std::string, m::ModelConfig>> configs() {
  std::vector<std::pair<std::string, m::ModelConfig>> v{{"gpt2-micro", m::preset("gpt2-micro")},
                                                        {"llama-micro", m::preset("llama-micro")},
                                                        {"bitnet-micro", m::preset("bitnet-micro")}};
  m::ModelConfig l = m::preset("llama-micro");
  l.rope_layout = m::RopeLayout::Interleaved;
  l.rope_theta = 500000.0;
  l.n_kv_head = 1;
  l.tie_embeddings = false;
  v.push_back({"llama-micro/interleaved,theta5e5,mqa,untied", l});
  return v;
}

// A loss function over (ids, targets, batch, seq): the float spec model or the
// fast CPU model, with the same random parameters.
using LossFn = std::function<float(const std::vector<std::int32_t>&, const std::vector<std::int32_t>&, std::size_t,
                                   std::size_t)>;

struct Models {
  std::unique_ptr<m::SpecModel<float>> spec;
  std::unique_ptr<m::Model> cpu;
  std::vector<std::pair<std::string, LossFn>> fns;
};

void randomize(std::vector<m::Param>& ps, std::uint64_t seed) {
  lockstep::ad::Rng rng(seed);
  for (auto& p : ps) {
    const bool vec = p.shape.size() == 1;
    const bool norm = vec && p.name.find("bias") == std::string::npos;
    for (auto& v : p.value) {
      const double z = rng.normal();
      v = static_cast<float>(vec ? (norm ? 1.0 + 0.1 * z : 0.1 * z) : 0.2 * z);
    }
  }
}

Models make_models(const m::ModelConfig& c, std::uint64_t seed) {
  Models ms;
  ms.cpu = m::make_cpu_model(c);
  randomize(ms.cpu->params(), seed);
  ms.spec = std::make_unique<m::SpecModel<float>>(c);
  for (std::size_t i = 0; i < ms.spec->params().size(); ++i) ms.spec->params()[i].value = ms.cpu->params()[i].value;
  m::SpecModel<float>* spec = ms.spec.get();
  m::Model* cpu = ms.cpu.get();
  ms.fns.push_back({"spec", [spec](const auto& ids, const auto& tg, std::size_t b, std::size_t s) {
                      return spec->run(ids, tg, b, s, false);
                    }});
  ms.fns.push_back({"cpu", [cpu](const auto& ids, const auto& tg, std::size_t b, std::size_t s) {
                      return cpu->loss(ids, tg, static_cast<std::int64_t>(b), static_cast<std::int64_t>(s), 2);
                    }});
  return ms;
}

struct Batch {
  std::vector<std::int32_t> ids, targets;
  std::size_t batch = 0, seq = 0;
};

Batch random_batch(std::size_t batch, std::size_t seq, std::int64_t vocab, std::uint64_t seed) {
  lockstep::ad::Rng rng(seed);
  Batch b{{}, {}, batch, seq};
  for (std::size_t i = 0; i < batch * seq; ++i) {
    b.ids.push_back(static_cast<std::int32_t>(rng.below(static_cast<std::size_t>(vocab))));
    b.targets.push_back(static_cast<std::int32_t>(rng.below(static_cast<std::size_t>(vocab))));
  }
  return b;
}

// The loss of every position alone ([batch * seq], row-major).
std::vector<float> position_losses(const LossFn& f, const Batch& b) {
  std::vector<float> out;
  for (std::size_t i = 0; i < b.ids.size(); ++i) {
    std::vector<std::int32_t> one(b.ids.size(), -1);
    one[i] = b.targets[i];
    out.push_back(f(b.ids, one, b.batch, b.seq));
  }
  return out;
}

bool same_bits(float a, float b) { return bits_of(a) == bits_of(b); }

}  // namespace

// Relations -----------------------------------------------------------------

TEST(Metamorphic, PermutingBatchRowsPermutesTheOutputsBitForBit) {
  for (const auto& [name, cfg] : configs()) {
    Models ms = make_models(cfg, lockstep::test::test_seed() ^ 0x101);
    const Batch b = random_batch(3, 5, cfg.vocab_size, lockstep::test::test_seed() ^ 0x102);
    const std::size_t perm[3] = {2, 0, 1};  // row r of b goes to row perm[r]
    Batch p = b;
    for (std::size_t r = 0; r < 3; ++r)
      for (std::size_t t = 0; t < b.seq; ++t) {
        p.ids[perm[r] * b.seq + t] = b.ids[r * b.seq + t];
        p.targets[perm[r] * b.seq + t] = b.targets[r * b.seq + t];
      }
    for (const auto& [fname, f] : ms.fns) {
      const auto lb = position_losses(f, b), lp = position_losses(f, p);
      std::size_t differ = 0;
      for (std::size_t r = 0; r < 3; ++r)
        for (std::size_t t = 0; t < b.seq; ++t) differ += !same_bits(lb[r * b.seq + t], lp[perm[r] * b.seq + t]);
      EXPECT_EQ(differ, 0u) << name << " (" << fname << "): position losses not permuted with their rows";
    }
  }
}

TEST(Metamorphic, AFutureTokenChangesNoEarlierOutput) {
  for (const auto& [name, cfg] : configs()) {
    Models ms = make_models(cfg, lockstep::test::test_seed() ^ 0x201);
    const Batch b = random_batch(2, 8, cfg.vocab_size, lockstep::test::test_seed() ^ 0x202);
    for (const std::size_t t0 : {std::size_t{1}, std::size_t{7}}) {
      Batch c = b;
      c.ids[1 * b.seq + t0] = static_cast<std::int32_t>((b.ids[1 * b.seq + t0] + 17) % cfg.vocab_size);
      for (const auto& [fname, f] : ms.fns) {
        const auto lb = position_losses(f, b), lc = position_losses(f, c);
        std::size_t earlier = 0, later_changed = 0, other_row = 0;
        for (std::size_t t = 0; t < b.seq; ++t) {
          other_row += !same_bits(lb[t], lc[t]);
          if (t < t0) earlier += !same_bits(lb[b.seq + t], lc[b.seq + t]);
          else later_changed += !same_bits(lb[b.seq + t], lc[b.seq + t]);
        }
        EXPECT_EQ(earlier, 0u) << name << " (" << fname << "): token " << t0 << " changed an earlier position";
        EXPECT_EQ(other_row, 0u) << name << " (" << fname << "): a token of row 1 changed row 0";
        // Non-triviality: the changed token itself is seen (from position t0 on).
        EXPECT_GT(later_changed, 0u) << name << " (" << fname << "): token " << t0 << " changed nothing";
      }
    }
  }
}

TEST(Metamorphic, ARowsOutputsDoNotDependOnTheOtherRowsOfItsBatch) {
  for (const auto& [name, cfg] : configs()) {
    Models ms = make_models(cfg, lockstep::test::test_seed() ^ 0x301);
    const Batch b = random_batch(3, 7, cfg.vocab_size, lockstep::test::test_seed() ^ 0x302);
    Batch alone{{b.ids.begin() + 7, b.ids.begin() + 14}, {b.targets.begin() + 7, b.targets.begin() + 14}, 1, 7};
    Batch other = random_batch(3, 7, cfg.vocab_size, lockstep::test::test_seed() ^ 0x303);
    std::copy(alone.ids.begin(), alone.ids.end(), other.ids.begin() + 7);
    std::copy(alone.targets.begin(), alone.targets.end(), other.targets.begin() + 7);
    for (const auto& [fname, f] : ms.fns) {
      const auto la = position_losses(f, alone), lb = position_losses(f, b), lo = position_losses(f, other);
      std::size_t differ = 0;
      for (std::size_t t = 0; t < 7; ++t)
        differ += !same_bits(la[t], lb[7 + t]) + !same_bits(la[t], lo[7 + t]);
      EXPECT_EQ(differ, 0u) << name << " (" << fname << "): row 1 depends on its batch";
    }
    // The CPU model's thread count changes nothing either.
    const float l1 = ms.cpu->loss(b.ids, b.targets, 3, 7, 1), l2 = ms.cpu->loss(b.ids, b.targets, 3, 7, 2);
    EXPECT_TRUE(same_bits(l1, l2)) << name << ": 1 thread " << l1 << ", 2 threads " << l2;
  }
}

TEST(Metamorphic, TheLossIsTheMeanOfThePositionLossesWithATarget) {
  for (const auto& [name, cfg] : configs()) {
    Models ms = make_models(cfg, lockstep::test::test_seed() ^ 0x401);
    Batch b = random_batch(2, 6, cfg.vocab_size, lockstep::test::test_seed() ^ 0x402);
    b.targets[3] = -1;
    b.targets[8] = -1;
    for (const auto& [fname, f] : ms.fns) {
      const auto lp = position_losses(f, b);
      double sum = 0.0;
      std::size_t valid = 0;
      for (std::size_t i = 0; i < lp.size(); ++i) {
        if (b.targets[i] < 0) {
          EXPECT_EQ(bits_of(lp[i]), 0u) << name << " (" << fname << "): a position without a target has a loss";
          continue;
        }
        sum += static_cast<double>(lp[i]);
        ++valid;
        EXPECT_GT(lp[i], 0.0f) << name << " (" << fname << "): cross-entropy must be positive";
      }
      const float all = f(b.ids, b.targets, b.batch, b.seq);
      // a float sum of 10 values against a double one: ~10 roundings of 2^-24.
      EXPECT_NEAR(all, sum / static_cast<double>(valid), 2e-6 * sum / static_cast<double>(valid))
          << name << " (" << fname << ")";
    }
  }
}

// Absolutes -----------------------------------------------------------------

TEST(Absolute, UniformLogitsGiveLogVocab) {
  for (const auto& [name, cfg] : configs()) {
    Models ms = make_models(cfg, lockstep::test::test_seed() ^ 0x501);
    // The final norm's weight (and GPT-2's bias) at zero: every logit is 0.
    for (auto* ps : {&ms.cpu->params()}) {
      for (auto& p : *ps)
        if (p.name == "transformer.ln_f.weight" || p.name == "transformer.ln_f.bias" || p.name == "model.norm.weight")
          std::fill(p.value.begin(), p.value.end(), 0.0f);
    }
    for (std::size_t i = 0; i < ms.spec->params().size(); ++i) ms.spec->params()[i].value = ms.cpu->params()[i].value;
    const Batch b = random_batch(2, 5, cfg.vocab_size, lockstep::test::test_seed() ^ 0x502);
    const double want = std::log(static_cast<double>(cfg.vocab_size));
    for (const auto& [fname, f] : ms.fns) {
      const float got = f(b.ids, b.targets, b.batch, b.seq);
      // log within lockstep's measured 1 ulp, the mean of equal values exact up to a few roundings.
      EXPECT_NEAR(got, want, 8 * 0x1p-24 * want) << name << " (" << fname << ")";
      const auto logits = ms.cpu->next_logits(b.ids, 1);
      for (float z : logits) ASSERT_EQ(bits_of(std::fabs(z)), 0u) << name << ": a logit of a zero head input";
    }
  }
}

TEST(Absolute, LinearLayersScaleExactlyWithPowersOfTwo) {
  lockstep::ad::Rng rng(lockstep::test::test_seed() ^ 0x601);
  auto normal = [&](std::size_t n, double s) {
    std::vector<float> v(n);
    for (auto& x : v) x = static_cast<float>(s * rng.normal());
    return v;
  };
  const std::size_t N = 5, K = 37, M = 11;
  const Tensor<float> x({N, K}, normal(N * K, 1.0)), w({M, K}, normal(M * K, 0.2));
  const float scales[] = {0.125f, 2.0f, 32.0f};
  std::size_t checked = 0;
  for (float s : scales) {
    Tensor<float> xs = x, ws = w;
    for (auto& v : xs.data) v *= s;
    for (auto& v : ws.data) v *= s;
    const auto y = ops::Linear::forward<float>({N, K, M, false}, {x, w, {}}).y;
    const auto yx = ops::Linear::forward<float>({N, K, M, false}, {xs, w, {}}).y;
    const auto yw = ops::Linear::forward<float>({N, K, M, false}, {x, ws, {}}).y;
    const auto by = ops::BitLinear::forward<float>({N, K, M}, {x, w}).y;
    const auto byx = ops::BitLinear::forward<float>({N, K, M}, {xs, w}).y;
    const auto byw = ops::BitLinear::forward<float>({N, K, M}, {x, ws}).y;
    const auto iy = ops::Int8Linear::forward<float>({N, K, M}, {x, w, {}}).y;
    const auto iyx = ops::Int8Linear::forward<float>({N, K, M}, {xs, w, {}}).y;
    const auto iyw = ops::Int8Linear::forward<float>({N, K, M}, {x, ws, {}}).y;
    for (std::size_t i = 0; i < N * M; ++i) {
      EXPECT_TRUE(same_bits(y[i] * s, yx[i]) && same_bits(y[i] * s, yw[i])) << "linear, scale " << s << " cell " << i;
      EXPECT_TRUE(same_bits(by[i] * s, byx[i]) && same_bits(by[i] * s, byw[i])) << "bitlinear, scale " << s << " cell " << i;
      EXPECT_TRUE(same_bits(iy[i] * s, iyx[i]) && same_bits(iy[i] * s, iyw[i])) << "int8_linear, scale " << s << " cell " << i;
      ++checked;
    }
    // Attention is linear in V: the p·v chains scale exactly.
    const std::size_t B = 1, T = 70, H = 2, Dh = 8;
    const Tensor<float> q({B, T, H, Dh}, normal(B * T * H * Dh, 1.0)), k({B, T, H, Dh}, normal(B * T * H * Dh, 1.0));
    Tensor<float> v({B, T, H, Dh}, normal(B * T * H * Dh, 1.0));
    Tensor<float> vs = v;
    for (auto& e : vs.data) e *= s;
    const ops::Attention::Config ac{B, T, H, H, Dh, 0.0, 64};
    const auto o = ops::Attention::forward<float>(ac, {q, k, v}).o;
    const auto os = ops::Attention::forward<float>(ac, {q, k, vs}).o;
    std::size_t differ = 0;
    for (std::size_t i = 0; i < o.numel(); ++i) differ += !same_bits(o[i] * s, os[i]);
    EXPECT_EQ(differ, 0u) << "attention output not linear in V at scale " << s;
  }
  std::printf("%zu linear cells checked at %zu power-of-two scales\n", checked, std::size(scales));
}

TEST(Absolute, AtUnitScalesTheUnitsAreTheExactIntegerDotProduct) {
  lockstep::ad::Rng rng(lockstep::test::test_seed() ^ 0x701);
  const std::size_t N = 6, K = 131, M = 9;
  // Integer activations whose row absmax is 127: inv = 127/127 = 1, step 1.
  std::vector<float> x(N * K), w8(M * K), wt(M * K);
  for (std::size_t n = 0; n < N; ++n) {
    for (std::size_t k = 0; k < K; ++k) x[n * K + k] = static_cast<float>(static_cast<int>(rng.below(255)) - 127);
    x[n * K + rng.below(K)] = (n % 2 != 0) ? 127.0f : -127.0f;
  }
  for (std::size_t mi = 0; mi < M; ++mi) {
    for (std::size_t k = 0; k < K; ++k) {
      w8[mi * K + k] = static_cast<float>(static_cast<int>(rng.below(255)) - 127);
      wt[mi * K + k] = rng.below(2) != 0 ? 1.0f : -1.0f;  // all ±1: mean |w| = 1, the unit scale
    }
    w8[mi * K + rng.below(K)] = 127.0f;
  }
  const Tensor<float> tx({N, K}, x), t8({M, K}, w8), tt({M, K}, wt);
  const auto y8 = ops::Int8Linear::forward<float>({N, K, M}, {tx, t8, {}}).y;
  const auto yt = ops::BitLinear::forward<float>({N, K, M}, {tx, tt}).y;
  std::size_t bad8 = 0, badt = 0;
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t mi = 0; mi < M; ++mi) {
      std::int64_t d8 = 0, dt = 0;
      for (std::size_t k = 0; k < K; ++k) {
        d8 += static_cast<std::int64_t>(x[n * K + k]) * static_cast<std::int64_t>(w8[mi * K + k]);
        dt += static_cast<std::int64_t>(x[n * K + k]) * static_cast<std::int64_t>(wt[mi * K + k]);
      }
      bad8 += y8[n * M + mi] != static_cast<float>(d8);
      badt += yt[n * M + mi] != static_cast<float>(dt);
    }
  EXPECT_EQ(bad8, 0u) << "int8_linear at unit scales is not the integer dot product";
  EXPECT_EQ(badt, 0u) << "bitlinear at unit scales is not the integer dot product";
}

TEST(Absolute, SoftmaxRowsSumToOneWithinTheProvenBound) {
  lockstep::ad::Rng rng(lockstep::test::test_seed() ^ 0x801);
  for (const std::size_t C : {std::size_t{1}, std::size_t{7}, std::size_t{64}, std::size_t{257}, std::size_t{1000}}) {
    for (const double spread : {0.01, 3.0, 30.0}) {
      std::vector<float> x(4 * C);
      for (auto& v : x) v = static_cast<float>(spread * rng.normal());
      const auto y = ops::Softmax::forward<float>({4, C}, {Tensor<float>({4, C}, x)}).y;
      for (std::size_t r = 0; r < 4; ++r) {
        double s = 0.0;
        for (std::size_t j = 0; j < C; ++j) {
          const float v = y[r * C + j];
          ASSERT_TRUE(v >= 0.0f && v <= 1.0f) << "softmax value outside [0, 1]";
          s += static_cast<double>(v);
        }
        EXPECT_LE(std::fabs(s - 1.0), static_cast<double>(C + 1) * 0x1p-24) << "C " << C << " spread " << spread;
      }
    }
    // Equal inputs: each exactly 1/C when C is a power of two.
    if ((C & (C - 1)) == 0) {
      const auto y = ops::Softmax::forward<float>({1, C}, {Tensor<float>({1, C}, std::vector<float>(C, 0.7f))}).y;
      for (std::size_t j = 0; j < C; ++j) EXPECT_EQ(y[j], 1.0f / static_cast<float>(C));
    }
  }
}

TEST(Absolute, AttentionOneKeyIsTheValueIdenticalKeysAverageTheValues) {
  lockstep::ad::Rng rng(lockstep::test::test_seed() ^ 0x901);
  const std::size_t B = 2, T = 69, Hq = 4, Hkv = 2, Dh = 6;
  std::vector<float> q(B * T * Hq * Dh), k(B * T * Hkv * Dh), v(B * T * Hkv * Dh);
  for (auto& e : q) e = static_cast<float>(rng.normal());
  for (auto& e : v) e = static_cast<float>(rng.normal());
  // Every key of a (batch, kv head) the same vector: uniform probabilities.
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t h = 0; h < Hkv; ++h)
      for (std::size_t d = 0; d < Dh; ++d) {
        const float e = static_cast<float>(rng.normal());
        for (std::size_t t = 0; t < T; ++t) k[((b * T + t) * Hkv + h) * Dh + d] = e;
      }
  const ops::Attention::Config c{B, T, Hq, Hkv, Dh, 0.0, 64};
  const auto o = ops::Attention::forward<float>(c, {Tensor<float>({B, T, Hq, Dh}, q), Tensor<float>({B, T, Hkv, Dh}, k),
                                                    Tensor<float>({B, T, Hkv, Dh}, v)})
                     .o;
  double worst = 0.0;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t h = 0; h < Hq; ++h) {
        const std::size_t g = h / (Hq / Hkv);  // the kv head of query head h (HF's repeat_kv)
        for (std::size_t d = 0; d < Dh; ++d) {
          double mean = 0.0, mag = 0.0;
          for (std::size_t s = 0; s <= t; ++s) {
            const double e = v[((b * T + s) * Hkv + g) * Dh + d];
            mean += e;
            mag += std::fabs(e);
          }
          mean /= static_cast<double>(t + 1);
          const float got = o[((b * T + t) * Hq + h) * Dh + d];
          if (t == 0) {
            EXPECT_EQ(bits_of(got), bits_of(v[(b * T * Hkv + g) * Dh + d])) << "one key: o = v";
          }
          worst = std::max(worst, std::fabs(static_cast<double>(got) - mean) / (mag / static_cast<double>(t + 1) + 1e-30));
        }
      }
  // ~T roundings of 2^-24 on the chains and the normalizer.
  EXPECT_LE(worst, 256 * 0x1p-24) << "identical keys do not average the values over keys 0..t";
  std::printf("identical keys: worst relative distance from the mean of the values %.3g\n", worst);
}

TEST(Absolute, RopeAtPositionOneRotatesPairJByThetaToTheMinusTwoJOverD) {
  for (const auto layout : {ops::RopeLayout::rotate_half, ops::RopeLayout::interleaved})
    for (const double theta : {10000.0, 500000.0}) {
      const std::size_t Dh = 12, half = Dh / 2;
      // Two positions, one head; at position 1 each pair's first entry holds 1.
      Tensor<float> x({1, 2, 1, Dh});
      for (std::size_t j = 0; j < half; ++j) {
        const std::size_t a = layout == ops::RopeLayout::rotate_half ? j : 2 * j;
        x[Dh + a] = 1.0f;
      }
      const auto y = ops::Rope::forward<float>({1, 2, 1, Dh, theta, layout, 0}, {x}).y;
      for (std::size_t j = 0; j < half; ++j) {
        const std::size_t a = layout == ops::RopeLayout::rotate_half ? j : 2 * j;
        const std::size_t bidx = layout == ops::RopeLayout::rotate_half ? j + half : 2 * j + 1;
        const double angle = std::pow(theta, -2.0 * static_cast<double>(j) / static_cast<double>(Dh));
        // y_a = cos, y_b = sin (y_b = b·c + a·s with b = 0, a = 1).
        EXPECT_NEAR(y[Dh + a], std::cos(angle), 4e-7) << "theta " << theta << " pair " << j;
        EXPECT_NEAR(y[Dh + bidx], std::sin(angle), 4e-7) << "theta " << theta << " pair " << j;
      }
      // Position 0 is the identity (x there is 0): nothing leaks into it.
      for (std::size_t i = 0; i < Dh; ++i) EXPECT_EQ(bits_of(y[i]), 0u);
    }
}

TEST(Absolute, TheNormsHonourEps) {
  lockstep::ad::Rng rng(lockstep::test::test_seed() ^ 0xA01);
  const std::size_t N = 3, D = 40;
  std::vector<float> x(N * D);
  for (auto& v : x) v = static_cast<float>(rng.normal());
  for (std::size_t n = 0; n < N; ++n) {
    double ms = 0.0, mean = 0.0;
    for (std::size_t d = 0; d < D; ++d) {
      const double e = x[n * D + d];
      ms += e * e;
      mean += e;
    }
    ms /= D;
    mean /= D;
    double var = 0.0;
    for (std::size_t d = 0; d < D; ++d) var += (static_cast<double>(x[n * D + d]) - mean) * (static_cast<double>(x[n * D + d]) - mean);
    var /= D;
    // eps = the row's own mean square (variance): the output's mean square is 1/2.
    const Tensor<float> xr({1, D}, std::vector<float>(x.begin() + n * D, x.begin() + (n + 1) * D));
    const auto yr = ops::RmsNorm::forward<float>({1, D, ms}, {xr, Tensor<float>({D}, std::vector<float>(D, 1.0f))}).y;
    const auto yl = ops::LayerNorm::forward<float>(
                        {1, D, var}, {xr, Tensor<float>({D}, std::vector<float>(D, 1.0f)), Tensor<float>({D})})
                        .y;
    double yr2 = 0.0, yl2 = 0.0, ylm = 0.0;
    for (std::size_t d = 0; d < D; ++d) {
      const double a = yr[d], l = yl[d];
      yr2 += a * a;
      yl2 += l * l;
      ylm += l;
    }
    EXPECT_NEAR(yr2 / D, 0.5, 1e-5) << "rmsnorm row " << n << ": mean(y^2) = ms/(ms+eps)";
    EXPECT_NEAR(yl2 / D, 0.5, 1e-5) << "layernorm row " << n << ": mean(y^2) = var/(var+eps)";
    EXPECT_NEAR(ylm / D, 0.0, 1e-6) << "layernorm row " << n << ": mean(y) = 0";
  }
}

TEST(Absolute, ActivationsAreTheirPublishedFormulas) {
  // GELU (the tanh form, HF "gelu_new"), SiLU (SwiGLU's gate: silu(gate) * up)
  // and ReLU² (BitNet: relu(gate)^2 * up) in double from the formulas.
  std::vector<float> xs;
  for (int i = -80; i <= 80; ++i) xs.push_back(static_cast<float>(i) / 16.0f);
  const std::size_t n = xs.size();
  const Tensor<float> x({n}, xs), up({n}, std::vector<float>(n, 1.5f));
  const auto g = ops::Gelu::forward<float>({n}, {x}).y;
  const auto sw = ops::SwiGlu::forward<float>({n}, {x, up}).y;
  const auto r2 = ops::ReluSqMul::forward<float>({n}, {x, up}).y;
  for (std::size_t i = 0; i < n; ++i) {
    const double v = xs[i];
    const double gelu = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    const double silu = v / (1.0 + std::exp(-v)) * 1.5;
    const double relu2 = (v > 0 ? v * v : 0.0) * 1.5;
    // A few float roundings and lockstep's tanh/exp (<= 2 ulp): 2^-20 of max(1, |value|).
    EXPECT_NEAR(g[i], gelu, 0x1p-20 * std::max(1.0, std::fabs(gelu))) << "gelu(" << v << ")";
    EXPECT_NEAR(sw[i], silu, 0x1p-20 * std::max(1.0, std::fabs(silu))) << "silu(" << v << ")*1.5";
    EXPECT_NEAR(r2[i], relu2, 0x1p-20 * std::max(1.0, std::fabs(relu2))) << "relu(" << v << ")^2*1.5";
  }
}
