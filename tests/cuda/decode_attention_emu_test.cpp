// The cached attention of decoding, v2 (backend/cuda/decode_attention_v2.cu:
// the scores launch and the fold launch) and v3 (the same file: the scores
// computed by the fold's own CTAs, one launch), on the host by the fiber emulator
// (cuda_host_emu.hpp), against ops::CachedAttention::forward (the spec) bit for
// bit: rows of different lengths in one launch (1 key, a block's last key, one
// past it, many blocks, the cache's last position), GQA groups of 1, 3, 4, 8
// and 16 query heads, head dims 1, 6 (the 4-byte copies), 33 and 100 (a last
// d slice part-idle), 64, 128 (the 2B4T heads), key blocks 4, 5, 7, 64, 100
// (blocks shorter and longer than the 32-key score chunks and the V ring),
// −0 in q, k and v, equal keys (ties in the block maxima), a NaN key, a large
// score range (p and alpha underflowing to 0); a scratch and an output full of
// NaN beforehand; under shuffled thread orders; and its planted bugs (a block's
// maximum from the next block, a block's acc chains in descending key order,
// no barrier before a V ring slot is restaged; v3's own: the score chains over
// d descending, no barrier before a K chunk is restaged) differ. No GPU: this
// proves the kernels' logic; the device's runs are test_infer_decode_kernels_gpu's (label gpu).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_host_emu.hpp"
// decode_attention_v2.cu's own includes first, so that the hook below renames only its calls.
#include "lockstep/backend/cuda/cp_async.cuh"
#include "lockstep/backend/cuda/decode_launch.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/stage_keys.cuh"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/ops/attention.hpp"
#include "lockstep/ops/cached_attention.hpp"

#define check_launch(name) ((void)(name))
#include "lockstep/backend/cuda/decode_attention_v2.cu"  // (nvcc's #pragma unroll: -Wno-unknown-pragmas, CMakeLists)
#undef check_launch

namespace ll = lockstep::cuda::launch;
namespace ops = lockstep::ops;

namespace {

struct Shape {
  std::size_t q_heads, kv_heads, head_dim, ctx, key_block;
  std::vector<std::int32_t> slot, pos;
  float q_range = 2.0f;  // 30: scores of ±hundreds
  bool nan_key = false;  // one key of slot 0 (position 3) holds a NaN
};

std::string name_of(const Shape& s) {
  std::string n = "Hq " + std::to_string(s.q_heads) + " Hkv " + std::to_string(s.kv_heads) + " Dh " +
                  std::to_string(s.head_dim) + " ctx " + std::to_string(s.ctx) + " KB " + std::to_string(s.key_block) +
                  " rows";
  for (std::size_t r = 0; r < s.slot.size(); ++r)
    n += " (" + std::to_string(s.slot[r]) + ", " + std::to_string(s.pos[r]) + ")";
  if (s.q_range != 2.0f) n += " q range " + std::to_string(s.q_range);
  if (s.nan_key) n += " a NaN key";
  return n;
}

std::string hex(float v) {
  char b[32];
  std::snprintf(b, sizeof b, "%a", static_cast<double>(v));
  return b;
}

struct Case {
  Shape s;
  std::size_t rows, slots, kvd, ldq;
  std::vector<float> q, k, v, want;

  Case(const Shape& sp, std::uint64_t seed) : s(sp) {
    rows = s.slot.size();
    slots = 0;
    for (std::int32_t x : s.slot) slots = std::max(slots, static_cast<std::size_t>(x) + 1);
    kvd = s.kv_heads * s.head_dim;
    ldq = s.q_heads * s.head_dim + 3;  // q rows padded (a fused q|k|v row's stride)
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    q.resize(rows * ldq);
    for (float& x : q) x = s.q_range * u(rng);
    k.resize(slots * s.ctx * kvd);
    v.resize(k.size());
    for (float& x : k) x = 2.0f * u(rng);
    for (float& x : v) x = 2.0f * u(rng);
    // −0 in each operand; two equal keys (positions 1 and 2 of slot 0: tied scores in block 0).
    q[0] = -0.0f;
    k[1] = -0.0f;
    v[2] = -0.0f;
    if (s.ctx > 2)
      for (std::size_t e = 0; e < kvd; ++e) k[2 * kvd + e] = k[1 * kvd + e];
    if (s.nan_key && s.ctx > 3) k[3 * kvd] = std::numeric_limits<float>::quiet_NaN();
    want.resize(rows * s.q_heads * s.head_dim);
    ops::CachedAttention::forward(config(), ops::CachedAttention::Args<float>{q.data(), ldq, k.data(), v.data(),
                                                                                s.slot.data(), s.pos.data(),
                                                                                want.data()});
  }
  ops::CachedAttention::Config config() const {
    ops::CachedAttention::Config c;
    c.rows = rows;
    c.q_heads = s.q_heads;
    c.kv_heads = s.kv_heads;
    c.head_dim = s.head_dim;
    c.slots = slots;
    c.ctx = s.ctx;
    c.key_block = s.key_block;
    return c;
  }

