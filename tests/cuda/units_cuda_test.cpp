// The int8 units on the CUDA model (issue 11, "Bits"): the loss, gradient and
// logit bits of the CPU model in every units mode, and a units training run on
// the GPU ending on the CPU run's pinned weight hash
// (tests/train/units_runs.hpp; the CPU side: test_units_golden). Until branch
// units-cuda's device kernels land, the CUDA kernel set runs the unit linear
// through the host (backend/cuda/ops_units.cpp): these tests then prove the
// model's plumbing on the device; with the device kernels, the kernels too.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "lockstep/model/model.hpp"
#include "lockstep/num/hash.hpp"

#include "../common/tokens.hpp"
#include "../train/units_runs.hpp"

using namespace lockstep;
using namespace lockstep::test::units;

namespace {

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

class UnitsOnCuda : public ::testing::TestWithParam<Mode> {};

TEST_P(UnitsOnCuda, LossGradientsAndLogitsAreTheCpuModelsBits) {
  const Mode& m = GetParam();
  model::ModelConfig cfg = model::preset(m.preset);
  cfg.linear = model::LinearMode::Units;
  cfg.unit_backward = m.unit_backward;
  cfg.units_head = m.units_head;
  auto cpu = model::make_cpu_model(cfg);
  auto gpu = model::make_cuda_model(cfg);
  cpu->init(3);
  gpu->init(3);
  const std::int64_t B = 3, T = 37;  // ragged on purpose
  auto in = test::tokens(B * T, cfg.vocab_size, 1), tg = test::tokens(B * T, cfg.vocab_size, 2);
  tg[5] = -1;
  const float lc = cpu->forward_backward(in, tg, B, T, false, 2);
  const float lg = gpu->forward_backward(in, tg, B, T, false, 1);
  EXPECT_EQ(bits(lc), bits(lg)) << label(m) << ": loss " << lc << " vs " << lg;
  std::size_t differ = 0, cells = 0;
  for (std::size_t i = 0; i < cpu->params().size(); ++i) {
    const auto& a = cpu->params()[i].grad;
    const auto& b = gpu->params()[i].grad;
    ASSERT_EQ(a.size(), b.size());
    cells += a.size();
    for (std::size_t e = 0; e < a.size(); ++e) differ += bits(a[e]) != bits(b[e]);
  }
  const auto xc = cpu->next_logits(std::span<const std::int32_t>(in.data(), 20), 2);
  const auto xg = gpu->next_logits(std::span<const std::int32_t>(in.data(), 20), 1);
  std::size_t logit_differ = 0;
  for (std::size_t e = 0; e < xc.size(); ++e) logit_differ += bits(xc[e]) != bits(xg[e]);
  std::printf("%s: loss %.9g cpu / %.9g cuda; %zu of %zu gradient cells differ; %zu logits differ\n",
              label(m).c_str(), static_cast<double>(lc), static_cast<double>(lg), differ, cells, logit_differ);
  EXPECT_EQ(differ, 0u);
  EXPECT_EQ(logit_differ, 0u);
}

TEST_P(UnitsOnCuda, TheGpuRunEndsOnThePinnedCpuHash) {
  const Mode& m = GetParam();
  const std::string got = num::hash_hex(run_hash(m, 1, "cuda"));
  std::printf("%s, 24 steps on the GPU: weights %s (CPU, pinned: %s)\n", label(m).c_str(), got.c_str(), m.hash);
  EXPECT_EQ(got, m.hash);
}

INSTANTIATE_TEST_SUITE_P(Micro, UnitsOnCuda, ::testing::ValuesIn(pinned_modes()),
                         [](const auto& param_info) { return test_name(param_info.param); });

}  // namespace
