// The int8 GEMMs (backend/cuda/int8_gemm.hpp): every implementation (DP4A,
// IMMA 128x128 and 128x256, cuBLASLt where its requirements hold) gives the
// int32 of ops::int8_matmul_nt, the CPU's scalar integer product, on random
// ragged shapes (fresh every run: LOCKSTEP_SEED reproduces one) and, at GPT-2
// sizes too large for the CPU, the dp4a kernel's cells; the dispatcher too.
// The gates (gate_int8.cpp) admit every clean implementation and reject each
// int8 mutant (mutant.hpp), and a rejected implementation is never chosen.
// K > 131071 is refused with the shape in the message.
#include <cmath>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/int8_gemm.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/ops.hpp"
#include "lockstep/backend/cuda/probe.hpp"
#include "lockstep/ops/quant.hpp"
#include "lockstep/ops/units.hpp"

namespace {

namespace lc = lockstep::cuda;
namespace ll = lockstep::cuda::launch;
using lc::Int8Impl;

#define REQUIRE_DEVICE()                            \
  do {                                              \
    std::string why;                                \
    if (!lc::available(&why)) GTEST_SKIP() << why;  \
  } while (0)

constexpr Int8Impl kAll[] = {Int8Impl::dp4a, Int8Impl::imma_128x128, Int8Impl::imma_128x256, Int8Impl::cublaslt};

std::vector<std::int8_t> codes(lockstep::ad::Rng& rng, std::size_t n) {
  std::vector<std::int8_t> q(n);
  for (auto& v : q) {
    const std::size_t u = rng.below(8);
    v = static_cast<std::int8_t>(u == 0 ? 127 : u == 1 ? -127 : static_cast<int>(rng.below(255)) - 127);
  }
  return q;
}

// "" or the first differing cell, with both values.
std::string first_difference(const std::vector<std::int32_t>& want, const std::vector<std::int32_t>& got,
                             std::size_t M) {
  if (want.size() != got.size()) return "sizes differ";
  for (std::size_t i = 0; i < want.size(); ++i)
    if (want[i] != got[i])
      return "C[" + std::to_string(i) + "] (row " + std::to_string(i / M) + ", col " + std::to_string(i % M) +
             "): cpu " + std::to_string(want[i]) + " vs cuda " + std::to_string(got[i]);
  return "";
}

struct Operands {
  std::vector<std::int8_t> a, b;
  lc::DeviceBuffer<std::int8_t> da, db;
  lc::DeviceBuffer<std::int32_t> dc;
  Operands(lockstep::ad::Rng& rng, std::size_t N, std::size_t M, std::size_t K)
      : a(codes(rng, N * K)), b(codes(rng, M * K)) {
    da.resize(a.size() + 16);
    db.resize(b.size() + 16);
    if (!a.empty()) lc::copy_to_device(da.data(), a.data(), a.size());
    if (!b.empty()) lc::copy_to_device(db.data(), b.data(), b.size());
    dc.resize(N * M);
    lc::fill_words(dc.data(), 0x7FC0DEADu, N * M);
  }
};

TEST(CudaInt8Gemm, EveryImplementationEqualsTheCpuOnRandomRaggedShapes) {
  REQUIRE_DEVICE();
  const std::uint64_t seed = lockstep::ad::seed_from_env();
  std::printf("LOCKSTEP_SEED=%llu\n", static_cast<unsigned long long>(seed));
  lockstep::ad::Rng rng(seed);
  int compared[4] = {0, 0, 0, 0}, refused = 0;
  for (int trial = 0; trial < 24; ++trial) {
    std::size_t N = 1 + rng.below(300), M = 1 + rng.below(300), K = rng.below(1500);
    if (trial % 3 == 0) {  // shapes cuBLASLt and the 16-byte loads take
      M = (M + 3) / 4 * 4;
      K = (K / 16 + 1) * 16;
    }
    Operands o(rng, N, M, K);
    const auto want = lockstep::ops::int8_matmul_nt(o.a, o.b, N, M, K);
    for (const Int8Impl impl : kAll) {
      lc::fill_words(o.dc.data(), 0x7FC0DEADu, N * M);
      const std::string why = lc::int8_gemm_nt_with(impl, o.da.data(), o.db.data(), o.dc.data(), N, M, K);
      if (!why.empty()) {
        // Only cuBLASLt may decline, and only where its requirement fails.
        EXPECT_EQ(impl, Int8Impl::cublaslt) << why;
        EXPECT_NE(std::string(ll::int8_cublaslt_requirement(o.da.data(), o.db.data(), o.dc.data(), N, M, K)), "")
            << "cuBLASLt declined N " << N << " M " << M << " K " << K << " though its requirements hold: " << why;
        ++refused;
        continue;
      }
      lc::synchronize("int8 test");
      EXPECT_EQ(first_difference(want, o.dc.download(), M), "")
          << lc::int8_impl_name(impl) << " on N " << N << " M " << M << " K " << K << " (seed " << seed << ")";
      ++compared[static_cast<int>(impl)];
    }
  }
  std::printf("compared with the CPU: dp4a %d, imma 128x128 %d, imma 128x256 %d, cublasLt %d shapes (%d declined)\n",
              compared[0], compared[1], compared[2], compared[3], refused);
  EXPECT_GE(compared[3], 8) << "cuBLASLt ran on fewer than the 8 shapes its requirements admit";
}

// At GPT-2 124M sizes (too large for the CPU reference in a test), every
// implementation and the dispatcher give the dp4a kernel's cells, which the
// test above ties to the CPU.
TEST(CudaInt8Gemm, LargeShapesAgreeWithDp4a) {
  REQUIRE_DEVICE();
  lockstep::ad::Rng rng(7);
  struct S {
    std::size_t N, M, K;
  };
  for (const S s : {S{2048, 2304, 768}, S{4096, 768, 3072}, S{768, 768, 16384}, S{1000, 3000, 767}}) {
    Operands o(rng, s.N, s.M, s.K);
    lc::DeviceBuffer<std::int32_t> ref(s.N * s.M);
    ASSERT_EQ(lc::int8_gemm_nt_with(Int8Impl::dp4a, o.da.data(), o.db.data(), ref.data(), s.N, s.M, s.K), "");
    for (const Int8Impl impl : kAll) {
      lc::fill_words(o.dc.data(), 0x7FC0DEADu, s.N * s.M);
      if (!lc::int8_gemm_nt_with(impl, o.da.data(), o.db.data(), o.dc.data(), s.N, s.M, s.K).empty()) continue;
      const std::size_t at = ll::int32_first_difference(ref.data(), o.dc.data(), s.N * s.M);
      EXPECT_EQ(at, s.N * s.M) << lc::int8_impl_name(impl) << " differs from dp4a on N " << s.N << " M " << s.M
                               << " K " << s.K << " first at cell " << at;
    }
    lc::fill_words(o.dc.data(), 0x7FC0DEADu, s.N * s.M);
    lc::int8_gemm_nt(o.da.data(), o.db.data(), o.dc.data(), s.N, s.M, s.K);
    EXPECT_EQ(ll::int32_first_difference(ref.data(), o.dc.data(), s.N * s.M), s.N * s.M)
        << "the dispatcher differs on N " << s.N << " M " << s.M << " K " << s.K;
  }
}

TEST(CudaInt8Gemm, KBeyondTheInt32BoundIsRefusedNamingTheShape) {
  // Checked before any device work: runs without a GPU too.
  try {
    lc::int8_gemm_nt(nullptr, nullptr, nullptr, 3, 5, lockstep::ops::kMaxQuantK + 1);
    FAIL() << "K = 131072 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("N 3 M 5 K 131072"), std::string::npos) << e.what();
  }
  for (const Int8Impl impl : kAll)
    EXPECT_THROW(lc::int8_gemm_nt_with(impl, nullptr, nullptr, nullptr, 1, 1, 200000), std::invalid_argument)
        << lc::int8_impl_name(impl);
}

TEST(CudaInt8Gemm, GatesAdmitEveryImplementationAndTheRaceReports) {
  REQUIRE_DEVICE();
  lc::int8_selection_reset();
  const auto outcomes = lc::gate::run_gates(lc::gate::int8_cases(), {});
  for (const auto& o : outcomes)
    EXPECT_EQ(o.difference, "") << o.kernel << " on " << o.shape << (o.poisoned ? " (dirty pass)" : "");
  const lc::Int8Selection& s = lc::int8_selection();
  for (const Int8Impl impl : kAll)
    EXPECT_TRUE(s.admitted[static_cast<int>(impl)]) << lc::int8_impl_name(impl) << ": " << s.refused[static_cast<int>(impl)];
  std::printf("%zu int8 gate outcomes; %s\n", outcomes.size(), s.report.c_str());
  for (int c = 0; c < lc::kInt8Classes; ++c) {
    std::printf("  %-16s", std::string(lc::int8_class_name(static_cast<lc::Int8Class>(c))).c_str());
    for (int i = 0; i < lc::kInt8Impls; ++i)
      std::printf("  %s %.0f", std::string(lc::int8_impl_name(static_cast<Int8Impl>(i))).c_str(), s.tops[c][i]);
    std::printf(" TOPS\n");
    EXPECT_TRUE(lc::int8_is_own(s.own[c]));
  }
  EXPECT_EQ(s.report.rfind("int8 GEMM (CUDA):", 0), 0u) << s.report;
}

// The int8 unit linear (ops/units.hpp) through the gate driver: forward,
// float STE and unit backward, = cpu::OpKernels bit for bit, under the race's
// choice and under each int8 implementation forced (the " int8 ..." variants).
TEST(CudaInt8Gemm, TheInt8LinearOpPassesItsGatesUnderEveryImplementation) {
  REQUIRE_DEVICE();
  lc::int8_selection_reset();
  const auto cases = lc::gate::cases_of({"int8_linear"});
  ASSERT_FALSE(cases.empty());
  std::size_t forced[4] = {0, 0, 0, 0};
  for (const auto& c : cases)
    for (int i = 0; i < lc::kInt8Impls; ++i)
      forced[i] += c.shape.find(" int8 " + std::string(lc::int8_impl_name(static_cast<Int8Impl>(i)))) !=
                   std::string::npos;
  for (int i = 0; i < lc::kInt8Impls; ++i) EXPECT_GT(forced[i], 0u) << lc::int8_impl_name(static_cast<Int8Impl>(i));
  const auto outcomes = lc::gate::run_gates(cases, {});
  std::size_t failed = 0;
  for (const auto& o : outcomes) {
    failed += !o.difference.empty();
    EXPECT_EQ(o.difference, "") << o.kernel << " on " << o.shape << (o.poisoned ? " (dirty pass)" : "");
  }
  std::printf("int8_linear: %zu cases (forced dp4a %zu, imma128 %zu, imma256 %zu, cublasLt %zu), %zu outcomes, "
              "%zu differ\n",
              cases.size(), forced[0], forced[1], forced[2], forced[3], outcomes.size(), failed);
}

// Values the gates do not draw: NaN and ±inf in x, W and dy, at the edges of
// the column quantizer's 64-row chunks (its fold joined across chunks must
// end where the CPU's row-order fold ends) and of the rows. The CUDA kernels
// equal cpu::OpKernels bit for bit there too: forward, float STE and unit
// backward.
TEST(CudaInt8Gemm, TheInt8LinearKernelsEqualTheCpuOnNanAndInf) {
  REQUIRE_DEVICE();
  namespace lo = lockstep::ops;
  lockstep::ad::Rng rng(11);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const bool unit : {false, true}) {
    const lo::Int8LinearConfig c{200, 70, 130, true, unit};
    const auto draw = [&](std::size_t n, double scale) {
      std::vector<float> v(n);
      for (auto& x : v) x = static_cast<float>(rng.uniform(-scale, scale));
      return v;
    };
    std::vector<float> x = draw(c.rows * c.in, 3), w = draw(c.out * c.in, 0.1), b = draw(c.out, 1),
                       dy = draw(c.rows * c.out, 1e-3);
    // NaN in the last row of chunk 0 (63), the first of chunk 1 (64) and the last row (199), inf in row 128.
    for (const std::size_t r : {63u, 64u, 199u}) {
      x[r * c.in + 5] = nan;
      dy[r * c.out + 7] = nan;
    }
    x[128 * c.in + 9] = inf;
    dy[128 * c.out + 11] = -inf;
    w[3 * c.in + 2] = nan;
    w[64 * c.in + 2] = -inf;
    const auto up = [](const std::vector<float>& h) {
      lc::DeviceBuffer<float> d;
      d.upload(h);
      return d;
    };
    auto dx_ = up(x), dw_ = up(w), db_ = up(b), ddy = up(dy);
    lc::DeviceBuffer<float> gy(c.rows * c.out), gdx(c.rows * c.in), gdw(c.out * c.in), gdb(c.out);
    std::vector<float> y(c.rows * c.out), hdx(c.rows * c.in), hdw(c.out * c.in), hdb(c.out);
    lockstep::cpu::OpKernels ck;
    lc::OpKernels gk;
    ck.forward<lo::Int8Linear>(c, {.x = x.data(), .w = w.data(), .b = b.data(), .y = y.data()});
    gk.forward<lo::Int8Linear>(c, {.x = dx_.data(), .w = dw_.data(), .b = db_.data(), .y = gy.data()});
    ck.backward<lo::Int8Linear>(c, {.x = x.data(), .w = w.data(), .dy = dy.data(), .dx = hdx.data(),
                                    .dw = hdw.data(), .db = hdb.data()});
    gk.backward<lo::Int8Linear>(c, {.x = dx_.data(), .w = dw_.data(), .dy = ddy.data(), .dx = gdx.data(),
                                    .dw = gdw.data(), .db = gdb.data()});
    lc::synchronize("int8 linear nan test");
    const char* mode = unit ? "unit backward" : "float STE backward";
    // Bit for bit, except that a NaN matches any NaN: a NaN's sign and payload
    // are outside the numeric contract (docs/NUMERICS.md; the optimizer gates
    // compare the same way). The host makes x86's default NaN 0xffc00000 where
    // arithmetic creates one, the device 0x7fffffff.
    const auto differ = [](const char* name, const std::vector<float>& cpu, const std::vector<float>& gpu,
                           std::size_t row_len) {
      std::vector<float> g = gpu;
      for (std::size_t i = 0; i < g.size() && i < cpu.size(); ++i)
        if (std::isnan(cpu[i]) && std::isnan(g[i])) g[i] = cpu[i];
      return lc::gate::first_difference(name, cpu, g, row_len);
    };
    EXPECT_EQ(differ("y", y, gy.download(), c.out), "") << mode;
    EXPECT_EQ(differ("dx", hdx, gdx.download(), c.in), "") << mode;
    EXPECT_EQ(differ("dw", hdw, gdw.download(), c.in), "") << mode;
    EXPECT_EQ(differ("db", hdb, gdb.download(), 0), "") << mode;
  }
}

