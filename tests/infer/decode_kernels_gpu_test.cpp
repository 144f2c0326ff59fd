// The decode projections' device kernels (backend/cuda/decode_linear.cu,
// label gpu) against their CPU references, bit for bit, on ragged shapes:
//   * ternary_pack + ternary_gemv after the training quantizers
//     (ternary_quantize, row_quantize_i8) = ops::BitLinear::forward (the spec),
//     K off and on the 64-code units, 1 to 40 rows (the batch chunks), the
//     2B4T shapes (K 2560 and 6912);
//   * chain_gemv = ops::matmul_xwt (+ the bias) with f32 weights and with the
//     exact f16 copy (f16_pack), 1 to 40 rows (every row template), K off the
//     32-wide tiles, K % 8 == 0 (the f16 row kernel) and not, a NaN (without
//     the bias) and signed zeros in x;
//   * f16_pack says exact only when every value is;
//   * the LM head's v2 kernels (head_gemv.cu: LOCKSTEP_HEAD_GEMV=v2 | v2wide,
//     set_head_gemv_version) = ops::matmul_xwt (+ the bias) on every f16 chain
//     shape and on the 2B4T head (K 2560, M 128256) at 1, 8 and 32 rows, raw
//     f16 weights with ±inf, NaN, ±0 and subnormals; their planted bugs
//     (mul+add, each tile's k groups backwards, the wait one group short)
//     caught; µs a call of v1, v2 and v2wide printed;
//   * every ternary_gemv kernel (v1 both forms; v2 and v2 as a programmatic
//     dependent launch: LOCKSTEP_TERNARY_GEMV, set_ternary_gemv_version);
//   * the residual epilogue (TernaryPart::add / sum: o_proj and down_proj with
//     the residual add after them in one launch) = ops::BitLinear::forward then
//     ops::ResidualAdd::forward, every kernel form, apart and in place;
//   * ReLU²·up + the FFN sub-norm + codes in one launch (act_norm.cu) =
//     ops::ReluSqMul, ops::RmsNorm, ops::quantize_rows; its planted bug caught;
//   * RoPE of q, k + the K/V cache writes in one launch (rope_store.cu) = rope_rows
//     and store_rows_at on the device; its planted bug caught;
//   * the planted bugs (decode_linear_launch.hpp's DecodeLinearMutant) are caught,
//     v2's half-warp join and its dropped last unit too;
//   * cached_attention (decode.cu) = ops::CachedAttention::forward, v1 and v2
//     (LOCKSTEP_DECODE_ATTENTION, set_decode_attention_version): the staged
//     blocks with 16-byte copies (head_dim 128, the 2B4T heads, 1 to 3 key
//     blocks; ctx 512 at batch 1, 8 and 32, rows of lengths 1 .. 512), with
//     scalar copies (head_dim 6; an odd key block), head_dim 256 and v1's
//     unstaged kernel (head_dim 320: past the staged shared memory), 16 query
//     heads a kv head, key blocks 5 and 100; the attention mutant (its scale
//     dropped) is caught in both, v2's own (DecodeAttentionMutant) too;
//   * the fused RMSNorm + row codes (rmsnorm_quantize_i8) through its
//     start-up gate cases (against the CPU's RMSNorm and
//     ops::quantize_rows), clean and poisoned; its mutant (the codes of the
//     staged x, not of y) is rejected;
//   * the norm in the GEMV's prologue (ternary_gemv_parts_norm, the session-11
//     LOCKSTEP_DECODE_NORM_GEMV path) = ops::RmsNorm, ops::quantize_rows,
//     ops::BitLinear (+ ops::ResidualAdd): the cells and CTA 0's y, rstd,
//     codes, step, at the 2B4T shapes (q/k/v, gate/up, o_proj + residual) at
//     1 and 2 rows, ragged and off the 16-byte path, v2 and v2pdl; its planted
//     bug (the codes of x, Mutant::norm_quantize_stale_row) caught.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "../model/model_test_util.hpp"
#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cuda/act_norm_launch.hpp"
#include "lockstep/backend/cuda/decode_launch.hpp"
#include "lockstep/backend/cuda/decode_linear_launch.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/gemm_launch.hpp"
#include "lockstep/backend/cuda/head_gemv_launch.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/pointwise_launch.hpp"
#include "lockstep/backend/cuda/rope_store_launch.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/num/reduce.hpp"
#include "lockstep/ops/activation.hpp"
#include "lockstep/ops/cached_attention.hpp"
#include "lockstep/ops/norm.hpp"
#include "lockstep/ops/op.hpp"
#include "lockstep/ops/quant.hpp"
#include "lockstep/ops/rope.hpp"
#include "lockstep/tensor/convert.hpp"

namespace {

using namespace lockstep;
namespace launch = cuda::launch;
using model::testing::differing_bits;

struct Shape {
  std::size_t N, K, M;
};

std::vector<float> uniform(std::size_t n, double a, std::uint64_t seed) {
  ad::Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.uniform(-a, a));
  return v;
}

// The device's BitLinear decode: what DecodeBackend<cuda::OpKernels>::linear
// runs. With `add` (o_proj, down_proj), the residual add after it in the same
// launch (TernaryPart::sum, add first): *sum = add + y, apart from add or, in_place, over it.
std::vector<float> gpu_bitlinear(const Shape& s, const std::vector<float>& x, const std::vector<float>& w,
                                 const std::vector<float>* add = nullptr, bool in_place = false,
                                 std::vector<float>* sum = nullptr) {
  const std::size_t n = s.M * s.K;
  cuda::DeviceBuffer<float> dx(x.size()), dw(n), codes(n), dequant(n), params(2), scratch(launch::ternary_scratch(n)),
      step(s.N), y(s.N * s.M), dadd(add ? add->size() : 0), dsum(add && !in_place ? s.N * s.M : 0);
  cuda::DeviceBuffer<std::uint32_t> words(s.M * 4 * launch::ternary_units(s.K));
  cuda::DeviceBuffer<std::int8_t> xq(s.N * s.K);
  dx.upload(x);
  dw.upload(w);
  launch::ternary_quantize(dw.data(), n, static_cast<float>(n), static_cast<float>(1e-5), codes.data(), dequant.data(),
                           params.data(), scratch.data());
  launch::ternary_pack(codes.data(), s.M, s.K, words.data());
  launch::row_quantize_i8(dx.data(), s.N, s.K, static_cast<float>(ops::BitLinear::kActFloor), xq.data(), step.data(),
                          nullptr);
  launch::TernaryPart part{words.data(), s.M, params.data(), y.data()};
  if (add != nullptr) {
    dadd.upload(*add);
    part.add = dadd.data();
    part.sum = in_place ? dadd.data() : dsum.data();
  }
  launch::ternary_gemv_parts(&part, 1, s.K, xq.data(), s.N, step.data());
  cuda::synchronize("ternary_gemv test");
  if (add != nullptr) *sum = in_place ? dadd.download() : dsum.download();
  return y.download();
}

