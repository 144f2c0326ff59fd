// The canonical CUDA GEMM (backend/cuda/gemm.cu) against cpu::gemm, bit for
// bit: the three linear-layer layouts and the general strided form, on ragged
// shapes (sizes off the 128 × 128 × 8 tiles and the 4-wide vectors), K = 0,
// special values (signed zeros, subnormal products that round to -0, inf,
// NaN), padded output rows (nothing outside the matrix written), a few large
// shapes, each under every block tile and the launcher's choice; then
// linear/BitLinear through their gates (gate_driver.cpp, ops/linear.hpp's gate cases).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "lockstep/backend/cpu/gemm.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/gemm_launch.hpp"
#include "lockstep/backend/cuda/probe.hpp"
#include "lockstep/num/fp.hpp"

namespace {

namespace lc = lockstep::cuda;
namespace ln = lockstep::num;

#define REQUIRE_DEVICE()                            \
  do {                                              \
    std::string why;                                \
    if (!lc::available(&why)) GTEST_SKIP() << why;  \
  } while (0)

std::vector<float> random_vector(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Values that make the chain's rounding visible: signed zeros, products that
// underflow to ∓0 or to subnormals, large values (inf after a few steps),
// inf and NaN.
std::vector<float> special_vector(std::size_t n, std::mt19937_64& rng) {
  const float pool[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-20f, -3e-25f, 1.0f, -1.0f, 3e38f, -3e38f,
                        ln::float_of(0x00000001u), ln::float_of(0x80000003u), ln::float_of(0x7F800000u),
                        ln::float_of(0xFF800000u), ln::float_of(0x7FC00001u), 0.5f};
  std::uniform_int_distribution<int> pick(0, 15);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) {
    const int p = pick(rng);
    x = p < 13 ? pool[p] : (p < 15 ? d(rng) : pool[15]);
  }
  return v;
}

enum class Layout { xwt, dyw, dytx, at_b };  // at_b: A i-contiguous, B k-contiguous (general form only)
const char* name(Layout l) {
  switch (l) {
    case Layout::xwt: return "xwt";
    case Layout::dyw: return "dyw";
    case Layout::dytx: return "dytx";
    case Layout::at_b: return "at_b";
  }
  return "?";
}

// One product on the CPU and the GPU. For xwt/dyw/dytx (N, M, K) are the
// linear layer's (rows, out, in); for at_b, C[N, M] = Aᵀ·B with A [K, N],
// B [M, K] (chain length K). The GPU runs once per block tile of `tiles`
// (0: the launcher's choice) against one CPU result. Returns "" or the first
// failing tile's first_difference message.
std::string compare(Layout l, std::size_t N, std::size_t M, std::size_t K, std::uint64_t seed, bool special,
                    const std::vector<int>& tiles) {
  std::mt19937_64 rng(seed);
  auto gen = [&](std::size_t n) { return special ? special_vector(n, rng) : random_vector(n, rng); };
  std::vector<float> a, b, c;
  std::size_t row_len = 0;
  switch (l) {
    case Layout::xwt:
      a = gen(N * K), b = gen(M * K), c.assign(N * M, 0.0f), row_len = M;
      lockstep::cpu::gemm_xwt(N, M, K, a.data(), b.data(), c.data(), 0);
      break;
    case Layout::dyw:
      a = gen(N * M), b = gen(M * K), c.assign(N * K, 0.0f), row_len = K;
      lockstep::cpu::gemm_dyw(N, M, K, a.data(), b.data(), c.data(), 0);
      break;
    case Layout::dytx:
      a = gen(N * M), b = gen(N * K), c.assign(M * K, 0.0f), row_len = K;
      lockstep::cpu::gemm_dytx(N, M, K, a.data(), b.data(), c.data(), 0);
      break;
    case Layout::at_b:
      a = gen(K * N), b = gen(M * K), c.assign(N * M, 0.0f), row_len = M;
      lockstep::cpu::gemm(N, M, K, a.data(), 1, N, b.data(), 1, K, c.data(), M, 0);
      break;
  }
  lc::DeviceBuffer<float> ga, gb, gc;
  ga.upload(a);
  gb.upload(b);
  for (int tile : tiles) {
    lc::launch::gemm_tile_override(tile);
    gc.assign(c.size(), ln::float_of(0x7F7FFFFFu));  // poison: every cell must be written
    switch (l) {
      case Layout::xwt: lc::launch::gemm_xwt(N, M, K, ga.data(), gb.data(), gc.data()); break;
      case Layout::dyw: lc::launch::gemm_dyw(N, M, K, ga.data(), gb.data(), gc.data()); break;
      case Layout::dytx: lc::launch::gemm_dytx(N, M, K, ga.data(), gb.data(), gc.data()); break;
      case Layout::at_b: lc::launch::gemm(N, M, K, ga.data(), 1, N, gb.data(), 1, K, gc.data(), M); break;
    }
    lc::launch::gemm_tile_override(0);
    lc::synchronize("gemm test");
    const std::string diff = lc::gate::first_difference("C", c, gc.download(), row_len);
    if (!diff.empty()) return "tile " + std::to_string(tile) + ": " + diff;
  }
  return "";
}

// Every block tile (gemm_launch.hpp's override numbers), then the launcher's choice.
std::vector<int> all_tiles() {
  std::vector<int> t;
  for (int i = 1; i <= lc::launch::kGemmTiles; ++i) t.push_back(i);
  t.push_back(0);
  return t;
}

struct Dims {
  std::size_t N, M, K;
};

const std::vector<Dims>& ragged_dims() {
  static const std::vector<Dims> d = {
      {1, 1, 1},     {1, 3, 1},       {2, 1, 7},      {37, 129, 65},  {129, 200, 257}, {130, 131, 9},
      {128, 128, 8}, {128, 128, 16},  {4, 4, 4},      {257, 129, 300}, {64, 68, 132},  {200, 260, 264},
      {129, 127, 8}, {1, 1000, 1001}, {333, 5, 1030}, {5, 7, 0},       {256, 256, 256}, {3, 260, 17},
      {145, 129, 23}, {113, 300, 9}, {49, 257, 33}, {300, 144, 40}, {131, 289, 19}, {129, 148, 12}};
  return d;
}

TEST(CudaGemm, LayoutsMatchCpuOnRaggedShapes) {
  REQUIRE_DEVICE();
  int n = 0;
  const auto tiles = all_tiles();
  for (Layout l : {Layout::xwt, Layout::dyw, Layout::dytx, Layout::at_b})
    for (const Dims& d : ragged_dims()) {
      const std::string diff = compare(l, d.N, d.M, d.K, 1000u + n, false, tiles);
      n += static_cast<int>(tiles.size());
      EXPECT_EQ(diff, "") << name(l) << " N " << d.N << " M " << d.M << " K " << d.K;
    }
  std::printf("ragged: %d products (%zu tiles incl. auto x 4 layouts x %zu shapes) bit-identical to cpu::gemm\n", n,
              tiles.size(), ragged_dims().size());
}

TEST(CudaGemm, SpecialValuesMatchCpu) {
  REQUIRE_DEVICE();
  int n = 0;
  const auto tiles = all_tiles();
  for (Layout l : {Layout::xwt, Layout::dyw, Layout::dytx, Layout::at_b})
    for (const Dims& d : {Dims{37, 129, 65}, Dims{130, 131, 9}, Dims{64, 68, 132}, Dims{7, 5, 3}, Dims{150, 136, 20}}) {
      const std::string diff = compare(l, d.N, d.M, d.K, 77u + n, true, tiles);
      n += static_cast<int>(tiles.size());
      EXPECT_EQ(diff, "") << name(l) << " (special values) N " << d.N << " M " << d.M << " K " << d.K;
    }
  std::printf("special values: %d products bit-identical\n", n);
}

// The general form writes only [0, I) × [0, J) of a C whose rows are longer.
TEST(CudaGemm, PaddedOutputRowsUntouched) {
  REQUIRE_DEVICE();
  const std::size_t I = 131, J = 67, K = 45, ldc = J + 5;
  std::mt19937_64 rng(5);
  const auto a = random_vector(I * K, rng), b = random_vector(K * J, rng);
  std::vector<float> c(I * ldc, ln::float_of(0x7F7FFFFFu));
  lockstep::cpu::gemm(I, J, K, a.data(), K, 1, b.data(), J, 1, c.data(), ldc, 0);
  lc::DeviceBuffer<float> ga, gb, gc;
  ga.upload(a);
  gb.upload(b);
  gc.assign(c.size(), ln::float_of(0x7F7FFFFFu));
  lc::launch::gemm(I, J, K, ga.data(), K, 1, gb.data(), J, 1, gc.data(), ldc);
  EXPECT_EQ(lc::gate::first_difference("C", c, gc.download(), ldc), "");
}

TEST(CudaGemm, LargeShapesMatchCpu) {
  REQUIRE_DEVICE();
  // GPT-2 layer shapes with fewer rows, and the vocabulary's odd width.
  const std::vector<Dims> big = {{512, 2304, 768}, {512, 3072, 768}, {512, 768, 3072}, {256, 50257, 768}, {2048, 768, 768}};
  int n = 0;
  const auto tiles = all_tiles();
  for (const Dims& d : big)
    for (Layout l : {Layout::xwt, Layout::dyw, Layout::dytx}) {
      const std::string diff = compare(l, d.N, d.M, d.K, 9000u + n++, false, tiles);
      EXPECT_EQ(diff, "") << name(l) << " N " << d.N << " M " << d.M << " K " << d.K;
      std::printf("large: %s N %zu M %zu K %zu, %zu tiles: %s\n", name(l), d.N, d.M, d.K, tiles.size(),
                  diff.empty() ? "bit-identical" : diff.c_str());
    }
}

TEST(CudaGemm, ColumnSumsMatchCpuChain) {
  REQUIRE_DEVICE();
  // Rows off the kernel's 64-row tiles and its 5-buffer ring (321 = 5·64 + 1,
  // 4097), columns off its 32-column blocks, and the GPT-2 shapes.
  for (const Dims& d : {Dims{1, 3, 0}, Dims{300, 33, 0}, Dims{1000, 768, 0}, Dims{513, 1, 0}, Dims{321, 65, 0},
                        Dims{4097, 100, 0}, Dims{16384, 768, 0}, Dims{16384, 3072, 0}}) {
    std::mt19937_64 rng(d.N * 7 + d.M);
    const auto a = random_vector(d.N * d.M, rng);
    std::vector<float> want(d.M, 0.0f);
    for (std::size_t n = 0; n < d.N; ++n)
      for (std::size_t j = 0; j < d.M; ++j) want[j] = want[j] + a[n * d.M + j];
    lc::DeviceBuffer<float> ga, gout;
    ga.upload(a);
    gout.assign(d.M, ln::float_of(0x7F7FFFFFu));
    lc::launch::column_sums(ga.data(), d.N, d.M, gout.data());
    EXPECT_EQ(lc::gate::first_difference("db", want, gout.download()), "") << "N " << d.N << " D " << d.M;
    if (d.N == 16384) {  // the bias gradient of a GPT-2 124M layer (B 16, T 1024): 48 per training step
      constexpr int kReps = 20;
      lc::synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < kReps; ++r) lc::launch::column_sums(ga.data(), d.N, d.M, gout.data());
      lc::synchronize();
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / kReps;
      std::printf("column sums %zu x %zu: %.3f ms per launch (mean of %d)\n", d.N, d.M, ms, kReps);
    }
  }
}

TEST(CudaGemm, LinearGatesPass) {
  REQUIRE_DEVICE();
  const auto cases = lc::gate::cases_of({"linear", "bitlinear"});
  const auto outcomes = lc::gate::run_gates(cases, {});
  int failed = 0;
  double seconds = 0;
  for (const auto& o : outcomes) {
    seconds += o.seconds;
    if (!o.difference.empty()) {
      ++failed;
      ADD_FAILURE() << o.kernel << " on " << o.shape << (o.poisoned ? " (dirty pass)" : "") << ": " << o.difference;
    }
  }
  std::printf("linear gates: %zu cases x 2 passes = %zu outcomes, %d failed, %.2f s\n", cases.size(), outcomes.size(),
              failed, seconds);
  EXPECT_EQ(outcomes.size(), 2 * cases.size());
}

}  // namespace