  // The first differing cell (or ""), and how many differ, of v2 (version 2) or v3 (ll::kDecodeAttentionV3).
  std::string run(int version, const ll::CachedAttentionV2Options& options, std::size_t* differing = nullptr) const {
    ll::CachedAttentionShape sh;
    sh.rows = rows;
    sh.q_heads = s.q_heads;
    sh.kv_heads = s.kv_heads;
    sh.head_dim = s.head_dim;
    sh.ctx = s.ctx;
    sh.key_block = s.key_block;
    sh.ldq = ldq;
    sh.scale = ops::Attention::scale_of<float>(config().attention());
    const bool v3 = version == ll::kDecodeAttentionV3;
    if (!(v3 ? ll::cached_attention_v3_fits(sh) : ll::cached_attention_v2_fits(sh))) return "the shape does not fit";
    std::vector<float> got(want.size(), std::numeric_limits<float>::quiet_NaN()),
        scores(rows * s.q_heads * s.ctx, std::numeric_limits<float>::quiet_NaN());
    if (v3)
      ll::cached_attention_v3(sh, q.data(), k.data(), v.data(), s.slot.data(), s.pos.data(), got.data(), options);
    else
      ll::cached_attention_v2(sh, q.data(), k.data(), v.data(), s.slot.data(), s.pos.data(), got.data(),
                              scores.data(), options);
    std::string first;
    std::size_t d = 0;
    for (std::size_t i = 0; i < want.size(); ++i)
      if (std::memcmp(&want[i], &got[i], sizeof(float)) != 0) {
        if (first.empty()) {
          const std::size_t cell = s.q_heads * s.head_dim;
          first = "o[row " + std::to_string(i / cell) + ", head " + std::to_string(i % cell / s.head_dim) + ", d " +
                  std::to_string(i % s.head_dim) + "]: spec " + hex(want[i]) + ", emulated " + hex(got[i]);
        }
        ++d;
      }
    if (differing) *differing = d;
    return first;
  }
};

std::vector<Shape> shapes() {
  return {
      // The 2B4T heads: 1 key, a block's last key, one past it, 8 blocks and a cut ninth, the cache's last position.
      {20, 5, 128, 520, 64, {0, 1, 2, 0, 3, 1}, {0, 63, 64, 511, 519, 200}},
      {4, 4, 64, 130, 64, {0, 1}, {129, 64}},         // multi-head (groups of 1)
      {6, 2, 33, 90, 7, {1, 0, 1}, {89, 6, 7}},       // groups of 3, a 33-wide head (2 slices), key block 7
      {8, 1, 6, 70, 5, {0, 0}, {69, 4}},              // multi-query (8), head_dim 6: the 4-byte copies
      {16, 1, 100, 40, 4, {0}, {39}},                 // 16 query heads a kv head (512 threads), 4 slices
      {2, 1, 1, 300, 100, {0, 1}, {299, 150}},        // head_dim 1, key blocks longer than the 32-key chunks
      {20, 5, 128, 260, 64, {0, 1}, {259, 70}, 30.0f},  // scores of ±hundreds: p and alpha underflow
      {4, 1, 32, 200, 64, {0, 1}, {199, 5}, 2.0f, true},  // a NaN key in slot 0
      {8, 2, 128, 70, 64, {0}, {69}},
  };
}

}  // namespace

constexpr int kVersions[] = {2, ll::kDecodeAttentionV3};
const char* name_of(int version) { return version == 2 ? "v2" : "v3"; }

