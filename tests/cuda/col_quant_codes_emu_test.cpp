// The overlapped pass 2 of the column quantizer (backend/cuda/col_quant_codes.cu,
// LOCKSTEP_COL_CODES=v2) on the host by the fiber emulator (cuda_host_emu.hpp),
// bit for bit against the CPU: codes byte for byte and steps bit for bit
// against cpu units::quantize_cols_i8 (ops::quantize_cols), the guard cells
// around both untouched. Its input, pass 1's chunk summaries, is formed here
// on the host by the specification's fold over each chunk's rows in order
// (col_fold.hpp), in both layouts pass 1 writes: 512-row chunks (no column
// sums) and one summary a column (with sums). Shapes ragged against its
// blocks (512 rows, 128-row sub-tiles, 8-row warp strides, 32-column strips,
// rows off a multiple of 4 for the word stores, codes off word alignment),
// none, and the GPT-2 124M shapes scaled down (rows 513, 1024, 16384 × cols 1,
// 65, 768, 2304, as far as the emulator affords). Values: per-column scales
// over 2^-40 .. 2^20 with the maximum among the last rows; columns of NaN at
// chunk, sub-tile and warp edges and in the last row, ±inf, -0 only, all zero,
// subnormals, all below the floor; both floors (1e-8, 2^-100). Under shuffled
// thread orders too; and the planted bugs (a sub-tile quantized from the
// previous one's registers, one code tile for two, the last chunk left out of
// the join) differ. No GPU: the device's runs are test_cuda_col_quant's.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "col_quant_emu.hpp"  // the emulator and col_quant_codes.cu's own includes, before it

#define check_launch(name) ((void)(name))
#include "lockstep/backend/cuda/col_quant_codes.cu"  // (nvcc's #pragma unroll: -Wno-unknown-pragmas, CMakeLists)
#undef check_launch

using col_quant_emu::hex;

namespace {

struct Shape {
  std::size_t rows, cols;
  bool specials = false;
  bool dy_floor = false;        // 2^-100 (the cotangent's) instead of 1e-8
  std::size_t code_offset = 0;  // the codes start this many bytes past a word
};

std::string name_of(const Shape& s) {
  return "rows " + std::to_string(s.rows) + " cols " + std::to_string(s.cols) + (s.specials ? " specials" : "") +
         (s.dy_floor ? " floor 2^-100" : "") + (s.code_offset ? " codes at +" + std::to_string(s.code_offset) : "");
}

constexpr std::uint32_t kSentinel = 0x7FC0DEADu;
constexpr std::int8_t kCodeFill = -128;  // never a code
constexpr std::size_t kLead = 8, kTail = 9;

struct Case {
  Shape s;
  float floor_x;
  std::vector<float> x;
  std::vector<std::int8_t> want_q;
  std::vector<float> want_step;

  Case(const Shape& sp, std::uint64_t seed) : s(sp), floor_x(sp.dy_floor ? ln::float_of(0x0D800000u) : 1e-8f) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal;
    x.resize(s.rows * s.cols);
    for (std::size_t j = 0; j < s.cols; ++j) {
      const float scale = ln::float_of(static_cast<std::uint32_t>(127 - 40 + static_cast<int>(rng() % 61)) << 23);
      for (std::size_t n = 0; n < s.rows; ++n) x[n * s.cols + j] = normal(rng) * scale;
      if (s.rows > 0) x[(s.rows - 1 - rng() % (s.rows < 7 ? s.rows : 7)) * s.cols + j] = (rng() % 2 ? 5.5f : -5.5f) * scale;
    }
    if (s.specials && s.rows > 0) {
      const float nan = ln::float_of(0x7FC00000u), inf = ln::float_of(0x7F800000u), sub = ln::float_of(0x00000003u);
      for (std::size_t j = 0; j < s.cols; ++j) {
        const auto put = [&](std::size_t n, float v) {
          if (n < s.rows) x[n * s.cols + j] = v;
        };
        switch (j % 10) {
          case 0: for (std::size_t n : {7, 8, 127, 128, 511, 512, 513, 1023}) put(n, nan); break;  // warp, sub-tile, chunk edges
          case 1: put(s.rows - 1, nan); break;  // the fold ends on NaN: the floor
          case 2: put(0, nan); break;
          case 3: put(rng() % s.rows, inf); put(rng() % s.rows, -inf); break;
          case 4: for (std::size_t n = 0; n < s.rows; ++n) put(n, n % 2 == 0 ? -0.0f : 0.0f); break;  // floor only
          case 5: for (std::size_t n = 0; n < s.rows; ++n) put(n, n % 3 == 0 ? -sub : sub); break;
          case 6: for (std::size_t n = 0; n < s.rows; ++n) put(n, normal(rng) * 1e-12f); break;  // below 1e-8
          case 7: for (std::size_t n = 0; n < s.rows; ++n) put(n, 0.0f); break;  // a zero column
          case 8: put(rng() % s.rows, -inf); put(rng() % s.rows, -0.0f); break;
          default: put(rng() % s.rows, nan); break;
        }
      }
    }
    want_q.resize(s.rows * s.cols);
    want_step.resize(s.cols);
    lockstep::cpu::units::quantize_cols_i8(x.data(), s.rows, s.cols, floor_x, want_q.data(), want_step.data(), 1);
  }

