// ternary_gemv v2 (backend/cuda/ternary_gemv_v2.cu) on the host by the fiber
// emulator (cuda_host_emu.hpp), against ops::BitLinear::forward (the spec) bit
// for bit: K on and off the 64-code units and the 16-byte staging (1 .. 10000:
// past the prefetched units), 1 to 40 batch rows (every chunk template, and
// 2-3 chunks: the staged buffer reused), CTAs with idle warps and part-idle
// warps, joined parts, misaligned activation codes (the scalar staging), −0
// in x; under shuffled thread orders; and its planted bugs (the last unit
// dropped, the half-warp join, no barrier before a chunk restages x) differ.
// And the residual epilogue (ternary_epilogue.cuh, TernaryPart::sum: the
// decode's o_proj / down_proj + residual in one launch) against
// ops::BitLinear::forward then ops::ResidualAdd::forward, both operand
// orders, in place and over y, with −0 and zero rows; its planted bug (the
// last product and the add contracted into one fma) differs.
// And the norm in the prologue (TernaryV2Options::norm, the session-11
// LOCKSTEP_DECODE_NORM_GEMV path): the cells (and residual sums) against
// ops::RmsNorm::forward, ops::quantize_rows and ops::BitLinear::forward of the
// norm's y (+ ops::ResidualAdd), CTA 0's y, rstd, codes and step against the
// spec's norm and codes; K 2560, 6912, 8192 and ragged, 1-2 rows, joined
// parts, the scalar path, −0 / large / overflowing / tiny / zero rows;
// shuffled; its planted bug (the codes of x, not of y) differs.
// No GPU: this proves the kernel's logic; the device's runs are
// test_infer_decode_kernels_gpu's (label gpu).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_host_emu.hpp"
// ternary_gemv_v2.cu's own includes first, so that the hook below renames only its calls.
#include "lockstep/backend/cuda/decode_linear_launch.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/row_cta.cuh"
#include "lockstep/backend/cuda/ternary_word.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/ops/activation.hpp"
#include "lockstep/ops/norm.hpp"
#include "lockstep/ops/quant.hpp"

#define check_launch(name) ((void)(name))
#include "lockstep/backend/cuda/ternary_gemv_v2.cu"  // (nvcc's #pragma unroll: -Wno-unknown-pragmas, CMakeLists)
#undef check_launch

namespace ll = lockstep::cuda::launch;
namespace ops = lockstep::ops;

namespace {

struct Shape {
  std::size_t N, K;
  std::vector<std::size_t> Ms;  // one part, or several joined
  std::size_t x_offset = 0;     // bytes: 1 takes the scalar staging at K % 16 == 0
};

std::string name_of(const Shape& s) {
  std::string name = "N " + std::to_string(s.N) + " K " + std::to_string(s.K) + " M";
  for (std::size_t M : s.Ms) name.append(" ").append(std::to_string(M));
  if (s.x_offset) name.append(" x off by ").append(std::to_string(s.x_offset));
  return name;
}

std::string hex(float v) {
  char b[32];
  std::snprintf(b, sizeof b, "%a", static_cast<double>(v));
  return b;
}

// The weights' ternary codes qw [M, K] packed as ternary_pack does (ternary_word.hpp).
template <class Q>
std::vector<std::uint32_t> packed(const Q* qw, std::size_t M, std::size_t K) {
  const std::size_t U = ll::ternary_units(K);
  std::vector<std::uint32_t> wd(M * 4 * U);
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t g = 0; g < 4 * U; ++g) {
      const std::size_t k0 = 16 * g;
      const int n = k0 >= K ? 0 : static_cast<int>(K - k0 < 16 ? K - k0 : 16);
      wd[m * 4 * U + g] = lockstep::cuda::ternary_word(qw + m * K + (n > 0 ? k0 : 0), n);
    }
  return wd;
}

// One BitLinear input x and each part's weights, with the spec's y and the
// codes the device path reads (ops::quantize_rows's codes and steps; the
// weights' ternary codes packed as ternary_pack does, ternary_word.hpp).
struct Case {
  Shape s;
  std::vector<float> x, step;
  std::vector<std::int8_t> xq_storage;  // [x_offset + N·K]
  std::vector<std::vector<std::uint32_t>> words;
  std::vector<std::vector<float>> scale, want;