TEST(CachedAttentionV2Emulated, EqualsTheCachedAttentionSpec) {
  std::uint64_t seed = 1;
  for (const Shape& s : shapes()) {
    const Case c(s, seed++);
    for (int version : kVersions) EXPECT_EQ(c.run(version, {}), "") << name_of(version) << ", " << name_of(s);
  }
}

// The barriers are real: thread orders shuffled every round change nothing.
TEST(CachedAttentionV2Emulated, ShuffledThreadOrders) {
  emu::cta.shuffle_order = true;
  std::uint64_t seed = 100;
  for (const Shape& s : {Shape{20, 5, 128, 520, 64, {0, 1}, {519, 64}}, Shape{6, 2, 33, 90, 7, {1, 0}, {89, 6}},
                         Shape{8, 1, 6, 70, 5, {0}, {69}}, Shape{16, 1, 100, 40, 4, {0}, {39}}}) {
    const Case c(s, seed++);
    for (int version : kVersions)
      for (int round = 0; round < 2; ++round)
        EXPECT_EQ(c.run(version, {}), "") << name_of(version) << ", " << name_of(s) << ", round " << round;
  }
  emu::cta.shuffle_order = false;
}

// The planted bugs differ: the device mutants (DecodeAttentionMutant) that the
// GPU test plants too, and a barrier left out; the fold's in v2 and v3 (one
// fold_blocks), v3's score chunks' in v3.
TEST(CachedAttentionV2Emulated, PlantedBugsDiffer) {
  // 9 blocks at the longer row: past the V ring's 6 slots, so slots are restaged (and 5 of v3's 128-key chunks).
  const Case wide(Shape{20, 5, 128, 520, 64, {0, 1}, {519, 130}}, 7), small(Shape{6, 2, 33, 90, 7, {1, 0}, {89, 30}}, 8);
  ll::CachedAttentionV2Options next, reversed, no_barrier, descending, no_chunk_barrier;
  next.max_from_next_block = true;
  reversed.acc_keys_reversed = true;
  no_barrier.no_reuse_barrier = true;
  descending.score_d_descending = true;
  no_chunk_barrier.no_chunk_barrier = true;
  std::size_t d = 0;
  for (int version : kVersions) {
    const char* v = name_of(version);
    EXPECT_NE(wide.run(version, next, &d), "") << v << ": a block's maximum from the next block";
    std::printf("planted (%s): a block's maximum from the next block: %zu cells differ (2B4T heads, keys 520 and 131)\n",
                v, d);
    EXPECT_NE(small.run(version, next), "") << v << ": a block's maximum from the next block, key block 7";
    EXPECT_NE(wide.run(version, reversed, &d), "") << v << ": the acc chains over each block's keys descending";
    std::printf("planted (%s): the acc chains over each block's keys descending: %zu cells differ (2B4T heads)\n", v,
                d);
    EXPECT_NE(small.run(version, reversed), "") << v << ": the acc chains descending, key block 7";
    emu::cta.shuffle_order = true;
    EXPECT_NE(wide.run(version, no_barrier, &d), "") << v << ": no barrier before a V ring slot is restaged";
    std::printf("planted (%s): no barrier before a V ring slot is restaged (shuffled order): %zu cells differ\n", v, d);
    EXPECT_EQ(wide.run(version, {}), "") << v << ": the kernels as they are, shuffled";
    emu::cta.shuffle_order = false;
  }
  const int v3 = ll::kDecodeAttentionV3;
  EXPECT_NE(wide.run(v3, descending, &d), "") << "v3: the score chains over d descending";
  std::printf("planted (v3): the score chains over d descending: %zu cells differ (2B4T heads)\n", d);
  EXPECT_NE(small.run(v3, descending), "") << "v3: the score chains over d descending, a 33-wide head";
  EXPECT_EQ(wide.run(2, descending), "") << "v2 has no such mutant: its score kernel is untouched";
  emu::cta.shuffle_order = true;
  EXPECT_NE(wide.run(v3, no_chunk_barrier, &d), "") << "v3: no barrier before a K chunk is restaged";
  std::printf("planted (v3): no barrier before a K chunk is restaged (shuffled order): %zu cells differ\n", d);
  emu::cta.shuffle_order = false;
}

