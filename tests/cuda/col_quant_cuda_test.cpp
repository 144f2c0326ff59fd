// The two-pass column quantizer (col_quant.cu) on the device: its gate cases
// pass and admit it; on ragged shapes and the GPT-2 124M shapes it gives the
// three-pass kernel's bits and the CPU's (codes, steps; with the column sums,
// launch::column_sums' and the CPU's), with either kernel of its pass 1 with
// sums (the strip kernel, v1, and the tiled one, v2: col_quant_sums.cu) and
// either kernel of its pass 2 (v1, col_quant.cu's; v2, col_quant_codes.cu's,
// the loads overlapped: LOCKSTEP_COL_CODES);
// each planted bug (mutant.hpp) is caught by the gate cases, refuses the
// kernel, and leaves the engine on the three-pass one, whose unit linear
// still passes its op gates; and the time of each at the GPT-2 shapes
// (printed: the lead's measurement).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "lockstep/backend/cpu/units_quant.hpp"
#include "lockstep/backend/cuda/col_quant.hpp"
#include "lockstep/backend/cuda/col_quant_launch.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/gemm_launch.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/probe.hpp"
#include "lockstep/num/fp.hpp"

namespace {

namespace lc = lockstep::cuda;
namespace ln = lockstep::num;

struct ScopedMutant {
  explicit ScopedMutant(lc::Mutant m) { lc::set_mutant(m); }
  ~ScopedMutant() { lc::set_mutant(lc::Mutant::none); }
};

struct Shape {
  std::size_t rows, cols;
};

// Normals of per-column scale, a few NaN, ±inf, -0 and subnormal cells.
std::vector<float> matrix(const Shape& s, std::uint64_t seed, bool specials) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(s.rows * s.cols);
  for (std::size_t j = 0; j < s.cols; ++j) {
    const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 30) - 20);
    for (std::size_t n = 0; n < s.rows; ++n) x[n * s.cols + j] = normal(rng) * scale;
  }
  if (specials && !x.empty())
    for (const std::uint32_t bits : {0x7FC00000u, 0x7F800000u, 0xFF800000u, 0x80000000u, 0x00000007u, 0x7FC00000u})
      for (int k = 0; k < 3; ++k) x[rng() % x.size()] = ln::float_of(bits);
  return x;
}

struct Result {
  std::vector<std::int8_t> q;
  std::vector<float> step, sums;
};

enum class Kernel { cpu, three_pass, two_pass };

Result run(Kernel k, const std::vector<float>& x, const Shape& s, float floor_x, bool sums) {
  Result r{std::vector<std::int8_t>(s.rows * s.cols), std::vector<float>(s.cols), std::vector<float>(sums ? s.cols : 0)};
  if (k == Kernel::cpu) {
    lockstep::cpu::units::quantize_cols_i8(x.data(), s.rows, s.cols, floor_x, r.q.data(), r.step.data(), 2);
    if (sums) lockstep::cpu::units::bias_gradient(x.data(), s.rows, s.cols, r.sums.data(), 2);
    return r;
  }
  lc::DeviceBuffer<float> dx(x.size() > 0 ? x.size() : 1), step, dsums, scratch(lc::col_quantize_scratch(s.rows, s.cols));
  if (!x.empty()) dx.upload(x);
  lc::DeviceBuffer<std::int8_t> q(r.q.size() + 4);
  step.assign(s.cols + 1, ln::float_of(0x7FC0DEADu));
  dsums.assign(s.cols + 1, ln::float_of(0x7FC0DEADu));
  if (k == Kernel::two_pass) {
    lc::launch::col_quantize_i8_2p(dx.data(), s.rows, s.cols, floor_x, q.data(), step.data(), scratch.data(),
                                   sums ? dsums.data() : nullptr);
  } else {
    lc::launch::col_quantize_i8(dx.data(), s.rows, s.cols, floor_x, q.data(), step.data(), scratch.data());
    if (sums) lc::launch::column_sums(dx.data(), s.rows, s.cols, dsums.data());
  }
  lc::synchronize("col quant test");
  const auto gq = q.download();
  const auto gs = step.download(), gsum = dsums.download();
  std::copy(gq.begin(), gq.begin() + static_cast<std::ptrdiff_t>(r.q.size()), r.q.begin());
  std::copy(gs.begin(), gs.begin() + static_cast<std::ptrdiff_t>(s.cols), r.step.begin());
  if (sums) std::copy(gsum.begin(), gsum.begin() + static_cast<std::ptrdiff_t>(s.cols), r.sums.begin());
  EXPECT_EQ(ln::bits_of(gs[s.cols]), 0x7FC0DEADu) << "step written past its end";
  EXPECT_EQ(ln::bits_of(gsum[s.cols]), 0x7FC0DEADu) << "sums written past their end";
  return r;
}