  explicit Case(const Shape& sp, std::uint64_t seed) : s(sp) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> ux(-3.0f, 3.0f), uw(-0.1f, 0.1f);
    x.resize(s.N * s.K);
    for (float& v : x) v = ux(rng);
    x[0] = -0.0f;
    if (s.N > 2)  // an all-zero row (codes 0: its cells are +0) with −0 among its zeros
      for (std::size_t k = 0; k < s.K; ++k) x[2 * s.K + k] = k % 3 == 0 ? -0.0f : 0.0f;
    for (std::size_t M : s.Ms) {
      std::vector<float> w(M * s.K);
      for (float& v : w) v = uw(rng);
      const ops::QuantLinearConfig c{s.N, s.K, M};
      const ops::BitLinear::Inputs<float> in{lockstep::Tensor<float>({s.N, s.K}, x),
                                             lockstep::Tensor<float>({M, s.K}, w)};
      const auto z = ops::BitLinear::quantize(c, in);
      if (xq_storage.empty()) {
        xq_storage.assign(s.x_offset, 0);
        xq_storage.insert(xq_storage.end(), z.x.q.begin(), z.x.q.end());
        step = z.x.step;
      }
      words.push_back(packed(z.qw.data(), M, s.K));
      scale.push_back({z.wstep[0]});
      want.push_back(ops::BitLinear::forward(c, in).y.data);
    }
  }

  // The first differing cell (or ""), and how many differ.
  std::string run(const ll::TernaryV2Options& options, std::size_t* differing = nullptr) const {
    std::vector<std::vector<float>> got;
    std::vector<ll::TernaryPart> parts;
    for (std::size_t p = 0; p < s.Ms.size(); ++p) got.emplace_back(s.N * s.Ms[p], -7.0f);
    for (std::size_t p = 0; p < s.Ms.size(); ++p)
      parts.push_back({words[p].data(), s.Ms[p], scale[p].data(), got[p].data()});
    ll::ternary_gemv_parts_v2(parts.data(), parts.size(), s.K, xq_storage.data() + s.x_offset, s.N, step.data(),
                              options);
    std::string first;
    std::size_t d = 0;
    for (std::size_t p = 0; p < s.Ms.size(); ++p)
      for (std::size_t i = 0; i < want[p].size(); ++i)
        if (std::memcmp(&want[p][i], &got[p][i], sizeof(float)) != 0) {
          if (first.empty())
            first = "part " + std::to_string(p) + " y[" + std::to_string(i / s.Ms[p]) + ", " +
                    std::to_string(i % s.Ms[p]) + "]: spec " + hex(want[p][i]) + ", emulated " + hex(got[p][i]);
          ++d;
        }
    if (differing) *differing = d;
    return first;
  }
};

// Where the residual's output goes, against its other operand and the part's y.
enum class SumAt { apart, over_add, over_y };