// Several BitLinears on one x [N, K] in one launch (ternary_gemv_parts: q, k, v;
// gate, up): each part's y [N, M_p].
std::vector<std::vector<float>> gpu_bitlinear_parts(std::size_t N, std::size_t K, const std::vector<std::size_t>& Ms,
                                                    const std::vector<float>& x,
                                                    const std::vector<std::vector<float>>& ws) {
  cuda::DeviceBuffer<float> dx(x.size()), step(N);
  cuda::DeviceBuffer<std::int8_t> xq(N * K);
  dx.upload(x);
  launch::row_quantize_i8(dx.data(), N, K, static_cast<float>(ops::BitLinear::kActFloor), xq.data(), step.data(),
                          nullptr);
  std::vector<cuda::DeviceBuffer<float>> params(Ms.size()), ys(Ms.size());
  std::vector<cuda::DeviceBuffer<std::uint32_t>> words(Ms.size());
  std::vector<launch::TernaryPart> parts;
  for (std::size_t p = 0; p < Ms.size(); ++p) {
    const std::size_t n = Ms[p] * K;
    cuda::DeviceBuffer<float> dw(n), codes(n), dequant(n), scratch(launch::ternary_scratch(n));
    dw.upload(ws[p]);
    params[p].resize(2);
    launch::ternary_quantize(dw.data(), n, static_cast<float>(n), static_cast<float>(1e-5), codes.data(),
                             dequant.data(), params[p].data(), scratch.data());
    words[p].resize(Ms[p] * 4 * launch::ternary_units(K));
    launch::ternary_pack(codes.data(), Ms[p], K, words[p].data());
    cuda::synchronize("ternary_gemv_parts test: packing");
    ys[p].resize(N * Ms[p]);
    parts.push_back({words[p].data(), Ms[p], params[p].data(), ys[p].data()});
  }
  launch::ternary_gemv_parts(parts.data(), parts.size(), K, xq.data(), N, step.data());
  cuda::synchronize("ternary_gemv_parts test");
  std::vector<std::vector<float>> out;
  for (auto& y : ys) out.push_back(y.download());
  return out;
}

std::vector<float> cpu_bitlinear(const Shape& s, const std::vector<float>& x, const std::vector<float>& w) {
  const ops::BitLinear::Inputs<float> in{Tensor<float>({s.N, s.K}, x), Tensor<float>({s.M, s.K}, w)};
  return ops::BitLinear::forward(ops::QuantLinearConfig{s.N, s.K, s.M}, in).y.data;
}

std::vector<float> gpu_chain(const Shape& s, const std::vector<float>& x, const std::vector<float>& w,
                             const std::vector<float>* bias, bool f16, bool* exact) {
  cuda::DeviceBuffer<float> dx(x.size()), dw(w.size()), db(bias ? bias->size() : 1), y(s.N * s.M);
  cuda::DeviceBuffer<std::uint16_t> half(w.size());
  cuda::DeviceBuffer<int> flag(1);
  dx.upload(x);
  dw.upload(w);
  if (bias) db.upload(*bias);
  *exact = launch::f16_pack(dw.data(), w.size(), half.data(), flag.data());
  launch::chain_gemv(f16 ? nullptr : dw.data(), f16 ? half.data() : nullptr, dx.data(), bias ? db.data() : nullptr,
                     s.N, s.M, s.K, y.data());
  cuda::synchronize("chain_gemv test");
  return y.download();
}

std::vector<float> cpu_chain(const Shape& s, const std::vector<float>& x, const std::vector<float>& w,
                             const std::vector<float>* bias) {
  std::vector<float> y(s.N * s.M);
  ops::matmul_xwt(s.N, s.M, s.K, x.data(), w.data(), y.data());
  if (bias)
    for (std::size_t n = 0; n < s.N; ++n)
      for (std::size_t m = 0; m < s.M; ++m) y[n * s.M + m] = y[n * s.M + m] + (*bias)[m];
  return y;
}

// K 10000: 157 units a row, past the 128 a warp prefetches (the loop over the rest).
const std::vector<Shape> kTernaryShapes{{1, 2560, 640}, {1, 65, 3},    {3, 1, 7},     {5, 63, 129}, {17, 130, 33},
                                        {40, 257, 100}, {32, 6912, 300}, {2, 2560, 6912}, {1, 6912, 2560},
                                        {3, 10000, 45}};
// K % 8 == 0 (2560, 64, 2568: the f16 weights take the row kernel) and not.
const std::vector<Shape> kChainShapes{{1, 2560, 5000}, {3, 33, 4097}, {4, 64, 130},   {8, 100, 300},
                                      {9, 31, 129},    {16, 65, 257}, {17, 1, 200},  {40, 2560, 1000},
                                      {1, 2560, 20000}, {5, 2568, 777}, {8, 2560, 3001}};

class DecodeKernelsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!model::cuda_device_available(&why)) GTEST_SKIP() << why;
  }
  void TearDown() override {
    launch::set_decode_linear_mutant(launch::DecodeLinearMutant::none);
    launch::set_ternary_gemv_version(0);
    launch::set_head_gemv_version(0);
  }

  // Differing cells over every ternary shape.
  static std::size_t ternary_differences(bool print) {
    std::size_t total = 0;
    std::uint64_t seed = 1;
    for (const Shape& s : kTernaryShapes) {
      std::vector<float> x = uniform(s.N * s.K, 3.0, seed++), w = uniform(s.M * s.K, 0.1, seed++);
      x[0] = -0.0f;
      const std::size_t d = differing_bits(gpu_bitlinear(s, x, w), cpu_bitlinear(s, x, w));
      if (print && d != 0) ADD_FAILURE() << "ternary_gemv N " << s.N << " K " << s.K << " M " << s.M << ": " << d
                                         << " cells differ from ops::BitLinear::forward";
      total += d;
    }
    return total;
  }
  // Differing cells over the joined launches: q, k, v and gate, up at the
  // 2B4T shapes, ragged ones (parts of 1, 3, 9, 17, 33 rows: CTAs with idle
  // warps between the parts; a part of exactly one CTA), K past the
  // prefetched units.
  static std::size_t parts_differences(bool print) {
    struct PartsShape {
      std::size_t N, K;
      std::vector<std::size_t> Ms;
    };
    const std::vector<PartsShape> shapes{{1, 2560, {2560, 640, 640}}, {8, 2560, {2560, 640, 640}},
                                         {32, 2560, {6912, 6912}},    {3, 65, {1, 9, 3}},
                                         {5, 130, {17, 8, 33}},       {2, 10000, {45, 8}}};
    std::size_t total = 0;
    std::uint64_t seed = 50;
    for (const PartsShape& s : shapes) {
      std::vector<float> x = uniform(s.N * s.K, 3.0, seed++);
      x[0] = -0.0f;
      std::vector<std::vector<float>> ws;
      for (std::size_t M : s.Ms) ws.push_back(uniform(M * s.K, 0.1, seed++));
      const auto got = gpu_bitlinear_parts(s.N, s.K, s.Ms, x, ws);
      for (std::size_t p = 0; p < s.Ms.size(); ++p) {
        const std::size_t d = differing_bits(got[p], cpu_bitlinear({s.N, s.K, s.Ms[p]}, x, ws[p]));
        if (print && d != 0) ADD_FAILURE() << "ternary_gemv_parts N " << s.N << " K " << s.K << " part " << p
                                           << " of " << s.Ms.size() << " (M " << s.Ms[p] << "): " << d
                                           << " cells differ from ops::BitLinear::forward";
        total += d;
      }
    }
    return total;
  }
  static std::size_t chain_differences(bool print) {
    std::size_t total = 0;
    std::uint64_t seed = 100;
    for (const Shape& s : kChainShapes)
      for (int variant = 0; variant < 3; ++variant) {  // f32 weights; f16-exact weights; f16-exact + bias
        std::vector<float> x = uniform(s.N * s.K, 2.0, seed++), w = uniform(s.M * s.K, 1.0, seed++);
        const bool f16 = variant > 0;
        if (f16)
          for (auto& v : w) v = std::round(v * 1024.0f) / 1024.0f;  // k / 1024, |k| <= 1024: exact in f16
        x[0] = -0.0f;
        // A NaN chain ends on the canonical NaN on both sides; a NaN through the
        // bias add is not compared (the device's add returns its own NaN where the
        // host keeps the operand's: DESIGN.md, the same for the training GEMM).
        if (variant != 2 && s.N * s.K > 3) x[3] = std::numeric_limits<float>::quiet_NaN();
        const std::vector<float> bias = uniform(s.M, 1.0, seed++);
        const std::vector<float>* b = variant == 2 ? &bias : nullptr;
        bool exact = false;
        const std::size_t d = differing_bits(gpu_chain(s, x, w, b, f16, &exact), cpu_chain(s, x, w, b));
        if (print) {
          EXPECT_EQ(exact, f16) << "f16_pack's verdict, N " << s.N << " K " << s.K << " M " << s.M;
          if (d != 0)
            ADD_FAILURE() << "chain_gemv N " << s.N << " K " << s.K << " M " << s.M << (f16 ? " f16" : " f32")
                          << (b ? " bias" : "") << ": " << d << " cells differ from ops::matmul_xwt";
        }
        total += d;
      }
    return total;
  }
};

