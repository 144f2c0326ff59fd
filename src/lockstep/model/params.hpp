// The parameter table of a model: every tensor's Hugging Face name, its
// internal shape (nn.Linear's [out, in] for every matrix), whether AdamW
// decays it, and how it is initialized.
//
// Initialization (Model::init): GPT-2's scheme for all three families —
// matrices and embeddings N(0, 0.02); the projections that write into the
// residual stream (GPT-2 attn.c_proj and mlp.c_proj, LLaMA/BitNet o_proj and
// down_proj) N(0, 0.02/sqrt(2·n_layer)); norm weights 1; biases 0. Each tensor
// draws from its own Philox stream, stream = FNV-1a-64(name), element i =
// num::rng::normal(seed, stream, i) scaled by the std (fill_normal): the
// values depend on (seed, name, index) only — not on the thread count, the
// order of the table, or the other tensors.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/model/config.hpp"
#include "lockstep/model/model.hpp"

namespace lockstep::model {

enum class Init { Normal, One, Zero };

struct ParamSpec {
  std::string name;
  std::vector<std::int64_t> shape;
  bool decay = true;   // matrices and embeddings
  Init init = Init::Normal;
  float init_std = 0.0f;  // Init::Normal only
};

// A family's parameter table is written with these: each returns the entry
// of one tensor (its init is the scheme above, the same for every family).
struct ParamShapes {
  explicit ParamShapes(const ModelConfig& c);
  std::int64_t V, D, F, S, qdim, kvdim;  // vocabulary, width, FFN width, max_seq, q and k/v widths
  bool tied;                             // the LM head is the embedding (no lm_head.weight)
  float sd, resid_sd;                    // N(0, sd); residual projections N(0, resid_sd)
  ParamSpec matrix(std::string name, std::int64_t rows, std::int64_t cols) const {
    return {std::move(name), {rows, cols}, true, Init::Normal, sd};
  }
  // A projection that writes into the residual stream.
  ParamSpec residual(std::string name, std::int64_t rows, std::int64_t cols) const {
    return {std::move(name), {rows, cols}, true, Init::Normal, resid_sd};
  }
  ParamSpec ones(std::string name, std::int64_t n) const { return {std::move(name), {n}, false, Init::One, 0.0f}; }
  ParamSpec zeros(std::string name, std::int64_t n) const {
    return {std::move(name), {n}, false, Init::Zero, 0.0f};
  }
};

// The table, in a fixed order: stem, layers 0..n_layer-1, head. Tied
// embeddings have no separate lm_head.weight. Each family writes its own
// (model/families/<family>.hpp, param_table); this collects it. Throws
// std::invalid_argument on a bad config.
std::vector<ParamSpec> param_specs(const ModelConfig& cfg);

// The Philox stream of a parameter: FNV-1a-64 of its name.
std::uint64_t param_stream(const std::string& name);

// Fills `value` for one parameter (numel elements) as stated above.
void init_param(const ParamSpec& spec, float* value, std::size_t numel, std::uint64_t seed, int threads);

// Params with zero values and zero gradients for a config (float).
std::vector<Param> make_float_params(const ModelConfig& cfg);

}  // namespace lockstep::model
