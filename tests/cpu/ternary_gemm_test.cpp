// The CPU ternary GEMM on 2-bit codes (backend/cpu/ternary_gemm.hpp) is
// ops::BitLinear::forward bit for bit: the scalar path, the VNNI and AMX paths
// (where this CPU has them) and the AMX kernel on emulated tiles (any x86-64) on ragged shapes (K off every word, unit and 256-code chunk
// boundary, M odd and off the 8- and 4-row register blocks, 1..32 activation
// rows) at 1, 2 and 5 threads; extreme codes at K = 131071 (the int32 bound);
// the planted bugs are seen; bad input is refused with a clear error.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/backend/cpu/ternary_gemm.hpp"
#include "lockstep/ops/quant.hpp"

namespace {

using namespace lockstep;
namespace ternary = cpu::ternary;

std::size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return a.size() + b.size();
  std::size_t d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return d;
}

std::vector<ternary::Path> paths() {
  std::vector<ternary::Path> p{ternary::Path::scalar};
  if (ternary::vnni_available()) p.push_back(ternary::Path::vnni);
  if (ternary::avx2_available()) p.push_back(ternary::Path::avx2);
  if (ternary::amx_emulated_available()) p.push_back(ternary::Path::amx_emulated);
  if (ternary::amx_available()) p.push_back(ternary::Path::amx);
  return p;
}

// One BitLinear forward: the spec's y, and everything the kernel needs.
struct Case {
  std::size_t N, M, K;
  Tensor<float> x, w;
  std::vector<float> spec;
  ops::RowCodes<float> xq;
  cpu::TernaryMatrix packed;
};

Case make_case(std::size_t N, std::size_t M, std::size_t K, std::uint64_t seed) {
  ad::Rng rng(seed);
  Case c{N, M, K, Tensor<float>({N, K}), Tensor<float>({M, K}), {}, {}, {}};
  for (std::size_t i = 0; i < c.x.numel(); ++i) c.x[i] = static_cast<float>(rng.uniform(-3.0, 3.0));
  for (std::size_t i = 0; i < c.w.numel(); ++i) c.w[i] = static_cast<float>(rng.uniform(-0.1, 0.1));
  const ops::QuantLinearConfig cfg{N, K, M};
  const auto y = ops::BitLinear::forward(cfg, ops::BitLinear::Inputs<float>{c.x, c.w}).y;
  c.spec.assign(y.ptr(), y.ptr() + y.numel());
  c.xq = ops::quantize_rows(c.x.ptr(), N, K, static_cast<float>(ops::BitLinear::kActFloor));
  const ops::TernaryCodes<float> t = ops::quantize_ternary(c.w.ptr(), M * K);
  c.packed = cpu::pack_ternary(t.q.data(), M, K, t.scale, 2);
  return c;
}

std::vector<float> run(const Case& c, ternary::Path p, int threads) {
  std::vector<float> y(c.N * c.M, -1.0f);
  ternary::gemm(p, c.packed, c.xq.q.data(), c.N, c.xq.step.data(), y.data(), threads);
  return y;
}

class TernaryGemm : public ::testing::Test {
 protected:
  void SetUp() override {  // split even small products over threads
    saved_ = cpu::min_parallel_work();
    cpu::set_min_parallel_work(1);
  }
  void TearDown() override {
    cpu::set_min_parallel_work(saved_);
    ternary::set_mutant(ternary::Mutant::none);
  }
  std::size_t saved_ = 0;
};