// Every form of ternary_gemv: v1 prefetched (the default) and session 7's (LOCKSTEP_DECODE_FUSION=0);
// v2 (LOCKSTEP_TERNARY_GEMV=v2) and v2 as a programmatic dependent launch (v2pdl). check(name) per form.
template <class Check>
void for_every_ternary_form(Check check) {
  for (int version : {1, 2, 3})
    for (int prefetch : {1, 0}) {
      if (version > 1 && prefetch == 0) continue;  // v2 always prefetches
      launch::set_ternary_gemv_version(version);
      launch::set_decode_fusion(prefetch);
      check(fmt::format("v{}{}", version, prefetch ? " prefetched" : " not prefetched"));
    }
  launch::set_ternary_gemv_version(0);
  launch::set_decode_fusion(-1);
}

TEST_F(DecodeKernelsGpu, TernaryGemvEqualsTheBitLinearSpec) {
  for_every_ternary_form([](const std::string& form) { EXPECT_EQ(ternary_differences(true), 0u) << form; });
}

// Several BitLinears on one input in one launch (ternary_gemv_parts), every form.
TEST_F(DecodeKernelsGpu, JoinedTernaryGemvsEqualTheBitLinearSpec) {
  for_every_ternary_form([](const std::string& form) { EXPECT_EQ(parts_differences(true), 0u) << form; });
}

// v2's planted bugs: the last unit dropped (the v1 mutant, planted in v2 too) and
// its own, the join summing each half-warp only; both launch forms.
TEST_F(DecodeKernelsGpu, TernaryGemvV2PlantedBugsAreCaught) {
  for (int version : {2, 3}) {
    launch::set_ternary_gemv_version(version);
    launch::set_decode_linear_mutant(launch::DecodeLinearMutant::ternary_last_unit_dropped);
    const std::size_t dropped = ternary_differences(false), dropped_joined = parts_differences(false);
    launch::set_decode_linear_mutant(launch::DecodeLinearMutant::ternary_v2_half_warp_join);
    const std::size_t half = ternary_differences(false), half_joined = parts_differences(false);
    launch::set_decode_linear_mutant(launch::DecodeLinearMutant::none);
    std::printf("planted in ternary_gemv v2%s: the last 64 codes dropped: %zu cells differ (joined: %zu); the "
                "half-warp join: %zu (joined: %zu)\n",
                version == 3 ? " (PDL)" : "", dropped, dropped_joined, half, half_joined);
    EXPECT_GT(dropped, 0u);
    EXPECT_GT(dropped_joined, 0u);
    EXPECT_GT(half, 0u);
    EXPECT_GT(half_joined, 0u);
    // And the clean kernel again after the mutants (nothing sticky).
    EXPECT_EQ(ternary_differences(true), 0u) << "v" << version << " after its mutants";
  }
  launch::set_ternary_gemv_version(0);
}

// The residual epilogue (o_proj / down_proj + the residual add in one launch)
// against BitLinear then ResidualAdd, every ternary_gemv form; differing cells
// over the shapes (2B4T o_proj and down_proj at 1, 8, 32 rows; ragged ones), sum
// apart from its operand and in place. The residual operand: −0 every 5th cell,
// −y (an exact +0), −y·(1 + 2^-23) (cancellation), large and small values.
std::size_t residual_differences(bool print) {
  const std::vector<Shape> shapes{{1, 2560, 2560}, {1, 6912, 2560}, {8, 2560, 2560}, {32, 6912, 2560},
                                  {3, 65, 17},     {17, 100, 5},    {2, 10000, 9}};
  std::size_t total = 0;
  std::uint64_t seed = 500;
  for (const Shape& s : shapes) {
    std::vector<float> x = uniform(s.N * s.K, 3.0, seed++), w = uniform(s.M * s.K, 0.1, seed++);
    x[0] = -0.0f;
    if (s.N > 2)
      for (std::size_t k = 0; k < s.K; ++k) x[2 * s.K + k] = k % 3 == 0 ? -0.0f : 0.0f;  // a zero row
    const std::vector<float> want_y = cpu_bitlinear(s, x, w), r = uniform(s.N * s.M, 2.0, seed++);
    std::vector<float> add(want_y.size());
    for (std::size_t i = 0; i < add.size(); ++i)
      add[i] = i % 5 == 0   ? -0.0f
               : i % 5 == 1 ? -want_y[i]
               : i % 5 == 2 ? -want_y[i] * 1.0000001f
               : i % 5 == 3 ? r[i] * 1e6f
                            : r[i];
    const ops::ElementwiseConfig ec{add.size()};
    const std::vector<float> want_sum =
        ops::ResidualAdd::forward(ec, ops::ResidualAdd::Inputs<float>{Tensor<float>({add.size()}, add),
                                                                      Tensor<float>({add.size()}, want_y)})
            .y.data;
    for (bool in_place : {false, true}) {
      std::vector<float> sum;
      const std::vector<float> y = gpu_bitlinear(s, x, w, &add, in_place, &sum);
      const std::size_t dy = differing_bits(y, want_y), ds = differing_bits(sum, want_sum);
      if (print && dy + ds != 0)
        ADD_FAILURE() << "ternary_gemv + residual N " << s.N << " K " << s.K << " M " << s.M
                      << (in_place ? " in place" : "") << ": " << dy << " cells of y and " << ds
                      << " of the sum differ from BitLinear then ResidualAdd";
      total += dy + ds;
    }
  }
  return total;
}

