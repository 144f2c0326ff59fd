// ReLU²·up + the FFN sub-norm + its activation codes in one kernel
// (backend/cuda/act_norm.cu) on the host by the fiber emulator
// (cuda_host_emu.hpp), against the CPU spec bit for bit: ops::ReluSqMul::forward,
// then ops::RmsNorm::forward of its h and ops::quantize_rows of that y (the
// decode's FFN before down_proj; what relu2mul_fwd then rmsnorm_quantize_i8
// compute on the device). h, y, rstd, the codes and the steps; 1 to 32 rows,
// the 2B4T FFN width 6912 and 2560, 8192 (the kernel's widest), widths off
// the 16-byte loads (the scalar path) and past one 4096-element chunk, gates
// misaligned; negative, −0 and +0 gates (h = ±0 by up's sign), a row whose
// gates are all <= 0 (h all zeros: the floor step); under shuffled thread
// orders; and its planted bug (the gate not clamped at 0) differs.
// No GPU: this proves the kernel's logic; the device's runs are
// test_infer_decode_kernels_gpu's (label gpu).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_host_emu.hpp"
// act_norm.cu's own includes first, so that the hook below renames only its calls.
#include "lockstep/backend/cuda/act_norm_launch.hpp"
#include "lockstep/backend/cuda/batched_copy.cuh"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/row_cta.cuh"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/ops/activation.hpp"
#include "lockstep/ops/norm.hpp"
#include "lockstep/ops/quant.hpp"

#define check_launch(name) ((void)(name))
#include "lockstep/backend/cuda/act_norm.cu"  // (nvcc's #pragma unroll: -Wno-unknown-pragmas, CMakeLists)
#undef check_launch

namespace ll = lockstep::cuda::launch;
namespace ops = lockstep::ops;

namespace {

struct Shape {
  std::size_t rows, dim;
  std::size_t offset = 0;  // floats: gate, up, h off 16-byte alignment (the scalar path)
};

std::string name_of(const Shape& s) {
  return "rows " + std::to_string(s.rows) + " dim " + std::to_string(s.dim) +
         (s.offset ? " off by " + std::to_string(s.offset) : "");
}

std::string hex(float v) {
  char b[32];
  std::snprintf(b, sizeof b, "%a", static_cast<double>(v));
  return b;
}

template <class V>
std::size_t differing(const V* want, const V* got, std::size_t n, const char* what, std::string& first) {
  std::size_t d = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (std::memcmp(&want[i], &got[i], sizeof(V)) != 0) {
      if (first.empty()) {
        if constexpr (sizeof(V) == 4)
          first = std::string(what) + "[" + std::to_string(i) + "]: spec " + hex(want[i]) + ", emulated " + hex(got[i]);
        else
          first = std::string(what) + "[" + std::to_string(i) + "]: spec " + std::to_string(want[i]) + ", emulated " +
                  std::to_string(got[i]);
      }
      ++d;
    }
  return d;
}

struct Case {
  Shape s;
  std::vector<float> gate, up, w;  // gate and up with s.offset floats in front
  std::vector<float> h, y, rstd, step;
  std::vector<std::int8_t> codes;