// The residual epilogue on part 0 (one part, as the decode's o_proj and
// down_proj): sum = add + y (add_first) or y + add, ops::ResidualAdd's add of
// the spec's y. add holds −0 in every 5th cell, ±large values, and values
// within a few ulps of −y (cancellation: the add's rounding matters).
// The first differing cell of y or of the sum (or ""), and how many differ.
std::string run_residual(const Case& c, const ll::TernaryV2Options& options, bool add_first, SumAt at,
                         std::size_t* differing = nullptr) {
  const std::size_t n = c.s.N * c.s.Ms[0];
  std::mt19937_64 rng(c.s.K * 31 + c.s.N);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> add(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float w = c.want[0][i];
    add[i] = i % 5 == 0 ? -0.0f : i % 5 == 1 ? -w : i % 5 == 2 ? -w * 1.0000001f : i % 5 == 3 ? u(rng) * 1e6f : u(rng);
  }
  const ops::ElementwiseConfig ec{n};
  const lockstep::Tensor<float> ta({n}, add), ty({n}, c.want[0]);
  using In = ops::ResidualAdd::Inputs<float>;
  const std::vector<float> want_sum =
      add_first ? ops::ResidualAdd::forward(ec, In{ta, ty}).y.data : ops::ResidualAdd::forward(ec, In{ty, ta}).y.data;
  std::vector<float> y(n, -7.0f), sum(n, -7.0f), add_buf = add;
  ll::TernaryPart part{c.words[0].data(), c.s.Ms[0], c.scale[0].data(), y.data()};
  part.add = add_buf.data();
  part.sum = at == SumAt::apart ? sum.data() : at == SumAt::over_add ? add_buf.data() : y.data();
  part.add_first = add_first;
  ll::ternary_gemv_parts_v2(&part, 1, c.s.K, c.xq_storage.data() + c.s.x_offset, c.s.N, c.step.data(), options);
  const std::vector<float>& got_sum = at == SumAt::apart ? sum : at == SumAt::over_add ? add_buf : y;
  std::string first;
  std::size_t d = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (at != SumAt::over_y && std::memcmp(&c.want[0][i], &y[i], sizeof(float)) != 0) {
      if (first.empty()) first = "y[" + std::to_string(i) + "]: spec " + hex(c.want[0][i]) + ", emulated " + hex(y[i]);
      ++d;
    }
    if (std::memcmp(&want_sum[i], &got_sum[i], sizeof(float)) != 0) {
      if (first.empty())
        first = "sum[" + std::to_string(i) + "]: spec " + hex(want_sum[i]) + ", emulated " + hex(got_sum[i]);
      ++d;
    }
  }
  if (differing) *differing = d;
  return first;
}

// Chunks: N 1, 2, 4, 8, 16 a chunk (R = 2, 2, 4, 4, 2 rows a warp); N 17, 33,
// 40: 2-3 chunks of 16 (the staged codes reused). M: whole CTAs, a part-idle
// warp (M odd), idle warps (M 5 at 8 rows a CTA, 12 at 16). K: 1, 63, 65,
// 100, 130, 257 (units off 64, the scalar staging: K % 16 != 0), 1000, 2049,
// 2560 (the 2B4T width: 40 units, Pre 2), 6912 (108 units, Pre 4), 10000
// (157 units: the loop past the prefetched ones).
std::vector<Shape> shapes() {
  return {
      {1, 2560, {40}},        {1, 6912, {20}},      {1, 10000, {9}},     {2, 65, {3}},        {3, 1, {7}},
      {5, 63, {17}},          {8, 130, {33}},       {16, 257, {21}},     {17, 100, {5}},      {33, 2049, {6}},
      {40, 1000, {13}},       {4, 2560, {24}},      {8, 6912, {12}},     {2, 2560, {8}, 1},   {19, 2560, {5}, 1},
      {1, 2560, {16, 8, 8}},  {5, 130, {17, 8, 33}}, {20, 64, {3, 9}},   {8, 1024, {4, 16, 1}},
  };
}

}  // namespace

TEST(TernaryGemvV2Emulated, EqualsTheBitLinearSpec) {
  std::uint64_t seed = 1;
  for (const Shape& s : shapes()) {
    const Case c(s, seed++);
    EXPECT_EQ(c.run({}), "") << name_of(s);
  }
}

// The barrier is real: thread orders shuffled every round change nothing.
TEST(TernaryGemvV2Emulated, ShuffledThreadOrders) {
  emu::cta.shuffle_order = true;
  std::uint64_t seed = 100;
  for (const Shape& s : {Shape{17, 100, {5}}, Shape{40, 1000, {13}}, Shape{8, 6912, {12}}, Shape{19, 2560, {5}, 1},
                         Shape{5, 130, {17, 8, 33}}}) {
    const Case c(s, seed++);
    for (int round = 0; round < 2; ++round) EXPECT_EQ(c.run({}), "") << name_of(s) << ", round " << round;
  }
  emu::cta.shuffle_order = false;
}