TEST_F(DecodeKernelsGpu, ResidualEpilogueEqualsBitLinearThenTheAdd) {
  for_every_ternary_form([](const std::string& form) { EXPECT_EQ(residual_differences(true), 0u) << form; });
}

// The planted bug: the residual's add contracted with the last product (one fma).
TEST_F(DecodeKernelsGpu, ResidualEpiloguePlantedBugIsCaught) {
  for (int version : {1, 2, 3}) {
    launch::set_ternary_gemv_version(version);
    launch::set_decode_linear_mutant(launch::DecodeLinearMutant::ternary_residual_contracted);
    const std::size_t d = residual_differences(false);
    launch::set_decode_linear_mutant(launch::DecodeLinearMutant::none);
    std::printf("planted in ternary_gemv %s: the residual's add contracted into an fma: %zu cells differ\n",
                version == 1 ? "v1" : version == 2 ? "v2" : "v2pdl", d);
    EXPECT_GT(d, 0u) << "v" << version;
    EXPECT_EQ(residual_differences(true), 0u) << "v" << version << " after its mutant";
  }
  launch::set_ternary_gemv_version(0);
}

TEST_F(DecodeKernelsGpu, ChainGemvEqualsTheCanonicalMatmul) { EXPECT_EQ(chain_differences(true), 0u); }

// The head's v2 kernels (LOCKSTEP_HEAD_GEMV=v2 | v2wide) through chain_gemv on every chain shape: the
// f16 ones with K % 8 == 0 take them, the rest the kernels as before.
TEST_F(DecodeKernelsGpu, ChainGemvWithTheHeadV2EqualsTheCanonicalMatmul) {
  for (int version : {2, 3}) {
    launch::set_head_gemv_version(version);
    EXPECT_EQ(chain_differences(true), 0u) << "head_gemv version " << version;
  }
  launch::set_head_gemv_version(0);
}

namespace {

// The 2B4T head: raw f16 weights (the tied F16 embedding's bits) with ±inf, NaN, ±0 and subnormals in a few
// rows, x with −0 (and, with specials, a NaN row and an inf), the bias optional; the CPU's cells widened.
struct HeadCase {
  std::size_t N, K, M;
  std::vector<float> x, b, want;
  std::vector<std::uint16_t> w16;
  cuda::DeviceBuffer<float> dx, db, dy;
  cuda::DeviceBuffer<std::uint16_t> dw;

  HeadCase(std::size_t n, std::size_t k, std::size_t m, bool bias, std::uint64_t seed)
      : N(n), K(k), M(m), dx(n * k), db(m), dy(n * m), dw(m * k) {
    x = uniform(N * K, 2.0, seed);
    x[0] = -0.0f;
    if (N > 1) x[K + 7] = std::numeric_limits<float>::quiet_NaN();
    if (N > 2) x[2 * K + 3] = std::numeric_limits<float>::infinity();
    ad::Rng rng(seed + 1);
    w16.resize(M * K);
    for (auto& h : w16) h = tensor::f32_to_f16(static_cast<float>(rng.uniform(-0.5, 0.5)));
    w16[1 * K + K - 1] = 0x7c00u;  // +inf
    w16[2 * K] = 0xfc00u;          // −inf
    w16[3 * K + K / 3] = 0x7e00u;  // NaN
    for (std::size_t i = 0; i < K; ++i) w16[4 * K + i] = i % 3 ? 0x8000u : 0x0000u;
    for (std::size_t i = 0; i < K; i += 2) w16[5 * K + i] = static_cast<std::uint16_t>(1u + i % 1000u);
    std::vector<float> wf(w16.size());
    for (std::size_t i = 0; i < w16.size(); ++i) wf[i] = tensor::f16_to_f32(w16[i]);
    want.resize(N * M);
    ops::matmul_xwt(N, M, K, x.data(), wf.data(), want.data());
    if (bias) {
      b = uniform(M, 1.0, seed + 2);
      for (std::size_t r = 0; r < N; ++r)
        for (std::size_t c = 0; c < M; ++c) want[r * M + c] = want[r * M + c] + b[c];
    }
    for (float& v : want) v = num::reduce::canonical_nan(v);
    dx.upload(x);
    dw.upload(w16);
    if (bias) db.upload(b);
  }
  const float* bias() const { return b.empty() ? nullptr : db.data(); }
  // The cells of the kernel chain_gemv picks (version: set_head_gemv_version's) or of v2 with `options`.
  std::size_t differences(int version, const launch::HeadGemvOptions* options = nullptr) {
    dy.assign(N * M, 12345.0f);
    launch::set_head_gemv_version(version);
    if (options) launch::head_gemv_v2(dw.data(), dx.data(), bias(), N, M, K, dy.data(), *options);
    else launch::chain_gemv(nullptr, dw.data(), dx.data(), bias(), N, M, K, dy.data());
    cuda::synchronize("head_gemv test");
    launch::set_head_gemv_version(0);
    return differing_bits(dy.download(), want);
  }
  // µs a call (calls back to back, the host waiting once).
  double micros(int version, int calls = 20) {
    launch::set_head_gemv_version(version);
    launch::chain_gemv(nullptr, dw.data(), dx.data(), bias(), N, M, K, dy.data());
    cuda::synchronize("head_gemv timing: warm-up");
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) launch::chain_gemv(nullptr, dw.data(), dx.data(), bias(), N, M, K, dy.data());
    cuda::synchronize("head_gemv timing");
    const auto t1 = std::chrono::steady_clock::now();
    launch::set_head_gemv_version(0);
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / calls;
  }
};

}  // namespace

// The 2B4T head (vocab 128256, hidden 2560) at 1, 8 and 32 rows: v1, v2 and v2wide = the CPU's cells, and
// each kernel's µs a call (657 MB of f16 a pass over the weights: the copy-rate floor ~160 µs).
TEST_F(DecodeKernelsGpu, HeadGemvV2AtThe2B4THead) {
  std::uint64_t seed = 900;
  for (std::size_t N : {1, 8, 32}) {
    HeadCase c(N, 2560, 128256, N == 8, seed += 10);
    for (int version : {1, 2, 3})
      EXPECT_EQ(c.differences(version), 0u) << "N " << N << ", head_gemv version " << version;
    const double v1 = c.micros(1), v2 = c.micros(2), v2wide = c.micros(3);
    std::printf("head 128256 x 2560, %zu rows: v1 %.1f us (%.0f GB/s), v2 %.1f us (%.0f GB/s), v2wide %.1f us "
                "(%.0f GB/s) a call\n",
                N, v1, 656.67e3 / v1, v2, 656.67e3 / v2, v2wide, 656.67e3 / v2wide);
  }
}