TEST_F(TernaryGemm, EveryPathIsTheSpecOnRaggedShapesAtAnyThreadCount) {
  std::printf("paths: scalar%s%s%s\n", ternary::vnni_available() ? ", vnni" : " (vnni: not on this machine)",
              ternary::amx_emulated_available() ? ", amx-emulated" : "",
              ternary::amx_available() ? ", amx" : " (amx: not on this machine)");
  std::size_t cases = 0;
  std::uint64_t seed = 1;
  for (std::size_t K : {1, 15, 16, 17, 63, 64, 65, 255, 256, 257, 320, 511, 700, 1025})
    for (std::size_t M : {1, 3, 7, 9, 13, 33})
      for (std::size_t N : {1, 2, 3, 4, 5, 8, 11, 17, 32, 97}) {
        if (N == 97 && (K % 64 != 1 || M < 9)) continue;  // 7 accumulator tiles: two passes over the block
        if (K > 300 && N > 5 && N != 32) continue;  // keep the sweep short; 32 rows stay at every K
        const Case c = make_case(N, M, K, seed++);
        for (ternary::Path p : paths())
          for (int threads : {1, 2, 5}) {
            ASSERT_EQ(differing(run(c, p, threads), c.spec), 0u)
                << ternary::path_name(p) << " N " << N << " M " << M << " K " << K << ", " << threads << " threads";
            ++cases;
          }
      }
  EXPECT_GT(cases, 1000u);
}

// Extreme codes at the int32 bound: every activation ±127 against weights ±1
// of one sign, |acc| = 127·131071, and a mix that cancels; against the spec's
// own integer product and epilogue.
TEST_F(TernaryGemm, ExtremeCodesAtTheBoundAreExact) {
  const std::size_t K = ops::kMaxQuantK, M = 5, N = 3;
  std::vector<std::int8_t> wq(M * K), xq(N * K);
  for (std::size_t k = 0; k < K; ++k) {
    wq[0 * K + k] = 1;
    wq[1 * K + k] = -1;
    wq[2 * K + k] = static_cast<std::int8_t>(k % 2 == 0 ? 1 : -1);
    wq[3 * K + k] = 0;
    wq[4 * K + k] = static_cast<std::int8_t>(static_cast<int>(k % 3) - 1);
    xq[0 * K + k] = 127;
    xq[1 * K + k] = -127;
    xq[2 * K + k] = static_cast<std::int8_t>(k % 5 == 0 ? -127 : 127);
  }
  const std::vector<float> step{0.75f, 1.0f / 127.0f, 3.0f};
  const float scale = 0.0371f;
  const auto acc = ops::int8_matmul_nt(xq, wq, N, M, K);
  ASSERT_EQ(acc[0], 127 * static_cast<std::int32_t>(K));
  std::vector<float> want(N * M);
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t m = 0; m < M; ++m) want[n * M + m] = ops::BitLinear::epilogue(acc[n * M + m], step[n], scale);
  const cpu::TernaryMatrix t = cpu::pack_ternary(wq.data(), M, K, scale, 2);
  for (ternary::Path p : paths()) {
    std::vector<float> y(N * M);
    ternary::gemm(p, t, xq.data(), N, step.data(), y.data(), 2);
    EXPECT_EQ(differing(y, want), 0u) << ternary::path_name(p);
  }
}

TEST_F(TernaryGemm, TheChosenPathIsAmxForManyRowsAndVnniForFewWhereTheCpuHasThem) {
  const ternary::Path few = ternary::vnni_available()   ? ternary::Path::vnni
                            : ternary::avx2_available() ? ternary::Path::avx2
                                                        : ternary::Path::scalar;
  EXPECT_EQ(ternary::chosen_path(1), few);
  EXPECT_EQ(ternary::chosen_path(ternary::kAmxMinRows - 1), few);
  EXPECT_EQ(ternary::chosen_path(ternary::kAmxMinRows), ternary::amx_available() ? ternary::Path::amx : few);
  for (std::size_t N : {std::size_t{3}, ternary::kAmxMinRows, std::size_t{20}}) {
    const Case c = make_case(N, 9, 300, 77 + N);
    std::vector<float> y(c.N * c.M);
    cpu::ternary_gemm(c.packed, c.xq.q.data(), c.N, c.xq.step.data(), y.data(), 2);
    EXPECT_EQ(differing(y, c.spec), 0u) << N << " rows";
  }
}

