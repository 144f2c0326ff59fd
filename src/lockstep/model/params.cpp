#include "lockstep/model/params.hpp"

#include <cmath>
#include <string>

#include "lockstep/num/rng.hpp"

namespace lockstep::model {

std::uint64_t param_stream(const std::string& name) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  return h;
}

std::vector<ParamSpec> param_specs(const ModelConfig& c) {
  c.validate();
  const std::int64_t V = c.vocab_size, D = c.d_model, F = c.d_ff, S = c.max_seq;
  const std::int64_t qdim = c.n_head * c.head_dim, kvdim = c.n_kv_head * c.head_dim;
  constexpr float kStd = 0.02f;
  // Written in double and rounded once: sqrt is correctly rounded, so every
  // machine gets the same float.
  const float kResidStd = static_cast<float>(0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer)));
  std::vector<ParamSpec> t;
  auto matrix = [&](std::string name, std::int64_t rows, std::int64_t cols, float sd) {
    t.push_back({std::move(name), {rows, cols}, true, Init::Normal, sd});
  };
  auto vec = [&](std::string name, std::int64_t n, Init init) {
    t.push_back({std::move(name), {n}, false, init, 0.0f});
  };
  if (c.family == Family::Gpt2) {
    matrix("transformer.wte.weight", V, D, kStd);
    matrix("transformer.wpe.weight", S, D, kStd);
    for (std::int64_t l = 0; l < c.n_layer; ++l) {
      const std::string p = "transformer.h." + std::to_string(l) + ".";
      vec(p + "ln_1.weight", D, Init::One);
      vec(p + "ln_1.bias", D, Init::Zero);
      matrix(p + "attn.c_attn.weight", 3 * D, D, kStd);
      vec(p + "attn.c_attn.bias", 3 * D, Init::Zero);
      matrix(p + "attn.c_proj.weight", D, D, kResidStd);
      vec(p + "attn.c_proj.bias", D, Init::Zero);
      vec(p + "ln_2.weight", D, Init::One);
      vec(p + "ln_2.bias", D, Init::Zero);
      matrix(p + "mlp.c_fc.weight", F, D, kStd);
      vec(p + "mlp.c_fc.bias", F, Init::Zero);
      matrix(p + "mlp.c_proj.weight", D, F, kResidStd);
      vec(p + "mlp.c_proj.bias", D, Init::Zero);
    }
    vec("transformer.ln_f.weight", D, Init::One);
    vec("transformer.ln_f.bias", D, Init::Zero);
  } else {
    const bool bit = c.family == Family::Bitnet;
    matrix("model.embed_tokens.weight", V, D, kStd);
    for (std::int64_t l = 0; l < c.n_layer; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      vec(p + "input_layernorm.weight", D, Init::One);
      matrix(p + "self_attn.q_proj.weight", qdim, D, kStd);
      matrix(p + "self_attn.k_proj.weight", kvdim, D, kStd);
      matrix(p + "self_attn.v_proj.weight", kvdim, D, kStd);
      if (bit) vec(p + "self_attn.attn_sub_norm.weight", qdim, Init::One);
      matrix(p + "self_attn.o_proj.weight", D, qdim, kResidStd);
      vec(p + "post_attention_layernorm.weight", D, Init::One);
      matrix(p + "mlp.gate_proj.weight", F, D, kStd);
      matrix(p + "mlp.up_proj.weight", F, D, kStd);
      if (bit) vec(p + "mlp.ffn_sub_norm.weight", F, Init::One);
      matrix(p + "mlp.down_proj.weight", D, F, kResidStd);
    }
    vec("model.norm.weight", D, Init::One);
  }
  if (!c.tie_embeddings) matrix("lm_head.weight", V, D, kStd);
  return t;
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