TEST_F(DecodeKernelsGpu, HeadGemvV2PlantedBugsAreCaught) {
  HeadCase c(8, 2560, 20000, true, 77);
  for (bool wide : {false, true}) {
    launch::HeadGemvOptions ok, mul_add, backwards, early;
    ok.wide = mul_add.wide = backwards.wide = early.wide = wide;
    mul_add.mul_add = true;
    backwards.k_descending = true;
    early.stage_early = true;
    EXPECT_EQ(c.differences(0, &ok), 0u) << "v2 as it is, wide " << wide;
    const std::size_t m = c.differences(0, &mul_add), k = c.differences(0, &backwards), e = c.differences(0, &early);
    std::printf("planted (head_gemv v2, wide %d): mul+add for fma: %zu cells differ; each tile's 8-k groups "
                "backwards: %zu; the wait one copy group short (a race: its stage read before it lands): %zu\n",
                wide, m, k, e);
    EXPECT_GT(m, 0u) << "the unfused product, wide " << wide;
    EXPECT_GT(k, 0u) << "the k groups backwards, wide " << wide;
  }
  // The chain mutant of decode_linear_launch.hpp reaches v2 through chain_gemv too.
  launch::set_decode_linear_mutant(launch::DecodeLinearMutant::chain_mul_add);
  const std::size_t d = c.differences(2);
  launch::set_decode_linear_mutant(launch::DecodeLinearMutant::none);
  EXPECT_GT(d, 0u) << "DecodeLinearMutant::chain_mul_add under LOCKSTEP_HEAD_GEMV=v2";
}

TEST_F(DecodeKernelsGpu, PlantedBugsAreCaught) {
  launch::set_decode_linear_mutant(launch::DecodeLinearMutant::ternary_last_unit_dropped);
  const std::size_t t = ternary_differences(false);
  const std::size_t tp = parts_differences(false);
  launch::set_decode_linear_mutant(launch::DecodeLinearMutant::chain_mul_add);
  const std::size_t c = chain_differences(false);
  launch::set_decode_linear_mutant(launch::DecodeLinearMutant::none);
  std::printf("planted: ternary_gemv dropping each row's last 64 codes: %zu cells differ (joined launches: %zu); "
              "chain_gemv with mul+add for fma: %zu cells differ\n",
              t, tp, c);
  EXPECT_GT(t, 0u) << "the ternary comparison did not see the dropped codes";
  EXPECT_GT(tp, 0u) << "the joined ternary comparison did not see the dropped codes";
  EXPECT_GT(c, 0u) << "the chain comparison did not see the unfused product";
}

struct AttnCase {
  std::size_t q_heads, kv_heads, head_dim, ctx, key_block;
  std::vector<std::int32_t> slot, pos;
};

// 32 rows of the 2B4T heads at ctx 512 over 32 slots, of lengths 1 .. 512 (every block count, on and off
// the 64-key blocks and the 32-key score chunks): the batch-32 decode pass's shape.
AttnCase batch32_case() {
  AttnCase t{20, 5, 128, 512, 64, {}, {}};
  for (std::int32_t r = 0; r < 32; ++r) {
    t.slot.push_back(31 - r);
    t.pos.push_back(r == 31 ? 511 : (r * 37 + 11) % 512);
  }
  t.pos[0] = 0;
  t.pos[1] = 63;
  t.pos[2] = 64;
  return t;
}

// Cells of the device's cached attention (the kernel decode_attention_version
// picks) that differ from the spec's, over every case.
std::size_t attention_differences(bool print) {
  const std::vector<AttnCase> cases{
      {20, 5, 128, 200, 64, {0, 1, 1}, {0, 63, 150}},  // 2B4T heads: 1, 1 and 3 key blocks
      {4, 2, 6, 100, 64, {1, 0}, {64, 99}},            // head_dim % 4 != 0: scalar copies
      {2, 2, 8, 40, 7, {0}, {20}},                     // an odd key block: scalar copies
      {2, 1, 256, 70, 64, {0, 1}, {69, 5}},            // two dims a thread, staged
      {1, 1, 320, 70, 64, {1}, {69}},                  // past the staged blocks' shared memory
      {20, 5, 128, 512, 64, {1}, {511}},               // 2B4T at ctx 512, batch 1: 8 whole blocks
      {20, 5, 128, 512, 64, {3, 0, 7, 1, 2, 6, 5, 4}, {511, 0, 64, 300, 63, 129, 7, 450}},  // batch 8
      batch32_case(),                                  // batch 32
      {16, 1, 100, 130, 5, {0, 1}, {129, 33}},         // 16 query heads a kv head, 4 d slices, key block 5
      {6, 2, 33, 90, 100, {1, 0}, {89, 40}},           // groups of 3, a 33-wide head, key block > the score chunk
  };
  std::size_t total = 0;
  std::uint64_t seed = 500;
  for (const AttnCase& t : cases) {
    std::size_t slots = 2;
    for (std::int32_t x : t.slot) slots = std::max(slots, static_cast<std::size_t>(x) + 1);
    const std::size_t rows = t.slot.size(), kvd = t.kv_heads * t.head_dim, ldq = t.q_heads * t.head_dim;
    const std::vector<float> q = uniform(rows * ldq, 2.0, seed++), k = uniform(slots * t.ctx * kvd, 2.0, seed++),
                             v = uniform(slots * t.ctx * kvd, 2.0, seed++);
    ops::CachedAttention::Config c;
    c.rows = rows;
    c.q_heads = t.q_heads;
    c.kv_heads = t.kv_heads;
    c.head_dim = t.head_dim;
    c.slots = slots;
    c.ctx = t.ctx;
    c.key_block = t.key_block;
    std::vector<float> want(rows * ldq);
    ops::CachedAttention::forward(c, ops::CachedAttention::Args<float>{q.data(), ldq, k.data(), v.data(),
                                                                        t.slot.data(), t.pos.data(), want.data()});
    cuda::DeviceBuffer<float> dq(q.size()), dk(k.size()), dv(v.size()), dout(want.size());
    cuda::DeviceBuffer<std::int32_t> dslot(rows), dpos(rows);
    dq.upload(q);
    dk.upload(k);
    dv.upload(v);
    dslot.upload(t.slot);
    dpos.upload(t.pos);
    launch::CachedAttentionShape sh;
    sh.rows = rows;
    sh.q_heads = t.q_heads;
    sh.kv_heads = t.kv_heads;
    sh.head_dim = t.head_dim;
    sh.ctx = t.ctx;
    sh.key_block = t.key_block;
    sh.ldq = ldq;
    sh.scale = ops::Attention::scale_of<float>(c.attention());
    launch::cached_attention(sh, dq.data(), dk.data(), dv.data(), dslot.data(), dpos.data(), dout.data());
    cuda::synchronize("cached_attention test");
    const std::size_t d = differing_bits(dout.download(), want);
    if (print && d != 0)
      ADD_FAILURE() << "cached_attention q_heads " << t.q_heads << " kv_heads " << t.kv_heads << " head_dim "
                    << t.head_dim << " key_block " << t.key_block << ": " << d
                    << " cells differ from ops::CachedAttention::forward";
    total += d;
  }
  return total;
}