// The planted bugs differ: the device mutants (DecodeLinearMutant) that the
// GPU test plants too, and a barrier left out, which only a shuffled order shows.
TEST(TernaryGemvV2Emulated, PlantedBugsDiffer) {
  const Case wide(Shape{3, 2560, {12}}, 7), joined(Shape{1, 2560, {16, 8, 8}}, 8), chunks(Shape{40, 1000, {13}}, 9);
  ll::TernaryV2Options dropped, half, no_barrier;
  dropped.drop_last_unit = true;
  half.half_warp_join = true;
  no_barrier.plant_no_reuse_barrier = true;
  std::size_t d = 0;
  EXPECT_NE(wide.run(dropped, &d), "") << "the last unit dropped";
  std::printf("planted: the last unit of each row dropped: %zu cells differ (N 3 K 2560 M 12)\n", d);
  EXPECT_NE(joined.run(dropped), "") << "the last unit dropped, joined parts";
  EXPECT_NE(wide.run(half, &d), "") << "the half-warp join";
  std::printf("planted: the half-warp join: %zu cells differ (N 3 K 2560 M 12)\n", d);
  EXPECT_NE(joined.run(half), "") << "the half-warp join, joined parts";
  EXPECT_EQ(chunks.run(no_barrier), "") << "in round-robin order the missing barrier cannot show";
  emu::cta.shuffle_order = true;
  EXPECT_NE(chunks.run(no_barrier, &d), "") << "no barrier before the next chunk restages x";
  std::printf("planted: no barrier before a chunk restages x (shuffled order): %zu cells differ (N 40 K 1000 M 13)\n",
              d);
  EXPECT_EQ(chunks.run({}), "") << "the kernel as it is, shuffled";
  emu::cta.shuffle_order = false;
}

// The residual epilogue: the cells and their residual sums are BitLinear then
// ResidualAdd, bit for bit (2B4T's o_proj K 2560 and down_proj K 6912 widths,
// ragged K and M, 1-40 rows, misaligned codes), for both operand orders and
// the sum apart, over its other operand (in place) and over y; shuffled too.
TEST(TernaryGemvV2Emulated, ResidualEpilogueEqualsBitLinearThenTheAdd) {
  std::uint64_t seed = 200;
  for (const Shape& s : {Shape{1, 2560, {40}}, Shape{1, 6912, {20}}, Shape{3, 65, {7}}, Shape{5, 130, {17}},
                         Shape{8, 2560, {24}}, Shape{17, 100, {5}}, Shape{40, 1000, {13}}, Shape{19, 2560, {5}, 1},
                         Shape{2, 10000, {9}}}) {
    const Case c(s, seed++);
    for (bool add_first : {true, false})
      for (SumAt at : {SumAt::apart, SumAt::over_add, SumAt::over_y})
        EXPECT_EQ(run_residual(c, {}, add_first, at), "")
            << name_of(s) << (add_first ? ", add first" : ", y first") << ", sum at " << static_cast<int>(at);
  }
  emu::cta.shuffle_order = true;
  const Case c(Shape{40, 1000, {13}}, 300);
  EXPECT_EQ(run_residual(c, {}, true, SumAt::over_add), "") << "shuffled";
  emu::cta.shuffle_order = false;
}

// The planted bug: the residual's add contracted with the last product (one
// rounding where the spec has two) differs; the spec's own −0 + +0 = +0 and
// −y + y = +0 cells hold either way, so the differing cells are the rounding's.
TEST(TernaryGemvV2Emulated, ResidualEpiloguePlantedBugDiffers) {
  ll::TernaryV2Options contracted;
  contracted.residual_contracted = true;
  std::size_t d = 0;
  const Case c(Shape{3, 2560, {40}}, 400);
  EXPECT_NE(run_residual(c, contracted, true, SumAt::apart, &d), "") << "the add contracted into an fma";
  std::printf("planted: the residual epilogue's add contracted into an fma: %zu cells differ (N 3 K 2560 M 40)\n", d);
  EXPECT_NE(run_residual(c, contracted, false, SumAt::over_add), "") << "contracted, in place";
  EXPECT_EQ(run_residual(c, {}, true, SumAt::apart), "") << "the kernel as it is";
}

