// The tiled pass 1 of the column quantizer with the bias gradient's column
// sums (backend/cuda/col_quant_sums.cu) on the host by the fiber emulator
// (cuda_host_emu.hpp), bit for bit against the CPU: the sums against
// cpu units::bias_gradient (ops::column_sums' chain), each column's fold
// summary against the specification's fold over every row in order
// (col_fold.hpp), and the step it gives (as pass 2 forms it) against cpu
// units::quantize_cols_i8's. Shapes ragged against the kernel's blocks: rows
// off its 256-row tiles and 64-row segments, 1-2 rows, none, more tiles than
// the 6-buffer ring; columns off its 8-column blocks and off a multiple of 4
// (the 4-byte staging), x misaligned (the 4-byte staging at cols % 4 == 0);
// the GPT-2 124M shapes scaled down by 8. Values: per-column scales over
// 2^-40 .. 2^20, and columns of NaN on segment and tile edges and in the
// last row, ±inf (the sum NaN), -0 only (the sum +0, the step the floor's),
// subnormals. Under shuffled thread orders too; and the planted bugs (the
// sums in pairs, a tile's segments swapped, a partial last tile dropped)
// differ. No GPU: the device's runs are test_cuda_col_quant's (label gpu).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "col_quant_emu.hpp"  // the emulator and col_quant_sums.cu's own includes, before it

#define check_launch(name) ((void)(name))
#include "lockstep/backend/cuda/col_quant_sums.cu"  // (nvcc's #pragma unroll: -Wno-unknown-pragmas, CMakeLists)
#undef check_launch

using col_quant_emu::hex;

namespace {

struct Shape {
  std::size_t rows, cols;
  std::size_t x_offset = 0;  // floats: 1 puts x off 16-byte alignment (the 4-byte staging)
  bool specials = false;
};

std::string name_of(const Shape& s) {
  return "rows " + std::to_string(s.rows) + " cols " + std::to_string(s.cols) +
         (s.x_offset ? " x off by " + std::to_string(s.x_offset) : "") + (s.specials ? " specials" : "");
}

constexpr std::uint32_t kSentinel = 0x7FC0DEADu;
constexpr std::size_t kGuard = 5;  // cells past each output that must keep the sentinel

struct Case {
  Shape s;
  std::vector<float> storage;  // [x_offset + rows·cols], x at storage + x_offset
  std::vector<float> want_sums, want_step, want_value;
  std::vector<bool> want_nan;

  Case(const Shape& sp, std::uint64_t seed) : s(sp) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal;
    std::vector<float> x(s.rows * s.cols);
    for (std::size_t j = 0; j < s.cols; ++j) {
      const float scale = ln::float_of(static_cast<std::uint32_t>(127 - 40 + static_cast<int>(rng() % 61)) << 23);
      for (std::size_t n = 0; n < s.rows; ++n) x[n * s.cols + j] = normal(rng) * scale;
      if (s.rows > 0) x[(s.rows - 1 - rng() % (s.rows < 5 ? s.rows : 5)) * s.cols + j] = 6.5f * scale;  // max last
    }
    if (s.specials && s.rows > 0) {
      const float nan = ln::float_of(0x7FC00000u), inf = ln::float_of(0x7F800000u), sub = ln::float_of(0x80000003u);
      for (std::size_t j = 0; j < s.cols; ++j) {
        const auto put = [&](std::size_t n, float v) {
          if (n < s.rows) x[n * s.cols + j] = v;
        };
        switch (j % 7) {
          case 0: for (std::size_t n : {31, 32, 63, 64, 255, 256, 257}) put(n, nan); break;  // segment, tile edges
          case 1: put(s.rows - 1, nan); break;
          case 2: put(rng() % s.rows, inf); put(rng() % s.rows, -inf); break;
          case 3: for (std::size_t n = 0; n < s.rows; ++n) put(n, -0.0f); break;
          case 4: for (std::size_t n = 0; n < s.rows; ++n) put(n, n % 2 ? sub : -sub); break;
          case 5: put(0, nan); put(rng() % s.rows, -0.0f); break;
          default: break;
        }
      }
    }
    storage.assign(s.x_offset, 0.0f);
    storage.insert(storage.end(), x.begin(), x.end());
    want_sums.resize(s.cols);
    want_step.resize(s.cols);
    std::vector<std::int8_t> q(s.rows * s.cols);
    lockstep::cpu::units::bias_gradient(x.data(), s.rows, s.cols, want_sums.data(), 1);
    lockstep::cpu::units::quantize_cols_i8(x.data(), s.rows, s.cols, kFloor, q.data(), want_step.data(), 1);
    for (std::size_t j = 0; j < s.cols; ++j) {  // the specification's fold over every row, in order
      cf::Summary f{0.0f, false};
      for (std::size_t n = 0; n < s.rows; ++n) cf::fold(f, x[n * s.cols + j]);
      want_value.push_back(f.value);
      want_nan.push_back(f.nan);
    }
  }

  static constexpr float kFloor = 1e-8f;