// "" or the first difference; sums: any NaN matches any NaN (the payload is
// not part of the contract, and the device's adds write their own).
std::string differ(const Result& a, const Result& b) {
  for (std::size_t i = 0; i < a.q.size(); ++i)
    if (a.q[i] != b.q[i]) return "codes[" + std::to_string(i) + "]: " + std::to_string(a.q[i]) + " vs " + std::to_string(b.q[i]);
  for (std::size_t i = 0; i < a.step.size(); ++i)
    if (ln::bits_of(a.step[i]) != ln::bits_of(b.step[i])) return "step[" + std::to_string(i) + "]";
  for (std::size_t i = 0; i < a.sums.size(); ++i)
    if (ln::bits_of(a.sums[i]) != ln::bits_of(b.sums[i]) && !(a.sums[i] != a.sums[i] && b.sums[i] != b.sums[i]))
      return "sums[" + std::to_string(i) + "]: " + std::to_string(a.sums[i]) + " vs " + std::to_string(b.sums[i]);
  return "";
}

TEST(CudaColQuant, GateCasesPassAndAdmitTheTwoPassKernel) {
  if (std::string why; !lc::available(&why)) GTEST_SKIP() << why;
  lc::col_quantize_reset();
  const auto cases = lc::gate::cases_of({"col_quant"});
  ASSERT_GE(cases.size(), 40u);
  for (const auto& o : lc::gate::run_gates(cases, {}))
    EXPECT_EQ(o.difference, "") << o.kernel << " on " << o.shape << (o.poisoned ? " (dirty pass)" : "");
  EXPECT_TRUE(lc::col_quantize_two_pass_admitted()) << lc::col_quantize_report();
  std::printf("%s; pass 1 with sums: %s\n", lc::col_quantize_report().c_str(),
              lc::launch::col_quant_sums_kernel() == 1   ? "strip (v1, LOCKSTEP_COL_SUMS=v1)"
              : lc::launch::col_quant_sums_kernel() == 3 ? "tiled, 32 columns a block (v3, LOCKSTEP_COL_SUMS=v3)"
                                                         : "tiled, 8 columns a block (v2)");
}

// The gates admit the two-pass kernel with either pass 1 with sums forced.
TEST(CudaColQuant, GateCasesPassUnderEitherSumsKernel) {
  if (std::string why; !lc::available(&why)) GTEST_SKIP() << why;
  for (const int k : {1, 2, 3}) {
    lc::launch::col_quant_sums_kernel_force(k);
    lc::col_quantize_reset();
    for (const auto& o : lc::gate::run_gates(lc::gate::cases_of({"col_quant"}), {}))
      EXPECT_EQ(o.difference, "") << "sums kernel v" << k << ": " << o.kernel << " on " << o.shape
                                  << (o.poisoned ? " (dirty pass)" : "");
    EXPECT_TRUE(lc::col_quantize_two_pass_admitted()) << "sums kernel v" << k << ": " << lc::col_quantize_report();
  }
  lc::launch::col_quant_sums_kernel_force(0);
  lc::col_quantize_reset();
}

