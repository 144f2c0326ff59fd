// The CPU int8 GEMMs are exact: every implementation this machine offers
// equals the spec loop ops::int8_matmul_nt on random ragged shapes at any
// thread count; the start-up gate passes them and rejects planted wrong ones;
// the AMX-refused path falls back; the K bound is enforced with a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cpu/int8_gemm.hpp"
#include "lockstep/ops/quant.hpp"

namespace {

namespace int8 = lockstep::cpu::int8;

std::vector<std::int8_t> codes(std::size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> d(-127, 127);
  std::vector<std::int8_t> v(n);
  for (auto& x : v) x = static_cast<std::int8_t>(d(rng));
  return v;
}

std::string shape(std::size_t n, std::size_t m, std::size_t k) {
  return std::to_string(n) + "x" + std::to_string(m) + "x" + std::to_string(k);
}

std::vector<int8::Impl> machine_impls() { return int8::candidates_for(int8::probe_machine()).impls; }
// What this machine runs, plus the AMX kernel on emulated tiles (its packing,
// padding and blocking, on any machine).
std::vector<int8::Impl> tested_impls() {
  auto impls = machine_impls();
  impls.push_back(int8::amx_emulated_impl());
  return impls;
}

// Planted wrong implementations. Each is right on most inputs.
void skips_last_k(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
                  std::size_t K, std::size_t ldc) {
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t m = 0; m < M; ++m) {
      std::int32_t s = 0;
      for (std::size_t k = 0; k + 1 < K; ++k) s += A[n * K + k] * B[m * K + k];
      C[n * ldc + m] = s;
    }
}
// VNNI's offset form with a SATURATING accumulator (vpdpbusds instead of
// vpdpbusd): Σ(a+128)·b clamps at INT32_MAX, so only extreme codes at large K differ.
void saturating_offset(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
                       std::size_t K, std::size_t ldc) {
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t m = 0; m < M; ++m) {
      long long s = 0, bsum = 0;
      for (std::size_t k = 0; k < K; ++k) {
        s = std::clamp<long long>(s + (A[n * K + k] + 128) * B[m * K + k], INT_MIN, INT_MAX);
        bsum += B[m * K + k];
      }
      C[n * ldc + m] = static_cast<std::int32_t>(static_cast<std::uint32_t>(s) - static_cast<std::uint32_t>(128 * bsum));
    }
}
// Accumulates in float: exact while |partial sums| < 2^24, rounds beyond.
void float_accumulator(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
                       std::size_t K, std::size_t ldc) {
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t m = 0; m < M; ++m) {
      float s = 0.0f;
      for (std::size_t k = 0; k < K; ++k) s += static_cast<float>(A[n * K + k] * B[m * K + k]);
      C[n * ldc + m] = static_cast<std::int32_t>(s);
    }
}
// Drops the last column of a ragged 16-column panel.
void drops_ragged_column(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
                         std::size_t K, std::size_t ldc) {
  int8::scalar_impl().kernel(A, B, C, N, M, K, ldc);
  if (M % 16 != 0)
    for (std::size_t n = 0; n < N; ++n) C[n * ldc + M - 1] = 0;
}

// A fresh seed per run (LOCKSTEP_SEED reproduces one), printed for the repeat runner.
std::uint64_t test_seed() {
  const std::uint64_t seed = lockstep::ad::seed_from_env();
  std::printf("seed %llu (LOCKSTEP_SEED=%llu reproduces)\n", static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  return seed;
}

bool cpuinfo_has(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) {
      std::istringstream words(line);
      for (std::string w; words >> w;)
        if (w == flag) return true;
      return false;
    }
  return false;
}

}  // namespace