  // The first difference from the CPU (or ""), and how many columns differ.
  std::string run(int planted, int block_cols, std::size_t* differing = nullptr) const {
    std::vector<float> x = storage, sums(s.cols + kGuard, ln::float_of(kSentinel)),
                       partial(s.cols + kGuard, ln::float_of(kSentinel));
    std::vector<std::uint32_t> nan(s.cols + kGuard, kSentinel);
    // x 16-byte aligned at offset 0 (std::vector's allocation), off it at offset 1.
    ll::col_maxima_sums_tiled(x.data() + s.x_offset, s.rows, s.cols, partial.data(), nan.data(), sums.data(), planted,
                              block_cols);
    std::string first;
    std::size_t d = 0;
    const auto note = [&](const std::string& what) {
      if (first.empty()) first = what;
      ++d;
    };
    for (std::size_t j = 0; j < s.cols; ++j) {
      const bool sum_ok = ln::bits_of(sums[j]) == ln::bits_of(want_sums[j]) || (sums[j] != sums[j] && want_sums[j] != want_sums[j]);
      // Pass 2's step from the summary: m = max2(fold from +0, floor), m / 127.
      const float m = cf::max2(cf::from_zero(cf::Summary{partial[j], nan[j] == 1u}), kFloor);
      const float step = m / 127.0f;
      if (!sum_ok) {
        note("sums[" + std::to_string(j) + "]: cpu " + hex(want_sums[j]) + ", emulated " + hex(sums[j]));
      } else if (ln::bits_of(partial[j]) != ln::bits_of(want_value[j]) || nan[j] != (want_nan[j] ? 1u : 0u)) {
        note("summary[" + std::to_string(j) + "]: fold " + hex(want_value[j]) + (want_nan[j] ? " NaN seen" : "") +
             ", emulated " + hex(partial[j]) + " flag " + std::to_string(nan[j]));
      } else if (ln::bits_of(step) != ln::bits_of(want_step[j])) {
        note("step[" + std::to_string(j) + "]: cpu " + hex(want_step[j]) + ", emulated " + hex(step));
      }
    }
    for (std::size_t g = s.cols; g < s.cols + kGuard; ++g)
      if (ln::bits_of(sums[g]) != kSentinel || ln::bits_of(partial[g]) != kSentinel || nan[g] != kSentinel)
        note("a guard cell past column " + std::to_string(s.cols) + " was written");
    if (differing) *differing = d;
    return first;
  }
};

std::vector<Shape> shapes() {
  return {
      {1, 1},         {2, 3},        {0, 5},        {3, 8},         {63, 9},         {64, 8},
      {65, 12},       {255, 16},     {256, 8},      {257, 17},      {511, 31},       {513, 4},
      {1000, 70},     {1537, 77},    {2049, 24},    {1300, 40, 1},  {1795, 13, 1},   {2048, 96},
      {2048, 288},    {2048, 384},   {600, 45, 0, true}, {1027, 40, 0, true}, {1540, 21, 1, true},
  };
}

}  // namespace

constexpr int kWidths[] = {8, 32};  // columns a block: v2, v3

TEST(ColQuantSumsTiledEmulated, EqualsTheCpuSumsFoldsAndSteps) {
  std::uint64_t seed = 1;
  for (const Shape& s : shapes()) {
    const Case c(s, seed++);
    for (const int w : kWidths) EXPECT_EQ(c.run(ll::kColQuantClean, w), "") << name_of(s) << ", " << w << " columns a block";
  }
}

// The barrier is real: thread orders shuffled every round change nothing.
TEST(ColQuantSumsTiledEmulated, ShuffledThreadOrders) {
  emu::cta.shuffle_order = true;
  std::uint64_t seed = 100;
  for (const Shape& s : {Shape{1537, 77}, Shape{2049, 24}, Shape{1300, 40, 1}, Shape{1027, 40, 0, true}}) {
    const Case c(s, seed++);
    for (const int w : kWidths)
      for (int round = 0; round < 2; ++round)
        EXPECT_EQ(c.run(ll::kColQuantClean, w), "") << name_of(s) << ", " << w << " columns a block, round " << round;
  }
  emu::cta.shuffle_order = false;
}

// The planted bugs differ: the device mutants' (the sums in pairs,
// Mutant::col_quant_sums_in_pairs; a tile's segments swapped,
// Mutant::col_quant_sums_tile_rows_swapped) and the last partial tile dropped.
TEST(ColQuantSumsTiledEmulated, PlantedBugsDiffer) {
  const Case full(Shape{1000, 70}, 7), narrow(Shape{1300, 40, 1}, 8), ragged(Shape{257, 17}, 9);
  std::size_t d = 0;
  for (const auto& [planted, what] : std::vector<std::pair<int, const char*>>{
           {ll::kColQuantSumsInPairs, "the sums added in pairs"},
           {ll::kColQuantSumsTileRowsSwapped, "a tile's rows 64..127 added before 0..63"},
           {ll::kColQuantSumsLastTileDropped, "the partial last tile dropped"}}) {
    for (const int w : kWidths) {
      EXPECT_NE(full.run(planted, w, &d), "") << what << ", " << w << " columns a block";
      std::printf("planted: %s: %zu of 70 columns differ (rows 1000 cols 70, 16-byte staging, %d columns a block)\n",
                  what, d, w);
      EXPECT_NE(narrow.run(planted, w, &d), "") << what << ", 4-byte staging, " << w << " columns a block";
      std::printf("planted: %s: %zu of 40 columns differ (rows 1300 cols 40, x misaligned: 4-byte staging, %d columns "
                  "a block)\n",
                  what, d, w);
    }
  }
  // Rows 257 hold a full tile and a 1-row one: the dropped tile loses the last row.
  for (const int w : kWidths) {
    EXPECT_NE(ragged.run(ll::kColQuantSumsLastTileDropped, w, &d), "") << "the 1-row last tile dropped, " << w;
    EXPECT_EQ(ragged.run(ll::kColQuantClean, w), "") << w;
  }
}