namespace {

// A norm row's content: ordinary values (with −0), ±0 only (the floor step),
// values near 1e17 (x² near 1e34: a large finite sum), a few 1e19 among
// ordinary ones (Σx² overflows: rs = 0, y = ±0), values near 1e-30 (x²
// underflows to 0: rs = rsqrt(eps)).
enum class Row { ordinary, zero, large, overflow, tiny };

struct NormShape {
  std::size_t N, K;
  std::vector<std::size_t> Ms;
  Row last = Row::ordinary;  // the content of row N - 1 (row 0 is ordinary unless N == 1)
  std::size_t x_offset = 0;  // floats: x off 16 bytes (the prologue's scalar path)
  bool residual = false;     // part 0 carries the residual epilogue (sum apart from add)
};

std::string name_of(const NormShape& s) {
  std::string name = "N " + std::to_string(s.N) + " K " + std::to_string(s.K) + " M";
  for (std::size_t M : s.Ms) name.append(" ").append(std::to_string(M));
  name.append(" last row ").append(std::to_string(static_cast<int>(s.last)));
  if (s.x_offset) name.append(" x off by ").append(std::to_string(s.x_offset));
  if (s.residual) name.append(" + residual");
  return name;
}

template <class V>
std::size_t count_differing(const V* want, const V* got, std::size_t n, const std::string& what, std::string& first) {
  std::size_t d = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (std::memcmp(&want[i], &got[i], sizeof(V)) != 0) {
      if (first.empty()) {
        if constexpr (sizeof(V) == 4)
          first = what + "[" + std::to_string(i) + "]: spec " + hex(want[i]) + ", emulated " + hex(got[i]);
        else
          first = what + "[" + std::to_string(i) + "]: spec " + std::to_string(want[i]) + ", emulated " +
                  std::to_string(got[i]);
      }
      ++d;
    }
  return d;
}

constexpr float kEps = 1e-5f;

struct NormCase {
  NormShape s;
  std::vector<float> x;  // [x_offset + N·K]
  std::vector<float> w, y, rstd, step, add, want_sum;
  std::vector<std::int8_t> codes;
  std::vector<std::vector<std::uint32_t>> words;
  std::vector<std::vector<float>> scale, want;

  NormCase(const NormShape& sp, std::uint64_t seed) : s(sp) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> ux(-3.0f, 3.0f), ug(0.5f, 1.5f), uw(-0.1f, 0.1f);
    const std::size_t n = s.N * s.K;
    std::vector<float> xs(n);
    for (std::size_t r = 0; r < s.N; ++r) {
      const Row kind = r + 1 == s.N ? s.last : Row::ordinary;
      for (std::size_t k = 0; k < s.K; ++k) {
        float v = ux(rng);
        if (kind == Row::zero) v = k % 3 == 0 ? -0.0f : 0.0f;
        if (kind == Row::large) v *= 1e17f;
        if (kind == Row::overflow && k % 97 == 5) v = v < 0 ? -1e19f : 1e19f;
        if (kind == Row::tiny) v *= 1e-30f;
        if (k % 13 == 0 && kind != Row::zero) v = -0.0f;
        xs[r * s.K + k] = v;
      }
    }
    x.assign(s.x_offset, 0.0f);
    x.insert(x.end(), xs.begin(), xs.end());
    w.resize(s.K);
    for (std::size_t k = 0; k < s.K; ++k) w[k] = k % 7 == 3 ? -ug(rng) : ug(rng);
    // The spec: the norm, the codes of its y, each part's BitLinear of y.
    const ops::NormConfig nc{s.N, s.K, kEps};
    const auto o = ops::RmsNorm::forward(
        nc, ops::RmsNorm::Inputs<float>{lockstep::Tensor<float>({s.N, s.K}, xs), lockstep::Tensor<float>({s.K}, w)});
    y = o.y.data;
    rstd = o.rstd.data;
    const ops::RowCodes<float> rc = ops::quantize_rows(y.data(), s.N, s.K, static_cast<float>(ops::BitLinear::kActFloor));
    codes = rc.q;
    step = rc.step;
    for (std::size_t M : s.Ms) {
      std::vector<float> wm(M * s.K);
      for (float& v : wm) v = uw(rng);
      const ops::QuantLinearConfig c{s.N, s.K, M};
      const ops::BitLinear::Inputs<float> in{lockstep::Tensor<float>({s.N, s.K}, y),
                                             lockstep::Tensor<float>({M, s.K}, wm)};
      const auto z = ops::BitLinear::quantize(c, in);
      words.push_back(packed(z.qw.data(), M, s.K));
      scale.push_back({z.wstep[0]});
      want.push_back(ops::BitLinear::forward(c, in).y.data);
    }
    if (s.residual) {
      const std::size_t m0 = s.N * s.Ms[0];
      add.resize(m0);
      for (std::size_t i = 0; i < m0; ++i) add[i] = i % 4 == 0 ? -0.0f : i % 4 == 1 ? -want[0][i] : ux(rng) * 10.0f;
      const ops::ElementwiseConfig ec{m0};
      want_sum = ops::ResidualAdd::forward(ec, ops::ResidualAdd::Inputs<float>{lockstep::Tensor<float>({m0}, add),
                                                                               lockstep::Tensor<float>({m0}, want[0])})
                     .y.data;
    }
  }

