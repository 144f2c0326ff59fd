// ternary_expand.cu's kernels (the BitLinear weight operands made instead of
// kept: docs/LORA.md, "On the CUDA model: the base held as codes") on the host
// by the fiber emulator (cuda_host_emu.hpp), bit for bit against the CPU:
//   * ternary_requantize (the backward's Ŵ from F32 weights and the forward's
//     kept scale and inverse) = cpu::OpKernels' kept aux.b of run(BitLinear),
//     what the backward read before (the device's Ŵ is that by the gates);
//   * ternary2_expand of the TERNARY2 bytes hold_frozen_ternary_as_codes makes
//     from the same weights: the codes as floats = ops::quantize_ternary's
//     codes, code · scale = the same aux.b (so the codes path's GEMM operands
//     are the masters path's), and the scale written where asked;
// on sizes off the 256-thread CTA and the byte of four codes (1, 3, 5, 255,
// 256, 257, 1001, 4097), with -0, +0, NaN and large weights; and the planted
// bugs differ (the field of the next element read, the scale dropped from Ŵ,
// the re-quantized code rounded down). No GPU: this proves the kernels'
// logic; the device runs them in the start-up gates (bitlinear_bwd,
// bitlinear_codes_*) and test_cuda_lora's CudaLoraCodes.* (label gpu).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cuda_host_emu.hpp"
// ternary_expand.cu's own includes first, so that the hook below renames only its calls.
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/ternary_code.cuh"
#include "lockstep/backend/cuda/ternary_expand_launch.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"

#define check_launch(name) ((void)(name))
#include "lockstep/backend/cuda/ternary_expand.cu"  // (nvcc's #pragma unroll: -Wno-unknown-pragmas, CMakeLists)
#undef check_launch

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/ops/quant.hpp"
#include "lockstep/tensor/storage.hpp"

namespace ll = lockstep::cuda::launch;
namespace ops = lockstep::ops;
namespace tensor = lockstep::tensor;

namespace {

std::string hex(float v) {
  char b[48];
  std::snprintf(b, sizeof b, "%a (0x%08x)", static_cast<double>(v), [&] {
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    return u;
  }());
  return b;
}

// "" or the first cell whose bits differ, and how many differ.
std::string first_difference(const char* what, const std::vector<float>& want, const std::vector<float>& got,
                             std::size_t* differing = nullptr) {
  std::string first;
  std::size_t d = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(&want[i], &got[i], sizeof(float)) != 0) {
      if (first.empty())
        first = std::string(what) + "[" + std::to_string(i) + "]: cpu " + hex(want[i]) + ", emulated " + hex(got[i]);
      ++d;
    }
  if (differing) *differing = d;
  return first;
}

// One weight matrix [M, K] and what the CPU makes of it: run(BitLinear)'s kept
// Ŵ and scale (cpu::OpKernels), the quantizer's codes and their TERNARY2 bytes.
struct Weights {
  std::size_t M, K;
  std::vector<float> w, w_hat;
  float scale = 0;
  std::vector<std::int8_t> codes;
  std::vector<std::uint8_t> bytes;

  Weights(std::size_t m, std::size_t k, std::uint64_t seed) : M(m), K(k), w(m * k) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> n(0.0f, 0.05f);
    for (float& v : w) v = n(rng);
    // -0 and +0 (codes 0), a large weight (code ±1 whatever the scale), ties at w·inv + 1/2.
    w[0] = -0.0f;
    if (w.size() > 1) w[1] = 0.0f;
    if (w.size() > 2) w[2] = -3.0f;
    lockstep::cpu::OpKernels kernels;
    kernels.threads = 1;
    lockstep::cpu::OpKernels::Aux aux;
    const ops::QuantLinearConfig c{1, K, M};
    std::vector<float> x(K, 1.0f), y(M);
    kernels.forward<ops::BitLinear>(c, {.x = x.data(), .w = w.data(), .y = y.data()}, aux);
    w_hat = aux.b;
    scale = aux.s;
    const ops::TernaryCodes<float> q = ops::quantize_ternary(w.data(), w.size());
    codes = q.q;
    bytes = tensor::pack_ternary(codes);
    EXPECT_EQ(std::memcmp(&q.scale, &scale, 4), 0) << "the quantizer's scale is the kernel's";
  }

  std::vector<float> requantized() const {
    const float params[2] = {scale, 1.0f / scale};  // ternary_quantize's [m, 1 / m]
    std::vector<float> got(w.size(), std::numeric_limits<float>::quiet_NaN());
    ll::ternary_requantize(w.data(), w.size(), params, got.data());
    return got;
  }
  std::vector<float> expanded(bool times_scale, float* scale_out = nullptr) const {
    std::vector<float> got(w.size(), std::numeric_limits<float>::quiet_NaN());
    ll::ternary2_expand(bytes.data(), w.size(), scale, times_scale, got.data(), scale_out);
    return got;
  }
  std::vector<float> codes_as_floats() const { return std::vector<float>(codes.begin(), codes.end()); }
};