// The comparisons see the planted bugs: the scalar path without the +1
// offset's correction, the VNNI path without each row's last 256-code chunk.
TEST_F(TernaryGemm, PlantedBugsAreSeen) {
  const Case c = make_case(4, 9, 300, 5);
  ternary::set_mutant(ternary::Mutant::scalar_no_offset_correction);
  EXPECT_GT(differing(run(c, ternary::Path::scalar, 2), c.spec), 0u) << "scalar without the Σx correction";
  ternary::set_mutant(ternary::Mutant::vnni_tail_chunk_dropped);
  EXPECT_EQ(differing(run(c, ternary::Path::scalar, 2), c.spec), 0u) << "the vnni mutant leaves scalar alone";
  const Case whole = make_case(2, 9, 512, 6);  // two whole chunks: the last one dropped too
  if (ternary::avx2_available()) {
    EXPECT_EQ(differing(run(c, ternary::Path::avx2, 2), c.spec), 0u) << "the vnni mutant leaves avx2 alone";
    ternary::set_mutant(ternary::Mutant::avx2_tail_chunk_dropped);
    EXPECT_GT(differing(run(c, ternary::Path::avx2, 2), c.spec), 0u) << "avx2 without the last chunk";
    EXPECT_GT(differing(run(whole, ternary::Path::avx2, 1), whole.spec), 0u) << "avx2 without the last whole chunk";
    ternary::set_mutant(ternary::Mutant::vnni_tail_chunk_dropped);
  }
  if (!ternary::vnni_available()) GTEST_SKIP() << "no avx512_vnni: the vnni mutant is not run";
  EXPECT_GT(differing(run(c, ternary::Path::vnni, 2), c.spec), 0u) << "vnni without the last chunk";
  EXPECT_GT(differing(run(whole, ternary::Path::vnni, 1), whole.spec), 0u) << "vnni without the last whole chunk";
}

// The AMX kernel without each block's upper group of 8 weight rows (rows 8..15
// of every 16) is seen, on the emulated tiles and on the hardware's.
TEST_F(TernaryGemm, TheAmxPlantedBugIsSeen) {
  if (!ternary::amx_emulated_available()) GTEST_SKIP() << "not an x86-64 build: no AMX kernel";
  const Case c = make_case(5, 9, 300, 8);
  ternary::set_mutant(ternary::Mutant::amx_upper_group_dropped);
  EXPECT_EQ(differing(run(c, ternary::chosen_path(1), 2), c.spec), 0u) << "the amx mutant leaves the other paths alone";
  EXPECT_GT(differing(run(c, ternary::Path::amx_emulated, 2), c.spec), 0u) << "amx-emulated without rows 8..15";
  if (!ternary::amx_available()) GTEST_SKIP() << "no amx_int8 here: the hardware tiles' mutant is not run";
  EXPECT_GT(differing(run(c, ternary::Path::amx, 2), c.spec), 0u) << "amx without rows 8..15";
}

TEST_F(TernaryGemm, BadInputIsRefused) {
  const std::vector<std::int8_t> bad{1, 0, -1, 2, 0, 0};
  try {
    (void)cpu::pack_ternary(bad.data(), 2, 3, 1.0f, 1);
    FAIL() << "a code of 2 was packed";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("code 2 at row 1, column 0"), std::string::npos) << e.what();
  }
  cpu::TernaryMatrix wide;
  wide.rows = 1;
  wide.cols = ops::kMaxQuantK + 1;
  std::vector<std::int8_t> x(1);
  float step = 1.0f, y = 0.0f;
  EXPECT_THROW(ternary::gemm(ternary::Path::scalar, wide, x.data(), 1, &step, &y, 1), std::invalid_argument);
  for (ternary::Path p : {ternary::Path::vnni, ternary::Path::avx2, ternary::Path::amx})
    if (!ternary::path_available(p)) {
      const Case c = make_case(1, 1, 16, 3);
      std::vector<float> yv(1);
      try {
        ternary::gemm(p, c.packed, c.xq.q.data(), 1, c.xq.step.data(), yv.data(), 1);
        FAIL() << ternary::path_name(p) << " ran where it is not available";
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find(std::string("the ") + ternary::path_name(p) + " path is not available"),
                  std::string::npos)
            << e.what();
      }
    }
}

}  // namespace
