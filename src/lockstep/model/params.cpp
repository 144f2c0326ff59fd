#include "lockstep/model/params.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "lockstep/model/families/with_family.hpp"
#include "lockstep/num/rng.hpp"

namespace lockstep::model {

std::uint64_t param_stream(const std::string& name) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  return h;
}

ParamShapes::ParamShapes(const ModelConfig& c)
    : V(c.vocab_size), D(c.d_model), F(c.d_ff), S(c.max_seq), qdim(c.n_head * c.head_dim),
      kvdim(c.n_kv_head * c.head_dim), tied(c.tie_embeddings), sd(0.02f),
      // Written in double and rounded once: sqrt is correctly rounded, so every
      // machine gets the same float.
      resid_sd(static_cast<float>(0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer)))) {}

namespace {
// Collects a family's table (the engine's Indexer reads the same table for
// the indices).
struct SpecList {
  std::vector<ParamSpec> specs;
  template <class Slot>
  void outer(ParamSpec s, Slot) {
    specs.push_back(std::move(s));
  }
  template <class Slot>
  void block(std::size_t, ParamSpec s, Slot) {
    specs.push_back(std::move(s));
  }
};
}  // namespace

std::vector<ParamSpec> param_specs(const ModelConfig& c) {
  c.validate();
  return with_family(c, [&]<class Fam>(Fam) {
    SpecList list;
    Fam::param_table(c, list);
    return std::move(list.specs);
  });
}

void init_param(const ParamSpec& spec, float* value, std::size_t numel, std::uint64_t seed, int threads) {
  switch (spec.init) {
    case Init::One:
      for (std::size_t i = 0; i < numel; ++i) value[i] = 1.0f;
      break;
    case Init::Zero:
      for (std::size_t i = 0; i < numel; ++i) value[i] = 0.0f;
      break;
    case Init::Normal:
      num::rng::fill_normal(value, numel, seed, param_stream(spec.name), 0, 0.0f, spec.init_std, threads);
      break;
  }
}

std::vector<Param> make_float_params(const ModelConfig& cfg) {
  std::vector<Param> ps;
  for (const ParamSpec& s : param_specs(cfg)) {
    std::size_t n = 1;
    for (std::int64_t d : s.shape) n *= static_cast<std::size_t>(d);
    Param p;
    p.name = s.name;
    p.shape = s.shape;
    p.value.assign(n, 0.0f);
    p.grad.assign(n, 0.0f);
    p.decay = s.decay;
    ps.push_back(std::move(p));
  }
  return ps;
}

}  // namespace lockstep::model
