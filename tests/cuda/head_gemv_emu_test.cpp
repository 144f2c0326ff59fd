// head_gemv v2 (backend/cuda/head_gemv.cu: the LM head's staged-rows GEMV) on
// the host by the fiber emulator (cuda_host_emu.hpp), against ops::Linear's
// forward (ops::matmul_xwt, the sequential fma chain over k, + the bias) on
// the f16 weights widened exactly, bit for bit (NaN as the canonical NaN: the
// project's rule), for both forms (KT 64 with 4 stages, KT 128 with 3): the
// 2B4T head (K 2560, M 128256, 1 row), ragged M (a part-idle last CTA), K off
// the tile (a partial last tile, down to K 8), 1, 2, 4, 8, 17, 32 and 40 rows
// (every chunk template; 40: two chunks, the stages refilled), bias on and
// off, NaN / ±inf / −0 / subnormals in x and w; under shuffled thread orders.
// Shared memory starts as NaN (the emulator's), so a tile read before its
// copies shows. The planted bugs differ: the product rounded before the add
// (DecodeLinearMutant::chain_mul_add), each tile's 8-k groups backwards, no
// barrier before a tile is read, the stage of tile t - 1 refilled before the
// barrier (under shuffled orders). (The one-group-short wait cannot show here:
// the emulator's cp.async copies at issue; test_infer_decode_kernels_gpu
// plants it on the device.)
// No GPU: this proves the kernel's logic; the device's runs are
// test_infer_decode_kernels_gpu's (label gpu).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cuda_host_emu.hpp"
// head_gemv.cu's own includes first, so that the hook below renames only its calls.
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/head_gemv_launch.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/num/reduce.hpp"
#include "lockstep/ops/linear.hpp"
#include "lockstep/tensor/convert.hpp"

#define check_launch(name) ((void)(name))
#include "lockstep/backend/cuda/head_gemv.cu"  // (nvcc's #pragma unroll: -Wno-unknown-pragmas, CMakeLists)
#undef check_launch

namespace ll = lockstep::cuda::launch;
namespace ops = lockstep::ops;
namespace tensor = lockstep::tensor;
namespace num = lockstep::num;

namespace {

struct Shape {
  std::size_t N, K, M;
  bool bias = false;
};

std::string name_of(const Shape& s) {
  return "N " + std::to_string(s.N) + " K " + std::to_string(s.K) + " M " + std::to_string(s.M) +
         (s.bias ? " bias" : "");
}

std::string hex(float v) {
  char b[48];
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  std::snprintf(b, sizeof b, "%a (0x%08x)", static_cast<double>(v), u);
  return b;
}

// x, the f16 weights (and their exact f32 values), a bias, and the spec's y.
struct Case {
  Shape s;
  std::vector<float> x, wf, b, want;
  std::vector<std::uint16_t> w16;

  Case(const Shape& sp, std::uint64_t seed, bool specials = true) : s(sp) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> ux(-2.0f, 2.0f), uw(-1.0f, 1.0f);
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    x.resize(s.N * s.K);
    for (float& v : x) v = ux(rng);
    w16.resize(s.M * s.K);
    for (auto& h : w16) h = tensor::f32_to_f16(uw(rng));
    if (specials) {
      x[0] = -0.0f;
      if (s.K > 8) x[5] = -0.0f;
      if (s.N > 1) x[s.K + s.K / 2] = nan;  // row 1: every cell NaN
      if (s.N > 2) x[2 * s.K + 3] = inf;    // row 2: ±inf, NaN where a weight is 0 or inf of the other sign
      if (s.N > 3)
        for (std::size_t k = 0; k < s.K; ++k) x[3 * s.K + k] = k % 2 ? -0.0f : 0.0f;  // row 3: signed zeros only
      if (s.M > 1) w16[1 * s.K + s.K - 1] = 0x7c00u;                          // +inf at the last k
      if (s.M > 2) w16[2 * s.K + 0] = 0xfc00u;                                // −inf at the first k
      if (s.M > 3) w16[3 * s.K + s.K / 3] = 0x7e00u;                          // NaN
      if (s.M > 4)
        for (std::size_t k = 0; k < s.K; ++k) w16[4 * s.K + k] = k % 3 ? 0x8000u : 0x0000u;  // ±0 only
      if (s.M > 5)
        for (std::size_t k = 0; k < s.K; k += 2) w16[5 * s.K + k] = static_cast<std::uint16_t>(0x0001u + k % 1000);
      w16[(s.M - 1) * s.K + s.K / 2] = 0x83ffu;  // the last row: a negative subnormal
    }
    wf.resize(w16.size());
    for (std::size_t i = 0; i < w16.size(); ++i) wf[i] = tensor::f16_to_f32(w16[i]);
    b.resize(s.M);
    for (float& v : b) v = ux(rng);
    const ops::Linear::Config cfg{s.N, s.K, s.M, s.bias};
    ops::Linear::Inputs<float> in{lockstep::Tensor<float>({s.N, s.K}, x), lockstep::Tensor<float>({s.M, s.K}, wf),
                                  s.bias ? lockstep::Tensor<float>({s.M}, b) : lockstep::Tensor<float>()};
    want = ops::Linear::forward(cfg, in).y.data;
    for (float& v : want) v = num::reduce::canonical_nan(v);
  }

