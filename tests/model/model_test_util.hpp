// Shared helpers of the model tests: configurations, random parameters and
// tokens, bit comparisons.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "lockstep/ad/rng.hpp"
#include "lockstep/model/config.hpp"
#include "lockstep/model/transformer.hpp"
#include "lockstep/num/fp.hpp"

namespace lockstep::model::testing {

struct NamedConfig {
  std::string name;
  ModelConfig cfg;
};

// The micro presets, plus variants that reach the other code paths: more than
// one 64-key attention block, the interleaved RoPE layout, an untied head,
// multi-query attention.
inline std::vector<NamedConfig> micro_configs(bool with_variants) {
  std::vector<NamedConfig> v{{"gpt2-micro", preset("gpt2-micro")},
                             {"llama-micro", preset("llama-micro")},
                             {"bitnet-micro", preset("bitnet-micro")}};
  if (with_variants) {
    ModelConfig g = preset("gpt2-micro");
    g.max_seq = 160;  // sequences longer than one 64-key block
    g.tie_embeddings = false;
    v.push_back({"gpt2-micro/untied,ctx160", g});
    ModelConfig l = preset("llama-micro");
    l.rope_layout = RopeLayout::Interleaved;
    l.n_kv_head = 1;  // multi-query
    l.max_seq = 160;
    l.tie_embeddings = true;
    v.push_back({"llama-micro/interleaved,mqa,tied,ctx160", l});
    ModelConfig b = preset("bitnet-micro");
    b.max_seq = 160;
    b.n_kv_head = 4;  // multi-head
    v.push_back({"bitnet-micro/mha,ctx160", b});
  }
  return v;
}

// Random parameter values around a trained-looking scale: matrices N(0, s),
// norm weights 1 + N(0, 0.1), biases N(0, 0.1). (The init's zero biases and
// unit norms would leave terms that are exactly 0 or 1, hiding wrong
// gradients.)
template <class P>
void randomize(std::vector<P>& ps, std::uint64_t seed, double matrix_scale) {
  ad::Rng rng(seed);
  for (auto& p : ps) {
    const bool vec = p.shape.size() == 1;
    const bool norm = vec && p.name.find("bias") == std::string::npos;
    for (auto& v : p.value) {
      const double z = rng.normal();
      using T = std::decay_t<decltype(v)>;
      v = static_cast<T>(vec ? (norm ? 1.0 + 0.1 * z : 0.1 * z) : matrix_scale * z);
    }
  }
}

template <class P>
void copy_values(const std::vector<P>& from, std::vector<Param>& to) {
  for (std::size_t i = 0; i < from.size(); ++i)
    for (std::size_t e = 0; e < from[i].value.size(); ++e) to[i].value[e] = static_cast<float>(from[i].value[e]);
}

struct Batch {
  std::vector<std::int32_t> ids, targets;
};
// Random token windows; targets are the next ids (one row ignored with -1
// when `ignore_one`).
inline Batch random_batch(std::size_t batch, std::size_t seq, std::int64_t vocab, std::uint64_t seed,
                          bool ignore_one = false) {
  ad::Rng rng(seed);
  Batch b;
  for (std::size_t i = 0; i < batch * seq; ++i) {
    b.ids.push_back(static_cast<std::int32_t>(rng.below(static_cast<std::size_t>(vocab))));
    b.targets.push_back(static_cast<std::int32_t>(rng.below(static_cast<std::size_t>(vocab))));
  }
  if (ignore_one && batch * seq > 2) b.targets[1] = -1;
  return b;
}

inline std::size_t differing_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return a.size() + b.size();
  std::size_t d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += num::bits_of(a[i]) != num::bits_of(b[i]);
  return d;
}

}  // namespace lockstep::model::testing