// v1 (decode.cu, a CTA per (row, head)), v2 (decode_attention_v2.cu: scores, then fold), v2pdl (the
// fold a programmatic dependent launch) and v3 (5: the scores computed by the fold's CTAs, one launch).
TEST_F(DecodeKernelsGpu, CachedAttentionEqualsTheSpec) {
  for (int version : {1, 2, 3, launch::kDecodeAttentionV3}) {
    launch::set_decode_attention_version(version);
    EXPECT_EQ(attention_differences(true), 0u) << "cached attention v" << version;
    cuda::set_mutant(cuda::Mutant::attention_drop_scale);
    const std::size_t planted = attention_differences(false);
    cuda::set_mutant(cuda::Mutant::none);
    std::printf("planted: cached_attention v%d without its scale: %zu cells differ\n", version, planted);
    EXPECT_GT(planted, 0u) << "the attention comparison did not see the dropped scale (v" << version << ")";
  }
  launch::set_decode_attention_version(0);
}

// v2's and v3's own planted bugs (DecodeAttentionMutant): a block's maximum from the next block, the acc chains
// over each block's keys descending (the fold they share); v3's score chains over d descending.
TEST_F(DecodeKernelsGpu, CachedAttentionV2PlantedBugsAreCaught) {
  using M = launch::DecodeAttentionMutant;
  for (int version : {2, 3, launch::kDecodeAttentionV3}) {
    launch::set_decode_attention_version(version);
    std::vector<M> mutants{M::max_from_next_block, M::acc_keys_reversed};
    if (version == launch::kDecodeAttentionV3) mutants.push_back(M::score_d_descending);
    for (const M m : mutants) {
      launch::set_decode_attention_mutant(m);
      const std::size_t planted = attention_differences(false);
      launch::set_decode_attention_mutant(M::none);
      const char* what = m == M::max_from_next_block ? "a block's maximum from the next block"
                         : m == M::acc_keys_reversed ? "the acc chains descending"
                                                     : "the score chains over d descending";
      std::printf("planted: cached_attention %s, %s: %zu cells differ\n",
                  version == 3 ? "v2pdl" : version == 2 ? "v2" : "v3", what, planted);
      EXPECT_GT(planted, 0u) << "the attention comparison did not see " << what << " (version " << version << ")";
    }
    EXPECT_EQ(attention_differences(true), 0u) << "version " << version << " after its mutants were cleared";
  }
  launch::set_decode_attention_version(0);
}

TEST_F(DecodeKernelsGpu, RmsNormQuantizeEqualsTheSpecAndItsMutantIsCaught) {
  const auto cases = cuda::gate::cases_of({"rmsnorm_quantize_i8"});
  ASSERT_GT(cases.size(), 0u);
  const auto count_failed = [&cases] {
    std::size_t failed = 0;
    for (const auto& o : cuda::gate::run_gates(cases, {}))
      if (!o.difference.empty()) {
        if (failed++ == 0) std::printf("  first: %s on %s%s: %s\n", o.kernel.c_str(), o.shape.c_str(),
                                       o.poisoned ? " (dirty)" : "", o.difference.c_str());
      }
    return failed;
  };
  EXPECT_EQ(count_failed(), 0u) << "the clean kernel fails its gate cases";
  cuda::set_mutant(cuda::Mutant::norm_quantize_stale_row);
  const std::size_t caught = count_failed();
  cuda::set_mutant(cuda::Mutant::none);
  std::printf("planted: rmsnorm_quantize_i8 coding the staged x, not y: %zu of %zu runs rejected\n", caught,
              2 * cases.size());
  EXPECT_GT(caught, 0u);
}

}  // namespace

namespace {

// ReLU²·up + the FFN sub-norm + its codes in one launch (act_norm.cu) against
// ops::ReluSqMul::forward, ops::RmsNorm::forward and ops::quantize_rows: h, y,
// rstd, codes and steps. Differing values over the shapes (the 2B4T FFN width
// 6912 at 1, 8, 32 rows; 8192; off the 16-byte path; past one chunk); gates
// with −0, +0, negative rows (h = ±0).
std::size_t act_norm_differences(bool print, const launch::ActNormOptions& options) {
  struct S {
    std::size_t rows, dim, offset;
  };
  const std::vector<S> shapes{{1, 6912, 0}, {8, 6912, 0}, {32, 6912, 0}, {2, 8192, 0},
                              {3, 6913, 0}, {5, 4097, 0}, {4, 2560, 1},  {1, 7, 0}};
  std::size_t total = 0;
  std::uint64_t seed = 900;
  for (const S& s : shapes) {
    const std::size_t n = s.rows * s.dim;
    std::vector<float> gate = uniform(n, 3.0, seed++), up = uniform(n, 2.0, seed++), w = uniform(s.dim, 1.0, seed++);
    for (std::size_t i = 0; i < n; i += 11) gate[i] = -0.0f;
    for (std::size_t i = 1; i < n; i += 11) gate[i] = 0.0f;
    for (std::size_t i = 2; i < n; i += 11) up[i] = -0.0f;
    if (s.rows > 1)
      for (std::size_t k = 0; k < s.dim; ++k) gate[s.dim + k] = -std::fabs(gate[s.dim + k]);
    const ops::ElementwiseConfig ec{n};
    const std::vector<float> h =
        ops::ReluSqMul::forward(ec, ops::ReluSqMul::Inputs<float>{Tensor<float>({n}, gate), Tensor<float>({n}, up)})
            .y.data;
    const auto o = ops::RmsNorm::forward(ops::NormConfig{s.rows, s.dim, 1e-5},
                                         ops::RmsNorm::Inputs<float>{Tensor<float>({s.rows, s.dim}, h),
                                                                     Tensor<float>({s.dim}, w)});
    const ops::RowCodes<float> r =
        ops::quantize_rows(o.y.data.data(), s.rows, s.dim, static_cast<float>(ops::BitLinear::kActFloor));
    std::vector<float> gpad(s.offset, 0.0f), upad(s.offset, 0.0f);
    gpad.insert(gpad.end(), gate.begin(), gate.end());
    upad.insert(upad.end(), up.begin(), up.end());
    cuda::DeviceBuffer<float> dg(gpad.size()), du(upad.size()), dh(s.offset + n), dw(s.dim), dy(n), drstd(s.rows),
        dstep(s.rows);
    cuda::DeviceBuffer<std::int8_t> dq(n);
    dg.upload(gpad);
    du.upload(upad);
    dw.upload(w);
    launch::relu2mul_rmsnorm_quantize_i8(s.rows, s.dim, static_cast<float>(1e-5), dg.data() + s.offset,
                                         du.data() + s.offset, dh.data() + s.offset, dw.data(), dy.data(),
                                         drstd.data(), static_cast<float>(ops::BitLinear::kActFloor), dq.data(),
                                         dstep.data(), options);
    cuda::synchronize("relu2mul_rmsnorm_quantize_i8 test");
    std::vector<float> got_h = dh.download();
    got_h.erase(got_h.begin(), got_h.begin() + static_cast<long>(s.offset));
    const std::vector<std::int8_t> got_q = dq.download();
    std::size_t dcodes = 0;
    for (std::size_t i = 0; i < n; ++i) dcodes += got_q[i] != r.q[i] ? 1 : 0;
    const std::size_t d = differing_bits(got_h, h) + differing_bits(dy.download(), o.y.data) +
                          differing_bits(drstd.download(), o.rstd.data) + differing_bits(dstep.download(), r.step) +
                          dcodes;
    if (print && d != 0)
      ADD_FAILURE() << "relu2mul_rmsnorm_quantize_i8 rows " << s.rows << " dim " << s.dim << " offset " << s.offset
                    << ": " << d << " values differ from ReluSqMul, RmsNorm, quantize_rows";
    total += d;
  }
  return total;
}

}  // namespace