struct Shape {
  std::size_t M, K;
};
// n = 1, 3, 5 (a part-filled byte), 255, 256, 257 (CTA edges), 1001, 4097 (several CTAs, a sum of two chunks).
constexpr Shape kShapes[] = {{1, 1}, {1, 3}, {5, 1}, {5, 51}, {16, 16}, {1, 257}, {7, 143}, {17, 241}};

}  // namespace

TEST(TernaryExpandEmulated, RequantizeIsTheCpusKeptWHat) {
  std::uint64_t seed = 1;
  for (const Shape& s : kShapes) {
    const Weights wt(s.M, s.K, seed++);
    EXPECT_EQ(first_difference("w_hat", wt.w_hat, wt.requantized()), "") << s.M << " x " << s.K;
  }
}

TEST(TernaryExpandEmulated, ANanWeightRequantizesAsTheCpuDoes) {
  Weights wt(3, 37, 99);
  wt.w[5] = std::numeric_limits<float>::quiet_NaN();  // mean |W| is NaN: the scale is max2(NaN, 1e-5)
  lockstep::cpu::OpKernels k;
  lockstep::cpu::OpKernels::Aux aux;
  std::vector<float> x(37, 1.0f), y(3);
  k.forward<ops::BitLinear>({1, 37, 3}, {.x = x.data(), .w = wt.w.data(), .y = y.data()}, aux);
  wt.w_hat = aux.b;
  wt.scale = aux.s;
  EXPECT_EQ(first_difference("w_hat", wt.w_hat, wt.requantized()), "");
}

TEST(TernaryExpandEmulated, ExpandedCodesAreTheQuantizersAndTheirWHat) {
  std::uint64_t seed = 20;
  for (const Shape& s : kShapes) {
    const Weights wt(s.M, s.K, seed++);
    float scale_out = -1.0f;
    EXPECT_EQ(first_difference("codes", wt.codes_as_floats(), wt.expanded(false, &scale_out)), "")
        << s.M << " x " << s.K;
    EXPECT_EQ(std::memcmp(&scale_out, &wt.scale, 4), 0) << "the scale written for the epilogue";
    EXPECT_EQ(first_difference("w_hat", wt.w_hat, wt.expanded(true)), "") << s.M << " x " << s.K;
    // And what tensor::to_f32 makes of the held codes (code · scale, exact).
    EXPECT_EQ(first_difference("to_f32", tensor::to_f32(tensor::Storage::ternary({static_cast<std::int64_t>(s.M),
                                                                                    static_cast<std::int64_t>(s.K)},
                                                                                   wt.codes, wt.scale)),
                               wt.expanded(true)),
              "");
  }
}

TEST(TernaryExpandEmulated, PlantedBugsDiffer) {
  const Weights wt(7, 143, 5);
  std::size_t d = 0;
  ll::g_ternary_expand_plant = 1;
  EXPECT_NE(first_difference("codes", wt.codes_as_floats(), wt.expanded(false), &d), "");
  std::printf("planted: the next element's field read: %zu of %zu codes differ\n", d, wt.w.size());
  EXPECT_NE(first_difference("w_hat", wt.w_hat, wt.expanded(true)), "");
  ll::g_ternary_expand_plant = 2;
  EXPECT_NE(first_difference("w_hat", wt.w_hat, wt.expanded(true), &d), "");
  std::printf("planted: the scale dropped from the expanded W-hat: %zu cells differ\n", d);
  EXPECT_EQ(first_difference("codes", wt.codes_as_floats(), wt.expanded(false)), "") << "the codes need no scale";
  ll::g_ternary_expand_plant = 3;
  EXPECT_NE(first_difference("w_hat", wt.w_hat, wt.requantized(), &d), "");
  std::printf("planted: the re-quantized code rounded down: %zu cells differ\n", d);
  ll::g_ternary_expand_plant = 0;
  EXPECT_EQ(first_difference("w_hat", wt.w_hat, wt.requantized()), "");
  EXPECT_EQ(first_difference("w_hat", wt.w_hat, wt.expanded(true)), "");
}
