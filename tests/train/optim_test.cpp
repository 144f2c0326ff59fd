// AdamW, the schedule and clipping: agreement with the textbook formulas in
// double, thread-count invariance of the bits, refusal of bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "lockstep/ops/optim.hpp"
#include "lockstep/train/optim.hpp"

namespace t = lockstep::train;

namespace {

struct Tensor {
  std::vector<float> p, g, m, v;
  explicit Tensor(std::size_t n) : p(n), g(n), m(n), v(n) {}
  t::ParamSlot slot(const char* name, bool decay) { return {name, p, g, m, v, decay}; }
};

std::vector<Tensor> make(std::uint64_t seed, std::vector<std::size_t> sizes) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<Tensor> ts;
  for (auto n : sizes) {
    Tensor x(n);
    for (auto& e : x.p) e = nd(rng);
    ts.push_back(std::move(x));
  }
  return ts;
}

void fill_grads(std::vector<Tensor>& ts, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.1f);
  for (auto& x : ts)
    for (auto& e : x.g) e = nd(rng);
}

}  // namespace

TEST(AdamW, MatchesTheTextbookUpdateInDouble) {
  t::AdamWConfig cfg;
  cfg.lr = 1e-2;
  cfg.weight_decay = 0.1;
  auto ts = make(1, {1000});
  std::vector<double> p(ts[0].p.begin(), ts[0].p.end()), m(1000, 0.0), v(1000, 0.0);
  double worst = 0;
  for (int step = 1; step <= 20; ++step) {
    fill_grads(ts, 100 + static_cast<std::uint64_t>(step));
    std::vector<t::ParamSlot> slots = {ts[0].slot("w", true)};
    const auto sc = t::adamw_scalars(cfg, static_cast<float>(cfg.lr), step);
    t::adamw_step(slots, sc, 2);
    for (std::size_t i = 0; i < 1000; ++i) {
      const double g = ts[0].g[i];
      m[i] = cfg.beta1 * m[i] + (1 - cfg.beta1) * g;
      v[i] = cfg.beta2 * v[i] + (1 - cfg.beta2) * g * g;
      const double mhat = m[i] / (1 - std::pow(cfg.beta1, step));
      const double vhat = v[i] / (1 - std::pow(cfg.beta2, step));
      p[i] = p[i] * (1 - cfg.lr * cfg.weight_decay) - cfg.lr * mhat / (std::sqrt(vhat) + cfg.eps);
      worst = std::max(worst, std::fabs(p[i] - static_cast<double>(ts[0].p[i])) / (std::fabs(p[i]) + 1e-3));
    }
  }
  std::printf("adamw vs double textbook over 20 steps: max rel err %.3g\n", worst);
  EXPECT_LT(worst, 2e-5);
}

TEST(AdamW, WeightDecayOnlyWhereMarked) {
  auto ts = make(2, {8, 8});
  for (auto& x : ts) std::fill(x.g.begin(), x.g.end(), 0.0f);
  const auto before = ts;
  std::vector<t::ParamSlot> slots = {ts[0].slot("w", true), ts[1].slot("bias", false)};
  t::AdamWConfig cfg;
  cfg.lr = 0.1;
  t::adamw_step(slots, t::adamw_scalars(cfg, 0.1f, 1), 1);
  EXPECT_NE(ts[0].p, before[0].p);  // decayed (zero gradient, nonzero decay)
  EXPECT_EQ(ts[1].p, before[1].p);  // untouched: no gradient, no decay
}

TEST(AdamW, BitsDoNotDependOnThreadCount) {
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 5}) {
    auto ts = make(3, {100000, 7, 33333});
    t::AdamWConfig cfg;
    for (int step = 1; step <= 3; ++step) {
      fill_grads(ts, 7 + static_cast<std::uint64_t>(step));
      std::vector<t::ParamSlot> slots = {ts[0].slot("a", true), ts[1].slot("b", false), ts[2].slot("c", true)};
      t::clip_grad_norm(slots, 1.0f, threads);
      t::adamw_step(slots, t::adamw_scalars(cfg, 3e-4f, step), threads);
    }
    std::vector<float> all;
    for (auto& x : ts) all.insert(all.end(), x.p.begin(), x.p.end());
    results.push_back(all);
  }
  EXPECT_EQ(std::memcmp(results[0].data(), results[1].data(), results[0].size() * 4), 0);
  EXPECT_EQ(std::memcmp(results[0].data(), results[2].data(), results[0].size() * 4), 0);
}

TEST(Clip, NormMatchesDoubleAndClipsToMaxNorm) {
  auto ts = make(4, {5000, 300});
  fill_grads(ts, 9);
  double ref = 0;
  for (auto& x : ts)
    for (float g : x.g) ref += static_cast<double>(g) * static_cast<double>(g);
  ref = std::sqrt(ref);
  std::vector<t::ParamSlot> slots = {ts[0].slot("a", true), ts[1].slot("b", true)};
  const float norm = t::clip_grad_norm(slots, 1.0f, 2);
  EXPECT_NEAR(norm, ref, ref * 1e-6);
  ASSERT_GT(ref, 1.0);  // so clipping happened
  EXPECT_NEAR(static_cast<double>(t::global_grad_norm(slots, 1)), 1.0, 1e-5);
  // Below the threshold nothing changes.
  const auto g_before = ts[0].g;
  t::clip_grad_norm(slots, 10.0f, 2);
  EXPECT_EQ(ts[0].g, g_before);
}