  Case(const Shape& sp, std::uint64_t seed) : s(sp) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> g(0.0f, 2.0f), u(0.0f, 1.5f);
    std::uniform_real_distribution<float> uw(0.5f, 1.5f);
    const std::size_t n = s.rows * s.dim;
    gate.assign(s.offset, 0.0f);
    up.assign(s.offset, 0.0f);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t j = i % 11;
      gate.push_back(j == 0 ? -0.0f : j == 1 ? 0.0f : g(rng));
      up.push_back(j == 2 ? -0.0f : u(rng));
    }
    if (s.rows > 1)  // row 1: every gate <= 0, so h is ±0 (the sign of up) and the row's max the floor
      for (std::size_t k = 0; k < s.dim; ++k) gate[s.offset + s.dim + k] = -std::fabs(gate[s.offset + s.dim + k]);
    for (std::size_t k = 0; k < s.dim; ++k) w.push_back(uw(rng));
    // The spec: h, then the norm of h, then the codes of y.
    const ops::ElementwiseConfig ec{n};
    const lockstep::Tensor<float> tg({n}, std::vector<float>(gate.begin() + static_cast<long>(s.offset), gate.end()));
    const lockstep::Tensor<float> tu({n}, std::vector<float>(up.begin() + static_cast<long>(s.offset), up.end()));
    h = ops::ReluSqMul::forward(ec, ops::ReluSqMul::Inputs<float>{tg, tu}).y.data;
    const ops::NormConfig nc{s.rows, s.dim, 1e-5};
    const auto o = ops::RmsNorm::forward(
        nc, ops::RmsNorm::Inputs<float>{lockstep::Tensor<float>({s.rows, s.dim}, h), lockstep::Tensor<float>({s.dim}, w)});
    y = o.y.data;
    rstd = o.rstd.data;
    const ops::RowCodes<float> r =
        ops::quantize_rows(y.data(), s.rows, s.dim, static_cast<float>(ops::BitLinear::kActFloor));
    codes = r.q;
    step = r.step;
  }

  // The first differing value (or ""), and how many differ.
  std::string run(const ll::ActNormOptions& options, std::size_t* count = nullptr) const {
    const std::size_t n = s.rows * s.dim;
    std::vector<float> gh(s.offset + n, -7.0f), gy(n, -7.0f), grstd(s.rows, -7.0f), gstep(s.rows, -7.0f);
    std::vector<std::int8_t> gcodes(n, 99);
    ll::relu2mul_rmsnorm_quantize_i8(s.rows, s.dim, static_cast<float>(1e-5), gate.data() + s.offset,
                                     up.data() + s.offset, gh.data() + s.offset, w.data(), gy.data(), grstd.data(),
                                     static_cast<float>(ops::BitLinear::kActFloor), gcodes.data(), gstep.data(),
                                     options);
    std::string first;
    std::size_t d = differing(h.data(), gh.data() + s.offset, n, "h", first);
    d += differing(y.data(), gy.data(), n, "y", first);
    d += differing(rstd.data(), grstd.data(), s.rows, "rstd", first);
    d += differing(codes.data(), gcodes.data(), n, "codes", first);
    d += differing(step.data(), gstep.data(), s.rows, "step", first);
    if (count) *count = d;
    return first;
  }
};

std::vector<Shape> shapes() {
  return {{1, 6912}, {1, 2560}, {3, 6912},  {8, 2560}, {32, 6912}, {2, 8192}, {4, 6913},
          {3, 1},    {5, 7},    {2, 4097},  {3, 4100}, {2, 6912, 1}, {9, 2560, 3}};
}

}  // namespace

// Every shape in round-robin thread order, and some of them again with the
// order shuffled every round (the barrier after the staging is real).
TEST(ActNormEmulated, EqualsReluSqMulThenTheNormAndTheCodes) {
  const std::vector<Shape> all = shapes();
  for (bool shuffled : {false, true}) {
    emu::cta.shuffle_order = shuffled;
    for (std::size_t i = 0; i < all.size(); i += shuffled ? 4 : 1)
      EXPECT_EQ(Case(all[i], 1 + i).run({}), "") << name_of(all[i]) << (shuffled ? ", shuffled" : "");
  }
  emu::cta.shuffle_order = false;
}

TEST(ActNormEmulated, PlantedBugDiffers) {
  ll::ActNormOptions unclamped;
  unclamped.gate_unclamped = true;
  const Case c(Shape{3, 6912}, 7);
  std::size_t d = 0;
  EXPECT_NE(c.run(unclamped, &d), "") << "the gate not clamped at 0";
  std::printf("planted: ReLU² without the clamp at 0: %zu values differ (rows 3 dim 6912)\n", d);
  EXPECT_EQ(c.run({}), "") << "the kernel as it is";
}

TEST(ActNormEmulated, RefusesShapesOutsideTheFusedRange) {
  EXPECT_FALSE(ll::act_norm_fused(33, 6912));
  EXPECT_FALSE(ll::act_norm_fused(1, 8193));
  EXPECT_FALSE(ll::act_norm_fused(0, 6912));
  EXPECT_TRUE(ll::act_norm_fused(32, 8192));
  std::vector<float> v(33 * 4);
  std::vector<std::int8_t> q(33 * 4);
  EXPECT_THROW(ll::relu2mul_rmsnorm_quantize_i8(33, 4, 1e-5f, v.data(), v.data(), v.data(), v.data(), v.data(),
                                                v.data(), 1e-5f, q.data(), v.data()),
               std::invalid_argument);
}
