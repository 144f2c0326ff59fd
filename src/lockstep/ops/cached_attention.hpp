// The attention of decoding: query rows over a KV cache.
//
// A decode pass computes a few query rows (one token of each of several
// sequences, or a chunk of one sequence's prompt after its cached prefix);
// their keys and values are in a cache that holds, per sequence slot, the
// rows of positions 0..len-1 (written by the passes before and by this one
// before it attends). Row r belongs to slot slot[r] and sits at position
// pos[r]: it attends keys 0..pos[r] of its slot.
//
// Canonical expression: ops::Attention::attend, the training attention's own
// per-query expression (score chains over d, online softmax over fixed
// 64-key blocks from key 0, the p·v fma chains), over the cached rows. So a
// query's output is the same bits whether its keys came from one prefill
// (ops::Attention over the whole prompt) or token by token from the cache,
// and it never depends on the other rows of the pass (their slots, lengths,
// count) or on how the rows are spread over threads or thread blocks.
//
// Layout: q rows of q_heads·head_dim values ldq apart; the caches
// [slots, ctx, kv_heads·head_dim] (row (s, j) at (s·ctx + j)·kvdim); o rows
// contiguous [rows, q_heads·head_dim]. Query head h reads kv head
// h / (q_heads / kv_heads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "lockstep/ops/attention.hpp"

namespace lockstep::ops {

struct CachedAttention {
  struct Config {
    std::size_t rows = 0;
    std::size_t q_heads = 0, kv_heads = 0, head_dim = 0;
    std::size_t slots = 0, ctx = 0;  // the caches' shape
    std::size_t key_block = 64;      // ops::Attention's block
    Attention::Config attention() const { return {1, ctx, q_heads, kv_heads, head_dim, 0.0, key_block}; }
  };
  template <class T>
  struct Args {
    const T* q;
    std::size_t ldq;
    const T *k_cache, *v_cache;
    const std::int32_t *slot, *pos;  // [rows] each (where the kernels read them)
    T* o;
  };

  // The checks a kernel's caller makes on the host (slot and pos host arrays).
  static void validate(const Config& c, const std::int32_t* slot, const std::int32_t* pos) {
    if (c.kv_heads == 0 || c.q_heads % c.kv_heads != 0)
      throw std::invalid_argument("cached attention: kv_heads must divide q_heads");
    for (std::size_t r = 0; r < c.rows; ++r)
      if (slot[r] < 0 || static_cast<std::size_t>(slot[r]) >= c.slots || pos[r] < 0 ||
          static_cast<std::size_t>(pos[r]) >= c.ctx)
        throw std::out_of_range("cached attention: row " + std::to_string(r) + " (slot " + std::to_string(slot[r]) +
                                ", position " + std::to_string(pos[r]) + ") lies outside the cache of " +
                                std::to_string(c.slots) + " slots x " + std::to_string(c.ctx) + " positions");
  }

  // One (row, head) cell: o row r, head h.
  template <class T>
  static void cell(const Config& c, const Args<T>& a, std::size_t r, std::size_t h) {
    const Attention::Config ac = c.attention();
    const std::size_t kvd = c.kv_heads * c.head_dim, g = h / (c.q_heads / c.kv_heads);
    const std::size_t base = static_cast<std::size_t>(a.slot[r]) * c.ctx * kvd + g * c.head_dim;
    T lse;
    Attention::attend(ac, a.q + r * a.ldq + h * c.head_dim, a.k_cache + base, a.v_cache + base, kvd,
                      static_cast<std::size_t>(a.pos[r]) + 1, Attention::scale_of<T>(ac),
                      a.o + (r * c.q_heads + h) * c.head_dim, lse);
  }

  // The specification: every cell in order.
  template <class T>
  static void forward(const Config& c, const Args<T>& a) {
    validate(c, a.slot, a.pos);
    for (std::size_t r = 0; r < c.rows; ++r)
      for (std::size_t h = 0; h < c.q_heads; ++h) cell(c, a, r, h);
  }
};

}  // namespace lockstep::ops