struct Int8MutantCase {
  lc::Mutant mutant;
  std::vector<Int8Impl> mutated;
};

class CudaInt8GemmMutant : public ::testing::TestWithParam<Int8MutantCase> {};

// Each mutant is rejected by the int8 gates in the kernels it is planted in,
// the others pass, and the selection made under it never picks a mutated
// implementation.
TEST_P(CudaInt8GemmMutant, IsRejectedAndNeverChosen) {
  REQUIRE_DEVICE();
  const Int8MutantCase& p = GetParam();
  const auto cases = lc::gate::int8_cases();
  lc::int8_selection_reset();
  std::vector<lc::gate::Outcome> outcomes;
  lc::set_mutant(p.mutant);
  try {
    outcomes = lc::gate::run_gates(cases, {});
    const lc::Int8Selection& s = lc::int8_selection();  // from the outcomes just recorded
    for (const Int8Impl m : p.mutated) {
      EXPECT_FALSE(s.admitted[static_cast<int>(m)]) << lc::int8_impl_name(m) << " admitted with its mutant on";
      for (int c = 0; c < lc::kInt8Classes; ++c) {
        EXPECT_NE(s.choice[c], m) << lc::int8_class_name(static_cast<lc::Int8Class>(c));
        EXPECT_NE(s.own[c], m) << lc::int8_class_name(static_cast<lc::Int8Class>(c));
      }
    }
    std::printf("under '%s': %s\n", std::string(lc::mutant_name(p.mutant)).c_str(), s.report.c_str());
  } catch (...) {
    lc::set_mutant(lc::Mutant::none);
    lc::int8_selection_reset();
    throw;
  }
  lc::set_mutant(lc::Mutant::none);
  lc::int8_selection_reset();
  for (const Int8Impl m : p.mutated) {
    const std::string kernel = "int8_gemm_nt " + std::string(lc::int8_impl_name(m));
    std::size_t rejected = 0, total = 0;
    std::string first;
    for (const auto& o : outcomes) {
      if (o.kernel != kernel) continue;
      ++total;
      if (!o.difference.empty()) {
        ++rejected;
        if (first.empty()) first = o.shape + (o.poisoned ? " (dirty pass)" : "") + ": " + o.difference;
      }
    }
    EXPECT_GT(rejected, 0u) << "mutant '" << lc::mutant_name(p.mutant) << "' passed every gate of " << kernel;
    std::printf("mutant '%s': %s rejected by %zu of %zu outcomes; first: %s\n",
                std::string(lc::mutant_name(p.mutant)).c_str(), kernel.c_str(), rejected, total, first.c_str());
  }
  for (const auto& o : outcomes) {
    bool mutated = false;
    for (const Int8Impl m : p.mutated) mutated = mutated || o.kernel == "int8_gemm_nt " + std::string(lc::int8_impl_name(m));
    if (!mutated) {
      EXPECT_EQ(o.difference, "") << "unmutated " << o.kernel << " on " << o.shape;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Int8Mutants, CudaInt8GemmMutant,
    ::testing::Values(Int8MutantCase{lc::Mutant::int8_dp4a_int16_accumulator, {Int8Impl::dp4a}},
                      Int8MutantCase{lc::Mutant::int8_imma_k_tail_dropped,
                                     {Int8Impl::imma_128x128, Int8Impl::imma_128x256}},
                      Int8MutantCase{lc::Mutant::int8_imma_last_column_skipped,
                                     {Int8Impl::imma_128x128, Int8Impl::imma_128x256}}),
    [](const ::testing::TestParamInfo<Int8MutantCase>& i) {
      switch (i.param.mutant) {
        case lc::Mutant::int8_dp4a_int16_accumulator: return std::string("dp4a_int16_accumulator");
        case lc::Mutant::int8_imma_k_tail_dropped: return std::string("imma_k_tail_dropped");
        default: return std::string("imma_last_column_skipped");
      }
    });

}  // namespace
