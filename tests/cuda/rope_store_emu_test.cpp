// RoPE of q and k and the K/V cache writes in one kernel (backend/cuda/rope_store.cu)
// on the host by the fiber emulator (cuda_host_emu.hpp), against the CPU spec bit for
// bit: each row's q and k rotated by ops::Rope::forward at the row's position (the
// table of positions 0..ctx-1 that the decode backend uploads), the rotated k row
// and the v row (ld apart) in the caches at (slot, pos), every other cache row
// untouched. The 2B4T heads (20 q, 5 kv, 128 dims), small and multi-head ones,
// rotate_half and interleaved, in place and not; its planted bug (the k cache
// written with k before its rotation) differs. No GPU: this proves the kernel's
// logic; the device's runs are test_infer_decode_kernels_gpu's (label gpu).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_host_emu.hpp"
// rope_store.cu's own includes first, so that the hook below renames only its calls.
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/rope_store_launch.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/ops/rope.hpp"

#define check_launch(name) ((void)(name))
#include "lockstep/backend/cuda/rope_store.cu"
#undef check_launch

namespace ll = lockstep::cuda::launch;
namespace ops = lockstep::ops;

namespace {

struct Heads {
  std::size_t rows, q_heads, kv_heads, head_dim;
  ops::RopeLayout layout;
  bool in_place;
};

// The first differing float of got against want (or ""), counted into *d.
std::string compare(const char* what, const std::vector<float>& want, const std::vector<float>& got, std::size_t* d) {
  std::string first;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(&want[i], &got[i], sizeof(float)) != 0) {
      if (first.empty()) first = std::string(what) + "[" + std::to_string(i) + "]";
      ++*d;
    }
  return first;
}

// One pass's rows over 3 slots of ctx 24: q, k rotated, k and v in the caches.
std::string run(const Heads& h, std::uint64_t seed, const ll::RopeStoreOptions& options, std::size_t* count = nullptr) {
  const std::size_t slots = 3, ctx = 24, qw = h.q_heads * h.head_dim, kw = h.kv_heads * h.head_dim, ldv = kw + 3;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  std::vector<float> q(h.rows * qw), k(h.rows * kw), v(h.rows * ldv);
  for (auto* t : {&q, &k, &v})
    for (float& x : *t) x = nd(rng);
  q[0] = -0.0f;
  k[1] = -0.0f;
  // Distinct (slot, pos) a row; one row at position 0, one at ctx - 1.
  std::vector<std::int32_t> slot(h.rows), pos(h.rows);
  for (std::size_t r = 0; r < h.rows; ++r) {
    slot[r] = static_cast<std::int32_t>(r % slots);
    pos[r] = static_cast<std::int32_t>(r == 0 ? 0 : r == 1 ? ctx - 1 : (5 * r + 3) % ctx);
  }
  // The table the decode backend uploads: positions 0..ctx-1, cos then sin.
  ops::Rope::Config tc{1, ctx, h.q_heads, h.head_dim, 10000.0, h.layout, 0};
  const ops::Rope::Table<float> tab = ops::Rope::table<float>(tc);
  std::vector<float> table(tab.cos);
  table.insert(table.end(), tab.sin.begin(), tab.sin.end());
  // The spec: each row at its own position.
  std::vector<float> want_q(q.size()), want_k(k.size()), want_kc(slots * ctx * kw, 7.0f), want_vc = want_kc;
  for (std::size_t r = 0; r < h.rows; ++r) {
    const auto p = static_cast<std::size_t>(pos[r]);
    const ops::Rope::Config cq{1, 1, h.q_heads, h.head_dim, 10000.0, h.layout, p};
    const ops::Rope::Config ck{1, 1, h.kv_heads, h.head_dim, 10000.0, h.layout, p};
    const auto yq = ops::Rope::forward(
        cq, ops::Rope::Inputs<float>{lockstep::Tensor<float>({qw}, std::vector<float>(q.begin() + r * qw,
                                                                                       q.begin() + (r + 1) * qw))});
    const auto yk = ops::Rope::forward(
        ck, ops::Rope::Inputs<float>{lockstep::Tensor<float>({kw}, std::vector<float>(k.begin() + r * kw,
                                                                                       k.begin() + (r + 1) * kw))});
    std::copy(yq.y.data.begin(), yq.y.data.end(), want_q.begin() + r * qw);
    std::copy(yk.y.data.begin(), yk.y.data.end(), want_k.begin() + r * kw);
    const std::size_t at = (static_cast<std::size_t>(slot[r]) * ctx + p) * kw;
    std::copy(yk.y.data.begin(), yk.y.data.end(), want_kc.begin() + at);
    std::copy(v.begin() + r * ldv, v.begin() + r * ldv + kw, want_vc.begin() + at);
  }
  std::vector<float> gq = h.in_place ? q : std::vector<float>(q.size(), -5.0f);
  std::vector<float> gk = h.in_place ? k : std::vector<float>(k.size(), -5.0f);
  std::vector<float> kc(slots * ctx * kw, 7.0f), vc = kc;
  const ll::RopeStoreShape s{.rows = h.rows, .q_heads = h.q_heads, .kv_heads = h.kv_heads, .head_dim = h.head_dim,
                             .interleaved = h.layout == ops::RopeLayout::interleaved, .tab_seq = ctx, .ldv = ldv,
                             .ctx = ctx};
  ll::rope_store_rows(s, table.data(), slot.data(), pos.data(), h.in_place ? gq.data() : q.data(), gq.data(),
                      h.in_place ? gk.data() : k.data(), gk.data(), v.data(), kc.data(), vc.data(), options);
  std::size_t d = 0;
  std::string first = compare("q", want_q, gq, &d);
  for (const std::string& f : {compare("k", want_k, gk, &d), compare("k cache", want_kc, kc, &d),
                               compare("v cache", want_vc, vc, &d)})
    if (first.empty()) first = f;
  if (count) *count = d;
  return first;
}

std::string name_of(const Heads& h) {
  return "rows " + std::to_string(h.rows) + " heads " + std::to_string(h.q_heads) + "/" + std::to_string(h.kv_heads) +
         " dim " + std::to_string(h.head_dim) + (h.layout == ops::RopeLayout::interleaved ? " interleaved" : "") +
         (h.in_place ? " in place" : "");
}

}  // namespace

TEST(RopeStoreEmulated, EqualsRopeThenTheCacheWrites) {
  const auto half = ops::RopeLayout::rotate_half, inter = ops::RopeLayout::interleaved;
  std::uint64_t seed = 1;
  for (const Heads& h : {Heads{1, 20, 5, 128, half, false}, Heads{3, 20, 5, 128, half, true},
                         Heads{8, 4, 2, 6, inter, false}, Heads{5, 3, 3, 2, inter, true}, Heads{2, 4, 1, 64, half, false},
                         Heads{7, 2, 2, 10, half, true}})
    EXPECT_EQ(run(h, seed++, {}), "") << name_of(h);
}

TEST(RopeStoreEmulated, PlantedBugDiffers) {
  ll::RopeStoreOptions unrotated;
  unrotated.cache_unrotated = true;
  std::size_t d = 0;
  const Heads h{3, 20, 5, 128, ops::RopeLayout::rotate_half, false};
  EXPECT_NE(run(h, 9, unrotated, &d), "") << "the k cache written before the rotation";
  std::printf("planted: the k cache written with k before its rotation: %zu values differ (3 rows, 5 kv heads)\n", d);
  EXPECT_EQ(run(h, 9, {}), "");
}