TEST_F(DecodeKernelsGpu, ActNormEqualsTheSpecAndItsMutantIsCaught) {
  EXPECT_EQ(act_norm_differences(true, {}), 0u);
  launch::ActNormOptions unclamped;
  unclamped.gate_unclamped = true;
  const std::size_t planted = act_norm_differences(false, unclamped);
  std::printf("planted: relu2mul_rmsnorm_quantize_i8 without ReLU's clamp at 0: %zu values differ\n", planted);
  EXPECT_GT(planted, 0u) << "the comparison did not see the unclamped gate";
  EXPECT_EQ(act_norm_differences(true, {}), 0u) << "after the mutant";
}

namespace {

// RoPE of q and k with the K/V cache writes in one launch (rope_store.cu)
// against the launches it replaces on the device (rope_rows of q and of k,
// store_rows_at of k and v: decode.cu's, whose bits the decode tests hold to
// the CPU's): q, k and both caches. The 2B4T heads and small GQA ones, both
// layouts, 1 to 32 rows over 4 slots. Differing values.
std::size_t rope_store_differences(bool print, const launch::RopeStoreOptions& options) {
  struct H {
    std::size_t rows, q_heads, kv_heads, head_dim;
    bool interleaved;
  };
  const std::size_t slots = 4, ctx = 40;
  std::size_t total = 0;
  std::uint64_t seed = 1200;
  for (const H& h : {H{1, 20, 5, 128, false}, H{8, 20, 5, 128, false}, H{32, 20, 5, 128, true}, H{3, 4, 2, 6, true},
                     H{5, 2, 1, 64, false}}) {
    const std::size_t qw = h.q_heads * h.head_dim, kw = h.kv_heads * h.head_dim, ldv = kw + 5;
    const std::vector<float> q = uniform(h.rows * qw, 2.0, seed++), k = uniform(h.rows * kw, 2.0, seed++),
                             v = uniform(h.rows * ldv, 2.0, seed++);
    std::vector<std::int32_t> rows(2 * h.rows);  // slots, then positions: distinct (slot, pos) a row
    for (std::size_t r = 0; r < h.rows; ++r) {
      rows[r] = static_cast<std::int32_t>(r % slots);
      rows[h.rows + r] = static_cast<std::int32_t>(r == 0 ? 0 : (7 * r + 1) % ctx);
    }
    const ops::Rope::Config tc{1, ctx, h.q_heads, h.head_dim, 10000.0,
                               h.interleaved ? ops::RopeLayout::interleaved : ops::RopeLayout::rotate_half, 0};
    const ops::Rope::Table<float> tab = ops::Rope::table<float>(tc);
    std::vector<float> table(tab.cos);
    table.insert(table.end(), tab.sin.begin(), tab.sin.end());
    cuda::DeviceBuffer<float> dtab(table.size()), dq(q.size()), dk(k.size()), dv(v.size());
    cuda::DeviceBuffer<std::int32_t> drows(rows.size());
    dtab.upload(table);
    dq.upload(q);
    dk.upload(k);
    dv.upload(v);
    drows.upload(rows);
    const std::vector<float> poison(slots * ctx * kw, 7.0f);
    std::vector<float> out[2][4];  // [path][q, k, k cache, v cache]
    for (int fused : {0, 1}) {
      cuda::DeviceBuffer<float> qy(q.size()), ky(k.size()), kc(poison.size()), vc(poison.size());
      kc.upload(poison);
      vc.upload(poison);
      const std::int32_t* slot = drows.data();
      const std::int32_t* pos = drows.data() + h.rows;
      if (fused) {
        const launch::RopeStoreShape s{.rows = h.rows, .q_heads = h.q_heads, .kv_heads = h.kv_heads,
                                       .head_dim = h.head_dim, .interleaved = h.interleaved, .tab_seq = ctx,
                                       .ldv = ldv, .ctx = ctx};
        launch::rope_store_rows(s, dtab.data(), slot, pos, dq.data(), qy.data(), dk.data(), ky.data(), dv.data(),
                                kc.data(), vc.data(), options);
      } else {
        launch::rope_rows(h.rows, h.q_heads, h.head_dim, h.interleaved, ctx, dtab.data(), pos, dq.data(), qy.data());
        launch::rope_rows(h.rows, h.kv_heads, h.head_dim, h.interleaved, ctx, dtab.data(), pos, dk.data(), ky.data());
        launch::store_rows_at(ky.data(), kw, h.rows, kw, slot, pos, ctx, kc.data());
        launch::store_rows_at(dv.data(), ldv, h.rows, kw, slot, pos, ctx, vc.data());
      }
      cuda::synchronize("rope_store_rows test");
      out[fused][0] = qy.download();
      out[fused][1] = ky.download();
      out[fused][2] = kc.download();
      out[fused][3] = vc.download();
    }
    std::size_t d = 0;
    for (int i = 0; i < 4; ++i) d += differing_bits(out[1][i], out[0][i]);
    if (print && d != 0)
      ADD_FAILURE() << "rope_store_rows rows " << h.rows << " heads " << h.q_heads << "/" << h.kv_heads << " dim "
                    << h.head_dim << ": " << d << " values differ from rope_rows + store_rows_at";
    total += d;
  }
  return total;
}

}  // namespace

TEST_F(DecodeKernelsGpu, RopeStoreEqualsRopeRowsAndTheCacheWrites) {
  EXPECT_EQ(rope_store_differences(true, {}), 0u);
  launch::RopeStoreOptions unrotated;
  unrotated.cache_unrotated = true;
  const std::size_t planted = rope_store_differences(false, unrotated);
  std::printf("planted: rope_store_rows writing k to the cache before its rotation: %zu values differ\n", planted);
  EXPECT_GT(planted, 0u) << "the comparison did not see the unrotated cache";
}

