#include "lockstep/backend/cpu/decode.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/num/elementary.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/reduce.hpp"
#include "lockstep/ops/scalar.hpp"
#include "lockstep/util/parallel.hpp"

namespace lockstep::cpu {
namespace {

constexpr std::size_t kKeysTogether = 8;  // scores a step: independent chains to hide the fma latency

// Mutant::cell_scores_unscaled's switch (tests only).
bool g_mutant_unscaled = false;

// One (row, head) cell: ops::Attention::attend's expression (the spec's
// cell), the work arranged for the CPU without touching an order: a block's
// scores 8 keys at a time (8 dot_seq chains side by side, each over d
// ascending from +0: the spec's chain per key, its latency no longer
// serial), the running max, exponentials and l in the spec's scalar order,
// and p·v as one chain per d (a loop of fmas the compiler puts in vector
// lanes, j ascending). `s` holds key_block floats, `acc` head_dim.
void cell(const ops::CachedAttention::Config& c, const ops::CachedAttention::Args<float>& a, std::size_t r,
          std::size_t h, float* s, float* acc) {
  using num::fma_rn;
  const ops::Attention::Config ac = c.attention();
  const std::size_t Dh = c.head_dim, kvd = c.kv_heads * Dh, g = h / (c.q_heads / c.kv_heads);
  const std::size_t base = static_cast<std::size_t>(a.slot[r]) * c.ctx * kvd + g * Dh;
  const float* q = a.q + r * a.ldq + h * Dh;
  const float* k = a.k_cache + base;
  const float* v = a.v_cache + base;
  const std::size_t n_keys = static_cast<std::size_t>(a.pos[r]) + 1;
  const float scale = g_mutant_unscaled ? 1.0f : ops::Attention::scale_of<float>(ac);
  std::fill_n(acc, Dh, 0.0f);
  float m = 0.0f, l = 0.0f;
  for (std::size_t j0 = 0; j0 < n_keys; j0 += c.key_block) {
    const std::size_t j1 = std::min(j0 + c.key_block, n_keys);
    std::size_t j = j0;
    for (; j + kKeysTogether <= j1; j += kKeysTogether) {
      float t[kKeysTogether] = {};
      for (std::size_t d = 0; d < Dh; ++d)
#pragma GCC unroll 8
        for (std::size_t u = 0; u < kKeysTogether; ++u) t[u] = fma_rn(q[d], k[(j + u) * kvd + d], t[u]);
      for (std::size_t u = 0; u < kKeysTogether; ++u) s[j + u - j0] = num::reduce::canonical_nan(t[u]) * scale;
    }
    for (; j < j1; ++j) s[j - j0] = num::reduce::dot_seq(q, 1, k + j * kvd, 1, Dh) * scale;
    float mb = s[0];
    for (std::size_t i = 1; i < j1 - j0; ++i) mb = ops::max2(mb, s[i]);
    if (j0 == 0) {
      m = mb;
    } else {
      const float mn = ops::max2(m, mb);
      const float alpha = num::exp(m - mn);
      l = l * alpha;
      for (std::size_t d = 0; d < Dh; ++d) acc[d] = acc[d] * alpha;
      m = mn;
    }
    for (std::size_t jj = j0; jj < j1; ++jj) {
      const float p = num::exp(s[jj - j0] - m);
      l = l + p;
      const float* vj = v + jj * kvd;
      for (std::size_t d = 0; d < Dh; ++d) acc[d] = fma_rn(p, vj[d], acc[d]);
    }
  }
  float* o = a.o + (r * c.q_heads + h) * Dh;
  for (std::size_t d = 0; d < Dh; ++d) o[d] = acc[d] / l;
}

}  // namespace

void set_cached_attention_mutant(bool unscaled) { g_mutant_unscaled = unscaled; }

void cached_attention(const ops::CachedAttention::Config& c, const ops::CachedAttention::Args<float>& a, int threads) {
  ops::CachedAttention::validate(c, a.slot, a.pos);
  const std::size_t cells = c.rows * c.q_heads;
  // A cell costs about (pos + 1) · head_dim · 4 element operations; small
  // passes stay on the calling thread (min_parallel_work). Whole cells only:
  // a cell's chains never split.
  std::size_t work = 1;
  for (std::size_t r = 0; r < c.rows; ++r) work = std::max(work, (static_cast<std::size_t>(a.pos[r]) + 1) * c.head_dim * 4);
  util::parallel_for(cells, threads, std::max<std::size_t>(1, min_parallel_work() / work), [&](std::size_t lo, std::size_t hi) {
    std::vector<float> s(c.key_block), acc(c.head_dim);
    for (std::size_t i = lo; i < hi; ++i) cell(c, a, i / c.q_heads, i % c.q_heads, s.data(), acc.data());
  });
}

void store_rows(const float* src, std::size_t ld, std::size_t rows, std::size_t width, float* dst) {
  for (std::size_t r = 0; r < rows; ++r) std::memcpy(dst + r * width, src + r * ld, width * sizeof(float));
}

}  // namespace lockstep::cpu