  // The first differing value (or ""), and how many differ.
  std::string run(const ll::TernaryV2Options& base, std::size_t* differing = nullptr) const {
    const std::size_t n = s.N * s.K;
    std::vector<float> gy(n, -7.0f), grstd(s.N, -7.0f), gstep(s.N, -7.0f), gsum(add.size(), -7.0f);
    std::vector<std::int8_t> gcodes(n, 99);
    std::vector<std::vector<float>> got;
    std::vector<ll::TernaryPart> parts;
    for (std::size_t p = 0; p < s.Ms.size(); ++p) got.emplace_back(s.N * s.Ms[p], -7.0f);
    for (std::size_t p = 0; p < s.Ms.size(); ++p)
      parts.push_back({words[p].data(), s.Ms[p], scale[p].data(), got[p].data()});
    if (s.residual) {
      parts[0].add = add.data();
      parts[0].sum = gsum.data();
      parts[0].add_first = true;
    }
    ll::NormPrologue np;
    np.x = x.data() + s.x_offset;
    np.w = w.data();
    np.eps = kEps;
    np.floor_x = static_cast<float>(ops::BitLinear::kActFloor);
    np.y = gy.data();
    np.rstd = grstd.data();
    np.codes = gcodes.data();
    np.step = gstep.data();
    ll::TernaryV2Options options = base;
    options.norm = &np;
    ll::ternary_gemv_parts_v2(parts.data(), parts.size(), s.K, nullptr, s.N, nullptr, options);
    std::string first;
    std::size_t d = 0;
    for (std::size_t p = 0; p < s.Ms.size(); ++p)
      d += count_differing(want[p].data(), got[p].data(), want[p].size(), "part " + std::to_string(p) + " cell", first);
    d += count_differing(want_sum.data(), gsum.data(), want_sum.size(), "sum", first);
    d += count_differing(y.data(), gy.data(), n, "y", first);
    d += count_differing(rstd.data(), grstd.data(), s.N, "rstd", first);
    d += count_differing(codes.data(), gcodes.data(), n, "codes", first);
    d += count_differing(step.data(), gstep.data(), s.N, "step", first);
    if (differing) *differing = d;
    return first;
  }
};

// 2B4T's q/k/v joined (here scaled down: 2560 wide, 3 parts), gate/up (2
// parts), o_proj + residual (K 2560), down_proj's width 6912 (2 chunks of the
// norm's tree), the staged row's widest 8192, ragged K (1, 63, 100, 130, 1000,
// 4097: the scalar path, codes padded to the unit), the scalar path at K 2560
// (x off 16 bytes), idle warps (M 5), every special row at 1 and 2 rows.
std::vector<NormShape> norm_shapes() {
  using R = Row;
  return {
      {1, 2560, {40}},                    {2, 2560, {24}},
      {1, 2560, {16, 8, 8}},              {2, 2560, {16, 8, 8}, R::zero},
      {1, 2560, {24, 24}},                {2, 2560, {12, 12}, R::large},
      {1, 2560, {40}, R::ordinary, 0, true}, {2, 2560, {24}, R::overflow, 0, true},
      {1, 6912, {20}},                    {2, 6912, {12}, R::tiny},
      {1, 8192, {8}},                     {2, 4097, {5}},
      {1, 1, {7}},                        {2, 63, {3, 9}},
      {1, 100, {5}, R::zero},             {2, 130, {17, 8, 33}, R::overflow},
      {2, 1000, {13}, R::large},          {1, 2560, {8}, R::ordinary, 1},
      {2, 2560, {8, 5}, R::tiny, 1},      {1, 2560, {8}, R::zero},
      {1, 2560, {8}, R::large},           {1, 2560, {8}, R::overflow},
      {1, 2560, {8}, R::tiny},
  };
}

}  // namespace

