// The CPU kernels of decoding (model/decode.hpp): the KV-cache attention
// (ops/cached_attention.hpp) and the cache writes.
#pragma once

#include <cstddef>

#include "lockstep/ops/cached_attention.hpp"

namespace lockstep::cpu {

// ops::CachedAttention::forward, bit for bit: (row, head) cells on threads,
// each cell computed whole by one thread — the spec's expression with a
// block's scores 8 keys at a time (8 independent chains) and p·v in vector
// lanes (decode.cpp) — so the bits depend neither on the thread count nor on
// the other rows.
void cached_attention(const ops::CachedAttention::Config& c, const ops::CachedAttention::Args<float>& a, int threads);
// A planted bug for the tests to see fail (the scores left unscaled); never set otherwise.
void set_cached_attention_mutant(bool unscaled);

// rows rows of `width` floats, `ld` apart at src, to contiguous rows at dst.
void store_rows(const float* src, std::size_t ld, std::size_t rows, std::size_t width, float* dst);

}  // namespace lockstep::cpu
