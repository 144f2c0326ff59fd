#include "lockstep/backend/cpu/decode.hpp"

#include <algorithm>
#include <cstring>

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/util/parallel.hpp"

namespace lockstep::cpu {

void cached_attention(const ops::CachedAttention::Config& c, const ops::CachedAttention::Args<float>& a, int threads) {
  ops::CachedAttention::validate(c, a.slot, a.pos);
  const std::size_t cells = c.rows * c.q_heads;
  // A cell costs about (pos + 1) · head_dim · 4 element operations; small
  // passes stay on the calling thread (min_parallel_work). Whole cells only:
  // a cell's chains never split.
  std::size_t work = 1;
  for (std::size_t r = 0; r < c.rows; ++r) work = std::max(work, (static_cast<std::size_t>(a.pos[r]) + 1) * c.head_dim * 4);
  util::parallel_for(cells, threads, std::max<std::size_t>(1, min_parallel_work() / work), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) ops::CachedAttention::cell(c, a, i / c.q_heads, i % c.q_heads);
  });
}

void store_rows(const float* src, std::size_t ld, std::size_t rows, std::size_t width, float* dst) {
  for (std::size_t r = 0; r < rows; ++r) std::memcpy(dst + r * width, src + r * ld, width * sizeof(float));
}

}  // namespace lockstep::cpu