// What v2 refuses (v1 runs them): more than 16 query heads a kv head, shared memory past the cap.
TEST(CachedAttentionV2Emulated, ShapesPastItsLimitsAreLeftToV1) {
  ll::CachedAttentionShape s;
  s.rows = 1;
  s.q_heads = 20;
  s.kv_heads = 5;
  s.head_dim = 128;
  s.ctx = 4096;
  s.key_block = 64;
  EXPECT_TRUE(ll::cached_attention_v2_fits(s));
  EXPECT_TRUE(ll::cached_attention_v3_fits(s)) << "2B4T at ctx 4096";
  s.ctx = 8192;
  EXPECT_TRUE(ll::cached_attention_v2_fits(s));
  EXPECT_FALSE(ll::cached_attention_v3_fits(s)) << "v3's K chunk and 4 heads' scores of 8 Ki keys: v2 runs it";
  s.ctx = 4096;
  s.q_heads = 32;
  s.kv_heads = 1;
  EXPECT_FALSE(ll::cached_attention_v2_fits(s)) << "32 query heads a kv head";
  s.q_heads = 16;
  s.ctx = 1 << 20;
  EXPECT_FALSE(ll::cached_attention_v2_fits(s)) << "16 heads' scores of 1 Mi keys in shared memory";
  s.ctx = 512;
  s.kv_heads = 0;
  EXPECT_FALSE(ll::cached_attention_v2_fits(s)) << "no kv heads";
  EXPECT_FALSE(ll::cached_attention_v3_fits(s)) << "no kv heads";
}

// auto's rule (decode_launch.hpp: auto_decode_attention): the small-batch kernel while v1's CTAs (rows × query
// heads) would not fill the SMs, else v1. At the H200's 132 SMs and 2B4T's 20 query heads: batch 1 to 6 small.
TEST(CachedAttentionV2Emulated, AutosRule) {
  static_assert(ll::kAutoSmallBatchAttention == 2 || ll::kAutoSmallBatchAttention == ll::kDecodeAttentionV3);
  EXPECT_EQ(ll::auto_decode_attention(1, 20, 132), ll::kAutoSmallBatchAttention);
  EXPECT_EQ(ll::auto_decode_attention(6, 20, 132), ll::kAutoSmallBatchAttention);
  EXPECT_EQ(ll::auto_decode_attention(7, 20, 132), 1) << "140 CTAs of v1 fill 132 SMs";
  EXPECT_EQ(ll::auto_decode_attention(8, 20, 132), 1);
  EXPECT_EQ(ll::auto_decode_attention(32, 20, 132), 1);
  EXPECT_EQ(ll::auto_decode_attention(33, 4, 132), 1) << "exactly 132: v1";
  EXPECT_EQ(ll::auto_decode_attention(32, 4, 132), ll::kAutoSmallBatchAttention) << "128 < 132";
}

// The switch: set_decode_attention_version picks v1, v2, v2pdl, auto or v3, 0 goes back to the environment's choice
// (LOCKSTEP_DECODE_ATTENTION, unset: kDefaultDecodeAttention); another number is refused by name.
TEST(CachedAttentionV2Emulated, TheVersionSwitch) {
  ll::set_decode_attention_version(1);
  EXPECT_EQ(ll::decode_attention_version(), 1);
  ll::set_decode_attention_version(2);
  EXPECT_EQ(ll::decode_attention_version(), 2);
  ll::set_decode_attention_version(3);
  EXPECT_EQ(ll::decode_attention_version(), 3);
  ll::set_decode_attention_version(4);
  EXPECT_EQ(ll::decode_attention_version(), ll::kAutoDecodeAttention);
  ll::set_decode_attention_version(5);
  EXPECT_EQ(ll::decode_attention_version(), ll::kDecodeAttentionV3);
  EXPECT_THROW(ll::set_decode_attention_version(6), std::invalid_argument);
  ll::set_decode_attention_version(0);
  const char* env = std::getenv("LOCKSTEP_DECODE_ATTENTION");
  const std::string chosen = env == nullptr ? "" : env;
  const int want = chosen.empty() ? ll::kDefaultDecodeAttention : chosen == "v1"   ? 1
                   : chosen == "v2"   ? 2
                   : chosen == "auto" ? ll::kAutoDecodeAttention
                   : chosen == "v3"   ? ll::kDecodeAttentionV3
                                      : 3;
  EXPECT_EQ(ll::decode_attention_version(), want) << "LOCKSTEP_DECODE_ATTENTION=" << chosen;
}
