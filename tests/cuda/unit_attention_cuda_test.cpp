// Attention through int8 units on the GPU (backend/cuda/unit_attention.cu,
// ops_unit_attention.cpp) against the CPU kernels, bit for bit: the gate
// cases (clean and dirty-buffer passes), the gate's teeth (the
// unit_attention_weights_round_down mutant is refused), the GPT-2 124M shape
// timed against the float attention, the CUDA model's loss and gradients in
// --attention units equal to the CPU model's, and the micro training runs
// ending on the CPU's pinned hashes (tests/train/unit_attention_runs.hpp).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/ops.hpp"
#include "lockstep/backend/cuda/probe.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/num/hash.hpp"

#include "../common/tokens.hpp"
#include "../train/unit_attention_runs.hpp"

namespace lc = lockstep::cuda;
namespace ops = lockstep::ops;
using namespace lockstep;
using namespace lockstep::test::unit_attention;

namespace {

bool have_device() {
  std::string why;
  if (lc::available(&why)) return true;
  std::printf("no CUDA device: %s\n", why.c_str());
  return false;
}
std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace

TEST(CudaUnitAttention, GatesPassBitForBit) {
  if (!have_device()) GTEST_SKIP();
  lc::gate::Options opt;
  opt.seed = 7;
  opt.dirty_pass = true;
  const auto cases = lc::gate::cases_of({"unit_attention"});
  ASSERT_GT(cases.size(), 20u);
  const auto outcomes = lc::gate::run_gates(cases, opt);
  int fails = 0;
  for (const auto& o : outcomes)
    if (!o.difference.empty() && fails++ < 25)
      std::printf("FAIL %s%s on %s: %s\n", o.kernel.c_str(), o.poisoned ? " (dirty)" : "", o.shape.c_str(),
                  o.difference.c_str());
  std::printf("unit attention gates: %zu cases, %zu runs, %d failed\n", cases.size(), outcomes.size(), fails);
  EXPECT_EQ(outcomes.size(), 2 * cases.size());
  EXPECT_EQ(fails, 0);
}

TEST(CudaUnitAttention, WeightsRoundDownMutantIsRefused) {
  if (!have_device()) GTEST_SKIP();
  lc::gate::Options opt;
  opt.seed = 11;
  opt.dirty_pass = false;
  lc::set_mutant(lc::Mutant::unit_attention_weights_round_down);
  const auto outcomes = lc::gate::run_gates(lc::gate::cases_of({"unit_attention"}), opt);
  lc::set_mutant(lc::Mutant::none);
  int refused = 0, fwd = 0;
  std::string first;
  for (const auto& o : outcomes) {
    if (o.kernel == "unit_attention_fwd") ++fwd;
    if (!o.difference.empty()) {
      if (first.empty()) first = o.kernel + " on " + o.shape + ": " + o.difference;
      ++refused;
    }
  }
  std::printf("mutant '%s': %d of %zu gate runs refuse it (%d forward runs); first: %s\n",
              std::string(lc::mutant_name(lc::Mutant::unit_attention_weights_round_down)).c_str(), refused,
              outcomes.size(), fwd, first.c_str());
  EXPECT_GT(refused, fwd / 2);
}

// GPT-2 124M's attention (B 16, T 1024, 12 heads of 64, fused q|k|v): the
// unit attention's forward timed against the float attention's, every output
// cell compared with the CPU kernel.
TEST(CudaUnitAttention, Gpt2ShapeTimedAndBitIdentical) {
  if (!have_device()) GTEST_SKIP();
  const std::size_t B = 16, T = 1024, H = 12, Dh = 64, D = H * Dh, ld = 3 * D, N = B * T;
  const ops::UnitAttention::Config c = ops::UnitAttention::of({B, T, H, H, Dh, 0.0, 64});
  std::vector<float> qkv(N * ld);
  std::mt19937 gen(5);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  for (float& x : qkv) x = nd(gen);
  std::vector<float> o(N * D), lse(B * H * T);
  lc::DeviceBuffer<float> dqkv, d_o, d_lse;
  dqkv.upload(qkv);
  d_o.resize(N * D);
  d_lse.resize(B * H * T);
  lc::OpKernels gk;
  const ops::Attention::FwdArgs<float> da{.q = dqkv.data(), .ldq = ld, .k = dqkv.data() + D, .v = dqkv.data() + 2 * D,
                                          .ldkv = ld, .o = d_o.data(), .lse = d_lse.data()};
  auto time_ms = [&](auto&& f) {
    f();
    lc::synchronize("warm");
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventRecord(a);
    for (int r = 0; r < 5; ++r) f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    return ms / 5;
  };
  const float unit_ms = time_ms([&] { gk.forward<ops::UnitAttention>(c, da); });
  const float float_ms = time_ms([&] { gk.forward<ops::Attention>(c, da); });
  gk.forward<ops::UnitAttention>(c, da);
  const std::vector<float> go = d_o.download(), glse = d_lse.download();
  lockstep::cpu::OpKernels ck;
  ck.threads = static_cast<int>(std::thread::hardware_concurrency());
  ck.forward<ops::UnitAttention>(c, {.q = qkv.data(), .ldq = ld, .k = qkv.data() + D, .v = qkv.data() + 2 * D,
                                     .ldkv = ld, .o = o.data(), .lse = lse.data()});
  std::size_t differ = 0;
  for (std::size_t e = 0; e < o.size(); ++e) differ += bits(o[e]) != bits(go[e]);
  for (std::size_t e = 0; e < lse.size(); ++e) differ += bits(lse[e]) != bits(glse[e]);
  std::printf("GPT-2 124M attention forward: units %.2f ms, float %.2f ms; %zu of %zu cells differ from the CPU\n",
              static_cast<double>(unit_ms), static_cast<double>(float_ms), differ, o.size() + lse.size());
  EXPECT_EQ(differ, 0u);
}

TEST(CudaUnitAttention, ModelLossAndGradientsAreTheCpuModelsBits) {
  if (!have_device()) GTEST_SKIP();
  for (const char* preset : {"gpt2-micro", "llama-micro"}) {
    model::ModelConfig cfg = model::preset(preset);
    cfg.attention = model::AttentionMode::Units;
    auto cpu = model::make_cpu_model(cfg);
    auto gpu = model::make_cuda_model(cfg);
    cpu->init(3);
    gpu->init(3);
    const std::int64_t B = 3, T = 37;
    auto in = test::tokens(B * T, cfg.vocab_size, 1), tg = test::tokens(B * T, cfg.vocab_size, 2);
    const float lcpu = cpu->forward_backward(in, tg, B, T, false, 2);
    const float lgpu = gpu->forward_backward(in, tg, B, T, false, 1);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < cpu->params().size(); ++i) {
      const auto& a = cpu->params()[i].grad;
      const auto& b = gpu->params()[i].grad;
      ASSERT_EQ(a.size(), b.size());
      for (std::size_t e = 0; e < a.size(); ++e) differ += bits(a[e]) != bits(b[e]);
    }
    std::printf("%s --attention units: loss %.9g cpu / %.9g cuda; %zu gradient cells differ\n", preset,
                static_cast<double>(lcpu), static_cast<double>(lgpu), differ);
    EXPECT_EQ(bits(lcpu), bits(lgpu)) << preset;
    EXPECT_EQ(differ, 0u) << preset;
  }
}

class UnitAttentionOnCuda : public ::testing::TestWithParam<AttnMode> {};

TEST_P(UnitAttentionOnCuda, TheGpuRunEndsOnThePinnedCpuHash) {
  if (!have_device()) GTEST_SKIP();
  const AttnMode& m = GetParam();
  const std::string got = num::hash_hex(run_hash(m, 1, "cuda"));
  std::printf("%s, 24 steps on the GPU: weights %s (CPU, pinned: %s)\n", label(m).c_str(), got.c_str(), m.hash);
  EXPECT_EQ(got, m.hash);
}

INSTANTIATE_TEST_SUITE_P(Micro, UnitAttentionOnCuda, ::testing::ValuesIn(pinned_modes()),
                         [](const auto& param_info) { return test_name(param_info.param); });