  // Pass 1's output: chunks of `chunk_rows` rows (0: one summary a column),
  // each the specification's fold over its rows in order.
  void summaries(std::size_t chunk_rows, std::size_t* chunks, std::vector<float>& partial,
                 std::vector<std::uint32_t>& nan) const {
    *chunks = chunk_rows == 0 ? 1 : (s.rows + chunk_rows - 1) / chunk_rows;
    const std::size_t per = chunk_rows == 0 ? s.rows : chunk_rows;
    partial.assign(*chunks * s.cols + 1, 0.0f);
    nan.assign(*chunks * s.cols + 1, 0u);
    for (std::size_t c = 0; c < *chunks; ++c)
      for (std::size_t j = 0; j < s.cols; ++j) {
        cf::Summary f{0.0f, false};
        for (std::size_t n = c * per; n < s.rows && n < (c + 1) * per; ++n) cf::fold(f, x[n * s.cols + j]);
        partial[c * s.cols + j] = f.value;
        nan[c * s.cols + j] = f.nan ? 1u : 0u;
      }
  }

  // The first difference from the CPU (or ""), and how many cells differ.
  std::string run(int planted, std::size_t chunk_rows, std::size_t* differing = nullptr) const {
    std::size_t chunks = 0;
    std::vector<float> partial;
    std::vector<std::uint32_t> nan;
    summaries(chunk_rows, &chunks, partial, nan);
    if (chunk_rows != 0 && s.rows == 0) chunks = 0;  // col_quantize_i8_2p's: no rows, no chunks (without sums)
    const std::size_t n = s.rows * s.cols;
    // Word-aligned storage for the codes: kLead + code_offset bytes before them.
    std::vector<std::uint32_t> qstore((kLead + s.code_offset + n + kTail + 3) / 4 + 1);
    auto* qbase = reinterpret_cast<std::int8_t*>(qstore.data());
    std::memset(qbase, static_cast<unsigned char>(kCodeFill), qstore.size() * 4);
    std::int8_t* q = qbase + kLead + s.code_offset;
    std::vector<float> step(kLead + s.cols + kTail, ln::float_of(kSentinel));
    ll::col_steps_codes_overlapped(x.data(), s.rows, s.cols, chunks, partial.data(), nan.data(), floor_x,
                                   step.data() + kLead, q, planted);
    std::string first;
    std::size_t d = 0;
    const auto note = [&](const std::string& what) {
      if (first.empty()) first = what;
      ++d;
    };
    for (std::size_t i = 0; i < kLead + s.code_offset; ++i)
      if (qbase[i] != kCodeFill) note("a guard byte before the codes was written");
    for (std::size_t i = 0; i < kTail; ++i)
      if (q[n + i] != kCodeFill) note("a guard byte past the codes was written");
    for (std::size_t i = 0; i < n; ++i)
      if (q[i] != want_q[i])
        note("codes[" + std::to_string(i) + "] (column " + std::to_string(i / (s.rows ? s.rows : 1)) + ", row " +
             std::to_string(i % (s.rows ? s.rows : 1)) + "): cpu " + std::to_string(want_q[i]) + ", emulated " +
             std::to_string(q[i]));
    for (std::size_t j = 0; j < s.cols; ++j)
      if (ln::bits_of(step[kLead + j]) != ln::bits_of(want_step[j]))
        note("step[" + std::to_string(j) + "]: cpu " + hex(want_step[j]) + ", emulated " + hex(step[kLead + j]));
    for (std::size_t i = 0; i < kLead; ++i)
      if (ln::bits_of(step[i]) != kSentinel || ln::bits_of(step[kLead + s.cols + i]) != kSentinel)
        note("a guard cell around the steps was written");
    if (differing) *differing = d;
    return first;
  }
};

constexpr std::size_t kChunks[] = {512, 0};  // pass 1 without sums (512-row chunks), with sums (one a column)