  // "" when the kernel's y is want's bits, else the first differing cell; *count: cells that differ.
  std::string run(const ll::HeadGemvOptions& o, std::size_t* count = nullptr) const {
    std::vector<float> y(s.N * s.M, 12345.0f);
    ll::head_gemv_v2(w16.data(), x.data(), s.bias ? b.data() : nullptr, s.N, s.M, s.K, y.data(), o);
    std::string first;
    std::size_t d = 0;
    for (std::size_t i = 0; i < y.size(); ++i)
      if (std::memcmp(&y[i], &want[i], 4) != 0) {
        if (first.empty())
          first = "n " + std::to_string(i / s.M) + " m " + std::to_string(i % s.M) + ": " + hex(y[i]) + " want " +
                  hex(want[i]);
        ++d;
      }
    if (count) *count = d;
    return first;
  }
};

ll::HeadGemvOptions form(bool wide) {
  ll::HeadGemvOptions o;
  o.wide = wide;
  return o;
}

}  // namespace

// The 2B4T head at batch 1 (1002 CTAs, 40 tiles of 64 k each; ~30 s on the emulator, so the default form
// only: the wide one runs the same shapes below).
TEST(HeadGemvV2Emulated, The2B4THeadAtBatch1) {
  const Case c(Shape{1, 2560, 128256}, 1);
  EXPECT_EQ(c.run(form(false)), "");
}

TEST(HeadGemvV2Emulated, EqualsTheLinearSpec) {
  const std::vector<Shape> shapes{
      {2, 2560, 1003},        {8, 2560, 257, true}, {17, 2560, 130},     {32, 2560, 129, true}, {1, 8, 5},
      {3, 72, 300, true},     {5, 2568, 200},       {40, 264, 131, true}, {4, 136, 128},        {16, 640, 255},
      {1, 2560, 1000, true},  {9, 120, 1},          {33, 192, 7},         {2, 2560, 128},
  };
  std::uint64_t seed = 10;
  for (const Shape& s : shapes) {
    const Case c(s, seed++);
    for (bool wide : {false, true}) EXPECT_EQ(c.run(form(wide)), "") << name_of(s) << ", wide " << wide;
  }
}

// The barriers are real: thread orders shuffled every round change nothing.
TEST(HeadGemvV2Emulated, ShuffledThreadOrders) {
  emu::cta.shuffle_order = true;
  std::uint64_t seed = 100;
  for (const Shape& s : {Shape{40, 264, 131, true}, Shape{8, 2560, 200}, Shape{1, 2568, 260, true},
                         Shape{3, 72, 129}}) {
    const Case c(s, seed++);
    for (int round = 0; round < 2; ++round)
      for (bool wide : {false, true})
        EXPECT_EQ(c.run(form(wide)), "") << name_of(s) << ", round " << round << ", wide " << wide;
  }
  emu::cta.shuffle_order = false;
}

TEST(HeadGemvV2Emulated, PlantedBugsDiffer) {
  const Case c(Shape{4, 2560, 300, true}, 7, false), chunks(Shape{40, 1032, 131}, 8, false);
  for (bool wide : {false, true}) {
    ll::HeadGemvOptions mul_add = form(wide), backwards = form(wide), no_barrier = form(wide),
                        refill = form(wide), early = form(wide);
    mul_add.mul_add = true;
    backwards.k_descending = true;
    no_barrier.plant_no_stage_barrier = true;
    refill.plant_refill_before_barrier = true;
    early.stage_early = true;
    std::size_t d = 0;
    EXPECT_NE(c.run(mul_add, &d), "") << "mul+add for fma, wide " << wide;
    std::printf("planted (wide %d): mul+add for fma: %zu cells differ (N 4 K 2560 M 300)\n", wide, d);
    EXPECT_NE(c.run(backwards, &d), "") << "8-k groups backwards, wide " << wide;
    std::printf("planted (wide %d): each tile's 8-k groups backwards: %zu cells differ\n", wide, d);
    EXPECT_NE(c.run(no_barrier, &d), "") << "no barrier before a tile is read, wide " << wide;
    std::printf("planted (wide %d): no barrier before a tile is read: %zu cells differ\n", wide, d);
    EXPECT_EQ(c.run(early), "") << "the early wait cannot show on the emulator (copies at issue)";
    emu::cta.shuffle_order = true;
    EXPECT_NE(chunks.run(refill, &d), "") << "the stage refilled before the barrier, wide " << wide;
    std::printf("planted (wide %d): tile t - 1's stage refilled before the barrier (shuffled): %zu cells differ "
                "(N 40 K 1032 M 131)\n",
                wide, d);
    EXPECT_EQ(chunks.run(form(wide)), "") << "the kernel as it is, shuffled";
    emu::cta.shuffle_order = false;
  }
}