// The gates run the pass 2 selected (col_quantize_i8_2p dispatches on
// col_quant_codes_kernel): they admit the two-pass kernel under either pass
// 2 forced, and under v2 the last-chunk mutant (planted in both) is caught.
TEST(CudaColQuant, GateCasesPassUnderEitherCodesKernel) {
  if (std::string why; !lc::available(&why)) GTEST_SKIP() << why;
  for (const int k : {1, 2}) {
    lc::launch::col_quant_codes_kernel_force(k);
    lc::col_quantize_reset();
    for (const auto& o : lc::gate::run_gates(lc::gate::cases_of({"col_quant"}), {}))
      EXPECT_EQ(o.difference, "") << "codes kernel v" << k << ": " << o.kernel << " on " << o.shape
                                  << (o.poisoned ? " (dirty pass)" : "");
    EXPECT_TRUE(lc::col_quantize_two_pass_admitted()) << "codes kernel v" << k << ": " << lc::col_quantize_report();
    std::printf("codes kernel v%d forced: %s\n", k, lc::col_quantize_report().c_str());
    {
      ScopedMutant on(lc::Mutant::col_quant_last_chunk_dropped);
      lc::col_quantize_reset();
      std::size_t rejected = 0, total = 0;
      for (const auto& o : lc::gate::run_gates(lc::gate::cases_of({"col_quant"}), {})) {
        rejected += o.difference.empty() ? 0 : 1;
        ++total;
      }
      EXPECT_GT(rejected, 0u) << "codes kernel v" << k << ": the last-chunk mutant not seen";
      EXPECT_FALSE(lc::col_quantize_two_pass_admitted()) << "codes kernel v" << k;
      std::printf("codes kernel v%d, mutant '%s': %zu of %zu outcomes rejected\n", k,
                  std::string(lc::mutant_name(lc::Mutant::col_quant_last_chunk_dropped)).c_str(), rejected, total);
    }
  }
  lc::launch::col_quant_codes_kernel_force(0);
  lc::col_quantize_reset();
}

// Ragged shapes (every block and chunk edge of both kernels), the floors of x
// and dy, with and without specials and sums; and the GPT-2 124M shapes of the
// unit backward (dy [16384, 768 | 2304 | 3072], x [16384, 768 | 3072],
// W [2304 | 3072, 768], and the head's W [50304, 768]).
TEST(CudaColQuant, TwoPassGivesTheThreePassAndTheCpuBits) {
  if (std::string why; !lc::available(&why)) GTEST_SKIP() << why;
  const std::vector<Shape> shapes = {{1, 1},      {2, 3},       {63, 65},      {64, 64},     {255, 7},
                                     {256, 9},    {257, 31},    {511, 33},     {512, 32},    {513, 129},
                                     {1023, 40},  {1025, 8},    {3001, 257},   {0, 5},       {16384, 768},
                                     {16384, 2304}, {16384, 3072}, {2304, 768}, {3072, 768}, {50304, 768}};
  std::uint64_t seed = 11;
  for (const Shape& s : shapes)
    for (const bool specials : {false, true})
      for (const bool sums : {false, true}) {
        if (s.rows * s.cols > 4000000 && specials) continue;  // the large shapes once, without specials
        const float floor_x = sums ? ln::float_of(0x0D800000u) : 1e-8f;  // dy's 2^-100 where the sums are (bias)
        const auto x = matrix(s, ++seed, specials);
        const Result cpu = run(Kernel::cpu, x, s, floor_x, sums);
        const Result three = run(Kernel::three_pass, x, s, floor_x, sums);
        const std::string where = "rows " + std::to_string(s.rows) + " cols " + std::to_string(s.cols) +
                                  (specials ? " specials" : "") + (sums ? " sums" : "");
        EXPECT_EQ(differ(cpu, three), "") << "three-pass vs cpu, " << where;
        for (const int codes : {1, 2}) {  // pass 2: sub-tiles in turn, the loads overlapped
          lc::launch::col_quant_codes_kernel_force(codes);
          for (const int k : {1, 2, 3}) {  // pass 1 with sums: the strip kernel, the tiled ones (8, 32 columns)
            lc::launch::col_quant_sums_kernel_force(k);
            const Result two = run(Kernel::two_pass, x, s, floor_x, sums);
            EXPECT_EQ(differ(cpu, two), "") << "two-pass (sums kernel v" << k << ", codes kernel v" << codes
                                            << ") vs cpu, " << where;
            if (!sums) break;  // the sums kernel is not launched
          }
        }
        lc::launch::col_quant_sums_kernel_force(0);
        lc::launch::col_quant_codes_kernel_force(0);
      }
}