std::vector<Shape> ragged() {
  return {
      {1, 1},         {2, 3},         {0, 5},          {3, 40},          {7, 33},         {8, 32},
      {127, 31},      {128, 32},      {129, 9},        {383, 64},        {511, 33},       {512, 32},
      {1537, 77},     {2049, 40},     {1027, 129},     {1024, 40, false, false, 1},        {1024, 33, false, true, 3},
      {2048, 24, false, false, 2},    {600, 45, true}, {1027, 70, true, true}, {4099, 40, true}, {1100, 21, true, false, 1},
  };
}

}  // namespace

TEST(ColQuantCodesEmulated, RaggedShapesEqualTheCpu) {
  std::uint64_t seed = 1;
  for (const Shape& s : ragged()) {
    const Case c(s, seed++);
    for (const std::size_t k : kChunks)
      EXPECT_EQ(c.run(ll::kColQuantClean, k), "") << name_of(s) << (k ? ", 512-row chunks" : ", one summary a column");
  }
}

// The GPT-2 124M shapes of the unit backward scaled down in rows (the codes
// of x, W and dy: 16384 × 768 | 2304 | 3072, 2304 × 768, ...), the widths kept
// where the emulator affords them.
TEST(ColQuantCodesEmulated, Gpt2ShapesScaledDownEqualTheCpu) {
  std::uint64_t seed = 50;
  for (const std::size_t rows : {513, 1024, 16384})
    for (const std::size_t cols : {1, 65, 768, 2304}) {
      if (rows * cols > 16384 * 768) continue;  // 16384 × 2304: ~2,300 blocks, beyond the emulator's budget here
      const auto t0 = std::chrono::steady_clock::now();
      const Case c(Shape{rows, cols, cols == 65}, seed++);
      for (const std::size_t k : kChunks) {
        if (rows * cols > 1024 * 2304 && k == 0) continue;  // the big ones in the chunked layout only
        EXPECT_EQ(c.run(ll::kColQuantClean, k), "")
            << name_of(c.s) << (k ? ", 512-row chunks" : ", one summary a column");
      }
      std::printf("rows %zu cols %zu: %.1f s\n", rows, cols,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
}

// The barriers are real: thread orders shuffled every round change nothing.
TEST(ColQuantCodesEmulated, ShuffledThreadOrders) {
  emu::cta.shuffle_order = true;
  std::uint64_t seed = 100;
  for (const Shape& s : {Shape{1537, 77}, Shape{1027, 70, true, true}, Shape{1024, 33, false, true, 3}, Shape{129, 9}}) {
    const Case c(s, seed++);
    for (const std::size_t k : kChunks)
      for (int round = 0; round < 2; ++round)
        EXPECT_EQ(c.run(ll::kColQuantClean, k), "") << name_of(s) << ", round " << round << (k ? ", chunks" : "");
  }
  emu::cta.shuffle_order = false;
}

// The planted bugs differ: a sub-tile quantized from the previous sub-tile's
// registers (its own loads not yet landed there), one code tile where the
// kernel keeps two (a sub-tile's codes overwrite what the previous store still
// reads; seen under the plain order too), and the last chunk of rows left out
// of the join (Mutant::col_quant_last_chunk_dropped: a column whose maximum
// lies there gets too small a step).
TEST(ColQuantCodesEmulated, PlantedBugsDiffer) {
  const Case full(Shape{1537, 77}, 7), small(Shape{129, 9}, 8);
  std::size_t d = 0;
  for (const auto& [planted, what] : std::vector<std::pair<int, const char*>>{
           {ll::kColQuantCodesStaleSubTile, "a sub-tile quantized from the previous one's registers"},
           {ll::kColQuantCodesOneTile, "one code tile for two"},
           {ll::kColQuantLastChunkDropped, "the last chunk left out of the join"}}) {
    EXPECT_NE(full.run(planted, 512, &d), "") << what;
    std::printf("planted: %s: %zu cells differ (rows 1537 cols 77, 512-row chunks)\n", what, d);
    if (planted != ll::kColQuantLastChunkDropped) {  // one chunk a column: nothing to drop
      EXPECT_NE(full.run(planted, 0, &d), "") << what << ", one summary a column";
      emu::cta.shuffle_order = true;
      EXPECT_NE(full.run(planted, 512, &d), "") << what << ", shuffled";
      emu::cta.shuffle_order = false;
    }
  }
  // 129 rows: sub-tile 1 holds one row: the stale bug's reach there.
  EXPECT_NE(small.run(ll::kColQuantCodesStaleSubTile, 512, &d), "") << "stale sub-tile, 129 rows";
  EXPECT_EQ(small.run(ll::kColQuantClean, 512), "");
}