TEST(Int8Gemm, EveryImplementationEqualsTheSpecOnRandomRaggedShapes) {
  const std::uint64_t seed = test_seed();
  SCOPED_TRACE("LOCKSTEP_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> nm(1, 70), kd(0, 600);
  const auto impls = tested_impls();
  for (int trial = 0; trial < 40; ++trial) {
    const std::size_t n = nm(rng), m = nm(rng), k = trial == 0 ? 0 : kd(rng);
    const auto a = codes(n * k, rng), b = codes(m * k, rng);
    const auto want = lockstep::ops::int8_matmul_nt(a, b, n, m, k);
    for (const auto& impl : impls)
      for (int threads : {1, 2, 3}) {
        std::vector<std::int32_t> c(n * m, 0x5A5A5A5A);
        int8::run(impl.kernel, a.data(), b.data(), c.data(), n, m, k, threads);
        ASSERT_EQ(c, want) << impl.name << " " << shape(n, m, k) << " threads " << threads;
      }
  }
}

TEST(Int8Gemm, TheChoiceChangesNoBit) {
  const std::uint64_t seed = test_seed();
  SCOPED_TRACE("LOCKSTEP_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const auto impls = machine_impls();
  // Shapes of every class, the GPT-2 124M ones among them (a few rows).
  const std::array<std::array<std::size_t, 3>, 6> shapes = {
      {{1, 768, 768}, {3, 2304, 768}, {64, 768, 769}, {130, 300, 3072}, {257, 129, 1000}, {17, 3072, 768}}};
  for (const auto& [n, m, k] : shapes) {
    const auto a = codes(n * k, rng), b = codes(m * k, rng);
    std::vector<std::int32_t> want(n * m);
    lockstep::cpu::int8_gemm_nt(a.data(), b.data(), want.data(), n, m, k);
    for (const auto& impl : impls) {
      std::vector<std::int32_t> c(n * m, 0x5A5A5A5A);
      int8::run(impl.kernel, a.data(), b.data(), c.data(), n, m, k, 2);
      ASSERT_EQ(c, want) << impl.name << " " << shape(n, m, k);
    }
  }
}

TEST(Int8Gemm, ExtremeCodesAtTheBoundAreExact) {
  // All ±127 at K = kMaxQuantK: |acc| = 127²·131071 = 2114044159, the largest there is.
  const std::size_t n = 2, m = 3, k = lockstep::ops::kMaxQuantK;
  std::vector<std::int8_t> a(n * k, 127), b(m * k, 127);
  std::fill(b.begin() + static_cast<long>(k), b.begin() + static_cast<long>(2 * k), std::int8_t{-127});
  for (const auto& impl : tested_impls()) {
    std::vector<std::int32_t> c(n * m, 0);
    int8::run(impl.kernel, a.data(), b.data(), c.data(), n, m, k, 2);
    for (std::size_t r = 0; r < n; ++r) {
      EXPECT_EQ(c[r * m + 0], 2114044159) << impl.name;
      EXPECT_EQ(c[r * m + 1], -2114044159) << impl.name;
      EXPECT_EQ(c[r * m + 2], 2114044159) << impl.name;
    }
  }
}

TEST(Int8Gemm, TheGatePassesEveryImplementationOfThisMachine) {
  for (const auto& impl : tested_impls())
    for (int threads : {1, 2}) {
      // The emulated tiles are slow (seconds under the sanitizers): once.
      if (impl.kernel == int8::amx_emulated_impl().kernel && threads == 1) continue;
      const auto g = int8::gate(impl.kernel, threads);
      EXPECT_TRUE(g.passed) << impl.name << ": " << g.failure;
      EXPECT_EQ(g.cases, int8::gate_case_count());
    }
}

TEST(Int8Gemm, TheGateRejectsPlantedWrongImplementations) {
  const struct {
    const char* name;
    int8::Kernel kernel;
  } mutants[] = {{"skips the last k", skips_last_k},
                 {"saturating offset accumulator", saturating_offset},
                 {"float accumulator", float_accumulator},
                 {"drops a ragged column", drops_ragged_column}};
  for (const auto& mut : mutants) {
    const auto g = int8::gate(mut.kernel, 2);
    EXPECT_FALSE(g.passed) << mut.name;
    EXPECT_NE(g.failure.find(", reference "), std::string::npos) << mut.name << ": " << g.failure;
  }
  // The saturating and float mutants pass every random case: only the extreme codes near the K bound catch them.
  EXPECT_NE(int8::gate(saturating_offset, 1).failure.find("×13107"), std::string::npos);
  EXPECT_NE(int8::gate(float_accumulator, 1).failure.find("×13107"), std::string::npos);
}

TEST(Int8Gemm, AnImplementationFailingTheGateIsNeverUsedAndTheReportSaysSo) {
  int8::Candidates c;
  c.impls = {int8::scalar_impl(), {"mutant", saturating_offset}};
  const int8::Plan plan = int8::make_plan(c);
  for (const auto& chosen : plan.chosen) EXPECT_STREQ(chosen.name, "scalar");
  EXPECT_NE(plan.report.find("gated 1/2 on "), std::string::npos) << plan.report;
  EXPECT_NE(plan.report.find("mutant FAILED the gate (never used): "), std::string::npos) << plan.report;
}

TEST(Int8Gemm, RefusedTilePermissionFallsBackCleanly) {
  // The probe's hook: nothing is asked, the permission counts as refused.
  const int8::Machine probed = int8::probe_machine(/*refuse_amx_permission=*/true);
  EXPECT_FALSE(probed.amx_permitted);
  // A machine with AMX whose kernel refuses the tiles: amx is left out, with the reason.
  int8::Machine refused = probed;
  refused.amx_cpu = true;
  const int8::Candidates c = int8::candidates_for(refused);
  for (const auto& impl : c.impls) EXPECT_STRNE(impl.name, "amx");
  EXPECT_NE(std::find(c.unavailable.begin(), c.unavailable.end(), "amx: tile permission refused"),
            c.unavailable.end());
  const int8::Plan plan = int8::make_plan(c);
  EXPECT_NE(plan.report.find("amx: tile permission refused"), std::string::npos) << plan.report;
  for (const auto& chosen : plan.chosen) EXPECT_STRNE(chosen.name, "amx");
  // And it still computes: the fallback's product is the spec's.
  std::mt19937_64 rng(5);
  const auto a = codes(40 * 100, rng), b = codes(30 * 100, rng);
  std::vector<std::int32_t> y(40 * 30);
  int8::run(plan.chosen[static_cast<std::size_t>(int8::shape_class(40, 30, 100))].kernel, a.data(), b.data(),
            y.data(), 40, 30, 100, 2);
  EXPECT_EQ(y, lockstep::ops::int8_matmul_nt(a, b, 40, 30, 100));
}

TEST(Int8Gemm, TheProbeAgreesWithProcCpuinfo) {
  const int8::Machine m = int8::probe_machine();
  EXPECT_EQ(m.vnni, cpuinfo_has("avx512_vnni") && cpuinfo_has("avx512bw"));
  EXPECT_EQ(m.amx_cpu, cpuinfo_has("amx_int8") && cpuinfo_has("amx_tile"));
  const int8::Candidates c = int8::candidates_for(m);
  const bool offers_vnni = std::any_of(c.impls.begin(), c.impls.end(), [](auto& i) { return std::string(i.name) == "vnni"; });
  EXPECT_EQ(offers_vnni, m.vnni);
  if (!m.amx_cpu)
    GTEST_LOG_(INFO) << "this CPU has no amx_int8: the AMX kernel is compiled but not run here";
}

TEST(Int8Gemm, TheReportNamesTheChoiceAndTheGate) {
  const std::string r = lockstep::cpu::int8_gemm_choice_report();
  std::cout << r << "\n";
  EXPECT_EQ(r.rfind("int8 GEMM (CPU): ", 0), 0u) << r;
  const std::size_t n = machine_impls().size();
  EXPECT_NE(r.find("gated " + std::to_string(n) + "/" + std::to_string(n) + " on " +
                   std::to_string(int8::gate_case_count()) + " cases"),
            std::string::npos)
      << r;
  for (const char* cls : {"small", "medium", "large"}) EXPECT_NE(r.find(cls), std::string::npos) << r;
}

TEST(Int8Gemm, RefusesKBeyondTheExactBoundNamingTheShape) {
  std::int8_t a = 1, b = 1;
  std::int32_t c = 0;
  const std::string want = "int8 GEMM 2×3×131072: K = 131072 exceeds 131071, the bound for exact int32 accumulation";
  try {
    lockstep::cpu::int8_gemm_nt(&a, &b, &c, 2, 3, 131072);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(e.what(), want);
  }
  for (const auto& impl : machine_impls())
    EXPECT_THROW(int8::run(impl.kernel, &a, &b, &c, 2, 3, 131072, 1), std::invalid_argument) << impl.name;
  // K = 131071 itself is allowed (the extreme-codes test runs it).
}

TEST(Int8Gemm, TheAmxTilesWhereTheCpuHasThem) {
  const int8::Machine m = int8::probe_machine();
  if (!m.amx_cpu) GTEST_SKIP() << "this CPU has no amx_int8 (the AMX kernel runs on emulated tiles above)";
  ASSERT_TRUE(m.amx_permitted) << "the kernel refused the AMX tile permission (arch_prctl ARCH_REQ_XCOMP_PERM)";
  const auto g = int8::gate(int8::amx_impl().kernel, 2);
  EXPECT_TRUE(g.passed) << g.failure;
  std::mt19937_64 rng(test_seed());
  for (int trial = 0; trial < 10; ++trial) {
    const std::size_t n = 1 + rng() % 100, mm = 1 + rng() % 100, k = rng() % 2000;
    const auto a = codes(n * k, rng), b = codes(mm * k, rng);
    std::vector<std::int32_t> hw(n * mm), emu(n * mm);
    int8::run(int8::amx_impl().kernel, a.data(), b.data(), hw.data(), n, mm, k, 2);
    int8::run(int8::amx_emulated_impl().kernel, a.data(), b.data(), emu.data(), n, mm, k, 2);
    ASSERT_EQ(hw, emu) << shape(n, mm, k);
    ASSERT_EQ(hw, lockstep::ops::int8_matmul_nt(a, b, n, mm, k)) << shape(n, mm, k);
  }
}