// Each planted bug: caught by a gate case, the kernel refused, the engine's
// dispatch on the three-pass kernel (the CPU's bits), the unit linear's op
// gates still passing; with the mutant off the kernel is admitted again.
TEST(CudaColQuant, EachMutantIsCaughtAndTheThreePassKernelServes) {
  if (std::string why; !lc::available(&why)) GTEST_SKIP() << why;
  const Shape s{1537, 77};
  const auto x = matrix(s, 99, false);
  const float floor_g = ln::float_of(0x0D800000u);
  const Result cpu = run(Kernel::cpu, x, s, floor_g, true);
  std::vector<lc::Mutant> mutants = {lc::Mutant::col_quant_last_chunk_dropped, lc::Mutant::col_quant_sums_in_pairs};
  // The tiled sums kernel's own bug: planted only where that kernel runs (LOCKSTEP_COL_SUMS unset, v2 or v3).
  if (lc::launch::col_quant_sums_kernel() >= 2) mutants.push_back(lc::Mutant::col_quant_sums_tile_rows_swapped);
  // The overlapped pass 2's own bug: planting it runs that kernel whatever LOCKSTEP_COL_CODES says.
  mutants.push_back(lc::Mutant::col_quant_codes_stale_subtile);
  for (const lc::Mutant m : mutants) {
    ScopedMutant on(m);
    lc::col_quantize_reset();
    const auto outcomes = lc::gate::run_gates(lc::gate::cases_of({"col_quant"}), {});
    std::size_t rejected = 0;
    for (const auto& o : outcomes) rejected += o.difference.empty() ? 0 : 1;
    EXPECT_GT(rejected, 0u) << lc::mutant_name(m) << ": no gate case saw it";
    EXPECT_FALSE(lc::col_quantize_two_pass_admitted()) << lc::mutant_name(m);
    std::printf("mutant '%s': %zu of %zu outcomes rejected; %s\n", std::string(lc::mutant_name(m)).c_str(), rejected,
                outcomes.size(), lc::col_quantize_report().c_str());
    // The dispatch: the three-pass kernel and launch::column_sums, the CPU's bits.
    lc::DeviceBuffer<float> dx, step(s.cols), sums(s.cols), scratch(lc::col_quantize_scratch(s.rows, s.cols));
    dx.upload(x);
    lc::DeviceBuffer<std::int8_t> q(s.rows * s.cols);
    lc::col_quantize(dx.data(), s.rows, s.cols, floor_g, q.data(), step.data(), scratch.data(), sums.data());
    const Result got{q.download(), step.download(), sums.download()};
    EXPECT_EQ(differ(cpu, got), "") << lc::mutant_name(m) << ": the dispatch did not fall back";
    lc::gate::Options clean;
    clean.dirty_pass = false;
    for (const auto& o : lc::gate::run_gates(lc::gate::cases_of({"int8_linear"}), clean))
      EXPECT_EQ(o.difference, "") << lc::mutant_name(m) << ": " << o.kernel << " on " << o.shape;
  }
  lc::col_quantize_reset();
  EXPECT_TRUE(lc::col_quantize_two_pass_admitted()) << lc::col_quantize_report();
}

// The unit linear's op gates (the unit backward with bias: db from the fused
// pass) pass under each kernel, forced.
TEST(CudaColQuant, UnitLinearGatesPassUnderEitherKernel) {
  if (std::string why; !lc::available(&why)) GTEST_SKIP() << why;
  for (const int k : {0, 1}) {
    lc::col_quantize_force(k);
    for (const auto& o : lc::gate::run_gates(lc::gate::cases_of({"int8_linear"}), {}))
      EXPECT_EQ(o.difference, "") << (k == 1 ? "two-pass: " : "three-pass: ") << o.kernel << " on " << o.shape;
  }
  lc::col_quantize_force(-1);
}