TEST(NormGemvEmulated, EqualsTheNormThenTheCodesThenBitLinear) {
  std::uint64_t seed = 500;
  for (const NormShape& s : norm_shapes()) EXPECT_EQ(NormCase(s, seed++).run({}), "") << name_of(s);
}

// The prologue's barriers are real: shuffled thread orders change nothing.
TEST(NormGemvEmulated, ShuffledThreadOrders) {
  emu::cta.shuffle_order = true;
  std::uint64_t seed = 600;
  for (const NormShape& s : {NormShape{2, 2560, {16, 8, 8}}, NormShape{2, 6912, {12}, Row::zero},
                             NormShape{2, 130, {17, 8, 33}}, NormShape{1, 2560, {40}, Row::ordinary, 1, true}}) {
    const NormCase c(s, seed++);
    for (int round = 0; round < 2; ++round) EXPECT_EQ(c.run({}), "") << name_of(s) << ", round " << round;
  }
  emu::cta.shuffle_order = false;
}

// The planted bugs differ: the prologue's codes of x instead of y
// (Mutant::norm_quantize_stale_row, which the GPU test plants too), rs from
// a non-canonical lane order (contiguous runs, emulator only), and v2's
// own mutants with the prologue on.
TEST(NormGemvEmulated, PlantedBugsDiffer) {
  const NormCase c(NormShape{2, 2560, {16, 8, 8}}, 700), one(NormShape{1, 2560, {40}, Row::ordinary, 1}, 701);
  ll::TernaryV2Options stale, dropped, half;
  stale.norm_stale_row = true;
  dropped.drop_last_unit = true;
  half.half_warp_join = true;
  std::size_t d = 0;
  EXPECT_NE(c.run(stale, &d), "") << "the codes of x";
  std::printf("planted: the prologue's codes of x, not of y: %zu values differ (N 2 K 2560 M 16 8 8)\n", d);
  EXPECT_NE(one.run(stale, &d), "") << "the codes of x, the scalar path";
  std::printf("planted: the same on the scalar path: %zu values differ (N 1 K 2560 M 40)\n", d);
  ll::TernaryV2Options blocked;
  blocked.plant_norm_blocked_lanes = true;
  // (rs moves only where the reordered sum of squares rounds differently after the rsqrt: some rows, not all)
  std::size_t total = 0, cases = 0;
  for (std::uint64_t seed = 710; seed < 730; ++seed)
    for (std::size_t K : {std::size_t{2560}, std::size_t{6912}}) {
      const NormCase b(NormShape{2, K, {8}}, seed);
      b.run(blocked, &d);
      total += d;
      cases += d > 0 ? 1 : 0;
    }
  EXPECT_GT(total, 0u) << "rs from lanes folding contiguous runs";
  std::printf("planted: the prologue's rs from a non-canonical lane order: %zu values differ, in %zu of 40 cases\n",
              total, cases);
  EXPECT_NE(c.run(dropped), "") << "the last unit dropped";
  EXPECT_NE(c.run(half), "") << "the half-warp join";
  EXPECT_EQ(c.run({}), "") << "the kernel as it is";
}

TEST(NormGemvEmulated, RefusesRowsAndWidthsOutsideItsRange) {
  EXPECT_TRUE(ll::norm_gemv_fits(2, 8192));
  EXPECT_FALSE(ll::norm_gemv_fits(3, 2560));
  EXPECT_FALSE(ll::norm_gemv_fits(0, 2560));
  EXPECT_FALSE(ll::norm_gemv_fits(1, 8193));
  const NormCase c(NormShape{1, 64, {4}}, 800);
  std::vector<float> v(3 * 64);
  std::vector<std::int8_t> q(3 * 64);
  ll::NormPrologue np{v.data(), v.data(), kEps, 1e-5f, v.data(), v.data(), q.data(), v.data()};
  ll::TernaryPart part{c.words[0].data(), 4, c.scale[0].data(), v.data()};
  ll::TernaryV2Options options;
  options.norm = &np;
  EXPECT_THROW(ll::ternary_gemv_parts_v2(&part, 1, 64, nullptr, 3, nullptr, options), std::invalid_argument);
}