TEST(Clip, RefusesNonFiniteGradientsNamingTheTensor) {
  auto ts = make(5, {10, 10});
  fill_grads(ts, 1);
  ts[1].g[3] = std::numeric_limits<float>::quiet_NaN();
  std::vector<t::ParamSlot> slots = {ts[0].slot("wte", true), ts[1].slot("h.0.ln_1.bias", false)};
  try {
    t::clip_grad_norm(slots, 1.0f, 1);
    FAIL() << "NaN gradient accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("h.0.ln_1.bias"), std::string::npos) << e.what();
  }
}

// The optimizer op's whole step (ops::reference_step, what the CUDA start-up
// gates compare the device kernels with) is the trainer's host sequence bit
// for bit: grads scaled by 1/accum, clip_grad_norm, adamw_step; with the clip
// active and inactive, accumulation 1 and 3, tensors across the 4096-chunk
// boundaries.
TEST(OptimOp, ReferenceStepIsTheTrainersSequence) {
  for (float max_norm : {0.0f, 0.5f, 1e4f})
    for (std::size_t accum : {std::size_t{1}, std::size_t{3}}) {
      auto host = make(11, {4096, 4097, 1, 8191, 300, 12289});
      fill_grads(host, 12);
      auto spec = host;
      const t::AdamWConfig cfg;
      const auto sc = t::adamw_scalars(cfg, 3e-4f, 2);
      // The trainer's sequence (trainer.cpp's host loop).
      std::vector<t::ParamSlot> slots;
      for (std::size_t i = 0; i < host.size(); ++i) slots.push_back(host[i].slot("w", i % 2 == 0));
      const float scale = lockstep::ops::accum_grad_scale(accum);
      for (auto& sl : slots)
        for (float& g : sl.grad) g = g * scale;
      const float norm = t::clip_grad_norm(slots, max_norm, 3);
      t::adamw_step(slots, sc, 3);
      // The op's reference.
      std::vector<lockstep::ops::OptimTensor> table;
      for (std::size_t i = 0; i < spec.size(); ++i)
        table.push_back({spec[i].p.data(), spec[i].g.data(), spec[i].m.data(), spec[i].v.data(), spec[i].p.size(),
                         i % 2 == 0});
      const std::vector<float> losses(accum, 2.5f);
      const auto d = lockstep::ops::reference_step(table, losses.data(), accum, scale, max_norm, sc);
      ASSERT_TRUE(d.update);
      EXPECT_EQ(std::memcmp(&d.norm, &norm, 4), 0) << d.norm << " vs " << norm;
      EXPECT_EQ(d.clip < 1.0f, max_norm == 0.5f) << "max_norm " << max_norm;
      for (std::size_t i = 0; i < host.size(); ++i) {
        for (auto [a, b] : {std::pair{&host[i].p, &spec[i].p}, {&host[i].g, &spec[i].g}, {&host[i].m, &spec[i].m},
                            {&host[i].v, &spec[i].v}})
          EXPECT_EQ(std::memcmp(a->data(), b->data(), a->size() * 4), 0)
              << "tensor " << i << ", max_norm " << max_norm << ", accum " << accum;
      }
    }
}

// A non-finite gradient or loss updates nothing (the step is refused).
TEST(OptimOp, ANonFiniteLossOrNormUpdatesNothing) {
  for (int which = 0; which < 2; ++which) {
    auto ts = make(13, {100, 5000});
    fill_grads(ts, 14);
    if (which == 1) ts[1].g[4321] = std::numeric_limits<float>::infinity();
    const auto before = ts;
    std::vector<lockstep::ops::OptimTensor> table;
    for (auto& x : ts) table.push_back({x.p.data(), x.g.data(), x.m.data(), x.v.data(), x.p.size(), true});
    const float loss = which == 0 ? std::numeric_limits<float>::quiet_NaN() : 1.0f;
    const auto d = lockstep::ops::reference_step(table, &loss, 1, 1.0f, 1.0f, t::adamw_scalars({}, 1e-3f, 1));
    EXPECT_FALSE(d.update);
    for (std::size_t i = 0; i < ts.size(); ++i) {
      EXPECT_EQ(ts[i].p, before[i].p);
      EXPECT_EQ(ts[i].m, before[i].m);
    }
  }
}

TEST(Schedule, WarmupThenCosineToTheFloor) {
  t::AdamWConfig opt;
  opt.lr = 1e-3;
  t::ScheduleConfig s{10, 110, 0.1};
  EXPECT_FLOAT_EQ(t::learning_rate(opt, s, 0), 1e-4f);
  EXPECT_FLOAT_EQ(t::learning_rate(opt, s, 4), 5e-4f);
  EXPECT_NEAR(t::learning_rate(opt, s, 10), 1e-3, 1e-9);
  EXPECT_NEAR(t::learning_rate(opt, s, 60), 0.55e-3, 1e-8);  // halfway: mid between peak and floor
  EXPECT_NEAR(t::learning_rate(opt, s, 110), 1e-4, 1e-9);
  EXPECT_NEAR(t::learning_rate(opt, s, 500), 1e-4, 1e-9);     // clamped after the end
  for (int i = 11; i <= 110; ++i) EXPECT_LE(t::learning_rate(opt, s, i), t::learning_rate(opt, s, i - 1)) << i;
}

TEST(Config, BadValuesNameTheFlag) {
  auto msg = [](auto f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  t::AdamWConfig a;
  a.lr = -1;
  EXPECT_NE(msg([&] { a.validate(); }).find("--lr"), std::string::npos);
  a = {};
  a.beta2 = 1.0;
  EXPECT_NE(msg([&] { a.validate(); }).find("--beta2"), std::string::npos);
  a = {};
  a.eps = std::nan("");
  EXPECT_NE(msg([&] { a.validate(); }).find("--eps"), std::string::npos);
  t::ScheduleConfig s{20, 10, 0.1};
  EXPECT_NE(msg([&] { s.validate(); }).find("--warmup"), std::string::npos);
}