// Time per call at the GPT-2 124M shapes, both kernels (with the column sums:
// the three-pass kernel plus launch::column_sums), the two-pass one with
// either pass 2 (codes v1, v2) and v2's pass 2 alone. Printed, not asserted.
TEST(CudaColQuant, TimeAtGpt2Shapes) {
  if (std::string why; !lc::available(&why)) GTEST_SKIP() << why;
  for (const Shape& s : std::vector<Shape>{{16384, 768}, {16384, 2304}, {16384, 3072}, {2304, 768}, {16384, 50304}})
    for (const bool sums : {false, true}) {
      if (s.cols == 50304 && sums) continue;  // the head has no bias
      lc::DeviceBuffer<float> dx(s.rows * s.cols), step(s.cols), dsums(s.cols), scratch(lc::col_quantize_scratch(s.rows, s.cols));
      lc::fill_words(dx.data(), 0x3F8CCCCDu, dx.size());
      lc::DeviceBuffer<std::int8_t> q(s.rows * s.cols);
      // pass 2's input as the two-pass call leaves it: 512-row chunks, or one summary a column with sums
      const std::size_t chunks = sums ? 1 : (s.rows + 511) / 512;
      const auto* flags = reinterpret_cast<const std::uint32_t*>(scratch.data() + chunks * s.cols);
      // 0 three-pass; 1 two-pass (codes v1; with sums: the tiled pass 1, 8 columns a block); 2 the same with
      // codes v2; 3 v2's pass 2 alone; with sums: 4, 5 two-pass (codes v1) with the strip pass 1 (v1) and the
      // 32-column tiled one (v3); 6, 7 the tiled pass 1 alone, 8 and 32 columns a block (against the ~33 µs
      // chain floor).
      double ms[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int k = 0; k < (sums ? 8 : 4); ++k) {
        const auto call = [&] {
          if (k >= 6) {
            lc::launch::col_maxima_sums_tiled(dx.data(), s.rows, s.cols, scratch.data(),
                                              reinterpret_cast<std::uint32_t*>(scratch.data() + s.cols), dsums.data(),
                                              lc::launch::kColQuantClean, k == 6 ? 8 : 32);
          } else if (k == 3) {
            lc::launch::col_steps_codes_overlapped(dx.data(), s.rows, s.cols, chunks, scratch.data(), flags, 1e-8f,
                                                   step.data(), q.data());
          } else if (k >= 1) {
            lc::launch::col_quant_sums_kernel_force(k == 4 ? 1 : k == 5 ? 3 : 2);
            lc::launch::col_quant_codes_kernel_force(k == 2 ? 2 : 1);
            lc::launch::col_quantize_i8_2p(dx.data(), s.rows, s.cols, 1e-8f, q.data(), step.data(), scratch.data(),
                                           sums ? dsums.data() : nullptr);
          } else {
            lc::launch::col_quantize_i8(dx.data(), s.rows, s.cols, 1e-8f, q.data(), step.data(), scratch.data());
            if (sums) lc::launch::column_sums(dx.data(), s.rows, s.cols, dsums.data());
          }
        };
        if (k == 3) {  // the summaries pass 2 reads: the two-pass call's pass 1 leaves them in scratch
          lc::launch::col_quant_codes_kernel_force(2);
          lc::launch::col_quantize_i8_2p(dx.data(), s.rows, s.cols, 1e-8f, q.data(), step.data(), scratch.data(),
                                         sums ? dsums.data() : nullptr);
        }
        call();
        lc::synchronize();
        constexpr int kReps = 20;
        const auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < kReps; ++r) call();
        lc::synchronize();
        ms[k] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / kReps;
      }
      lc::launch::col_quant_sums_kernel_force(0);
      lc::launch::col_quant_codes_kernel_force(0);
      const double bytes = 9.0 * static_cast<double>(s.rows * s.cols);  // two reads of x, one write of codes
      const double codes_bytes = 5.0 * static_cast<double>(s.rows * s.cols);  // pass 2: x once, the codes
      std::printf("col quantize %zu x %zu%s: three-pass %.3f ms, two-pass %.3f ms (%.2f TB/s of 9 B/cell; floor at "
                  "4.1 TB/s %.3f ms); two-pass with codes v2 %.3f ms (%.2f TB/s); v2's steps and codes alone "
                  "%.1f us (%.2f TB/s of 5 B/cell; floor at 4.1 TB/s %.1f us)",
                  s.rows, s.cols, sums ? " + column sums" : "", ms[0], ms[1], bytes / (ms[1] * 1e-3) * 1e-12,
                  bytes / 4.1e12 * 1e3, ms[2], bytes / (ms[2] * 1e-3) * 1e-12, ms[3] * 1e3,
                  codes_bytes / (ms[3] * 1e-3) * 1e-12, codes_bytes / 4.1e12 * 1e6);
      if (sums)
        std::printf("; two-pass with v1 (strip) %.3f ms, with v3 (tiled, 32 columns) %.3f ms; the tiled pass 1 alone: "
                    "8 columns %.1f us, 32 columns %.1f us",
                    ms[4], ms[5], ms[6] * 1e3, ms[7] * 1e3);
      std::printf("\n");
      EXPECT_GT(ms[1], 0.0);
      EXPECT_GT(ms[2], 0.0);
    }
}

}  // namespace