namespace {

// The norm in the GEMV's prologue (ternary_gemv_parts_norm) on the device
// against the spec: RmsNorm of x, the codes of its y, each part's BitLinear of
// y, the residual add after part 0 where `residual`. Differing values (cells,
// sums, y, rstd, codes, steps) over the shapes: 2B4T's joined q/k/v (K 2560,
// M 2560 + 640 + 640), gate/up (M 6912 + 6912), o_proj + residual, down_proj's
// width (K 6912), ragged K, x off 16 bytes; row 1 of 2 all ±0 (the floor
// step) or large (1e17: x² near 1e34).
std::size_t norm_gemv_differences(bool print) {
  struct S {
    std::size_t N, K;
    std::vector<std::size_t> Ms;
    bool residual;
    std::size_t offset;
    int last;  // row N - 1: 0 ordinary, 1 ±0, 2 large
  };
  const std::vector<S> shapes{{1, 2560, {2560, 640, 640}, false, 0, 0}, {2, 2560, {2560, 640, 640}, false, 0, 1},
                              {1, 2560, {6912, 6912}, false, 0, 0},     {2, 2560, {6912, 6912}, false, 0, 2},
                              {1, 2560, {2560}, true, 0, 0},            {2, 2560, {2560}, true, 0, 0},
                              {1, 6912, {2560}, true, 0, 0},            {2, 100, {7, 33}, false, 0, 1},
                              {1, 2560, {640}, false, 1, 0},            {2, 4097, {300}, true, 1, 2}};
  std::size_t total = 0;
  std::uint64_t seed = 1100;
  for (const S& s : shapes) {
    const std::size_t n = s.N * s.K;
    std::vector<float> x = uniform(n, 3.0, seed++), g = uniform(s.K, 1.5, seed++);
    for (std::size_t i = 0; i < n; i += 13) x[i] = -0.0f;
    for (std::size_t k = 0; k < s.K && s.last != 0; ++k) {
      float& v = x[(s.N - 1) * s.K + k];
      v = s.last == 1 ? (k % 3 == 0 ? -0.0f : 0.0f) : v * 1e17f;
    }
    const auto o = ops::RmsNorm::forward(ops::NormConfig{s.N, s.K, 1e-5},
                                         ops::RmsNorm::Inputs<float>{Tensor<float>({s.N, s.K}, x),
                                                                     Tensor<float>({s.K}, g)});
    const ops::RowCodes<float> r =
        ops::quantize_rows(o.y.data.data(), s.N, s.K, static_cast<float>(ops::BitLinear::kActFloor));
    std::vector<float> xpad(s.offset, 0.0f);
    xpad.insert(xpad.end(), x.begin(), x.end());
    cuda::DeviceBuffer<float> dx(xpad.size()), dg(s.K), dy(n), drstd(s.N), dstep(s.N);
    cuda::DeviceBuffer<std::int8_t> dq(n);
    dx.upload(xpad);
    dg.upload(g);
    std::vector<cuda::DeviceBuffer<float>> params(s.Ms.size()), ys(s.Ms.size());
    std::vector<cuda::DeviceBuffer<std::uint32_t>> words(s.Ms.size());
    std::vector<launch::TernaryPart> parts;
    std::vector<std::vector<float>> want;
    for (std::size_t p = 0; p < s.Ms.size(); ++p) {
      const std::size_t m = s.Ms[p] * s.K;
      const std::vector<float> w = uniform(m, 0.1, seed++);
      want.push_back(cpu_bitlinear({s.N, s.K, s.Ms[p]}, o.y.data, w));
      cuda::DeviceBuffer<float> dw(m), codes(m), dequant(m), scratch(launch::ternary_scratch(m));
      dw.upload(w);
      params[p].resize(2);
      launch::ternary_quantize(dw.data(), m, static_cast<float>(m), static_cast<float>(1e-5), codes.data(),
                               dequant.data(), params[p].data(), scratch.data());
      words[p].resize(s.Ms[p] * 4 * launch::ternary_units(s.K));
      launch::ternary_pack(codes.data(), s.Ms[p], s.K, words[p].data());
      cuda::synchronize("norm in the prologue test: packing");
      ys[p].resize(s.N * s.Ms[p]);
      parts.push_back({words[p].data(), s.Ms[p], params[p].data(), ys[p].data()});
    }
    std::vector<float> add, want_sum;
    cuda::DeviceBuffer<float> dadd(s.residual ? want[0].size() : 0), dsum(s.residual ? want[0].size() : 0);
    if (s.residual) {
      add = uniform(want[0].size(), 2.0, seed++);
      for (std::size_t i = 0; i < add.size(); i += 5) add[i] = -0.0f;
      for (std::size_t i = 1; i < add.size(); i += 5) add[i] = -want[0][i];
      const ops::ElementwiseConfig ec{add.size()};
      want_sum = ops::ResidualAdd::forward(ec, ops::ResidualAdd::Inputs<float>{Tensor<float>({add.size()}, add),
                                                                               Tensor<float>({add.size()}, want[0])})
                     .y.data;
      dadd.upload(add);
      parts[0].add = dadd.data();
      parts[0].sum = dsum.data();
    }
    launch::NormPrologue np;
    np.x = dx.data() + s.offset;
    np.w = dg.data();
    np.eps = static_cast<float>(1e-5);
    np.floor_x = static_cast<float>(ops::BitLinear::kActFloor);
    np.y = dy.data();
    np.rstd = drstd.data();
    np.codes = dq.data();
    np.step = dstep.data();
    launch::ternary_gemv_parts_norm(parts.data(), parts.size(), s.K, np, s.N);
    cuda::synchronize("norm in the prologue test");
    std::size_t d = 0;
    for (std::size_t p = 0; p < s.Ms.size(); ++p) d += differing_bits(ys[p].download(), want[p]);
    if (s.residual) d += differing_bits(dsum.download(), want_sum);
    const std::vector<std::int8_t> got_q = dq.download();
    for (std::size_t i = 0; i < n; ++i) d += got_q[i] != r.q[i] ? 1 : 0;
    d += differing_bits(dy.download(), o.y.data) + differing_bits(drstd.download(), o.rstd.data) +
         differing_bits(dstep.download(), r.step);
    if (print && d != 0)
      ADD_FAILURE() << "ternary_gemv_parts_norm N " << s.N << " K " << s.K << " parts " << s.Ms.size()
                    << (s.residual ? " + residual" : "") << " offset " << s.offset << ": " << d
                    << " values differ from RmsNorm, quantize_rows, BitLinear";
    total += d;
  }
  return total;
}

}  // namespace

TEST_F(DecodeKernelsGpu, NormInTheGemvPrologueEqualsTheSpecAndItsMutantIsCaught) {
  for (int version : {2, 3}) {  // (v1's setting launches v2 too, without PDL)
    launch::set_ternary_gemv_version(version);
    EXPECT_EQ(norm_gemv_differences(true), 0u) << "v" << version;
    cuda::set_mutant(cuda::Mutant::norm_quantize_stale_row);
    const std::size_t planted = norm_gemv_differences(false);
    cuda::set_mutant(cuda::Mutant::none);
    std::printf("planted in the norm prologue (v%d): the codes of x, not of y: %zu values differ\n", version, planted);
    EXPECT_GT(planted, 0u) << "the comparison did not see the codes of x (v" << version << ")";
    EXPECT_EQ(norm_gemv_differences(true), 0u) << "v" << version << " after its mutant";
  }
  launch::set_ternary_gemv_version(0);
  std::vector<float> v(3 * 64);
  std::vector<std::int8_t> q(3 * 64);
  launch::NormPrologue np{v.data(), v.data(), 1e-5f, 1e-5f, v.data(), v.data(), q.data(), v.data()};
  launch::TernaryPart part{nullptr, 4, nullptr, nullptr};
  EXPECT_THROW(launch::ternary_gemv_parts_norm(&part, 1, 64, np, 3), std::invalid_argument) << "3 rows";
}
