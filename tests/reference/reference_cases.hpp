// The independent reference's cases and what lockstep writes for each: a
// directory a NumPy implementation written from the published model
// definitions (numpy_reference.py) — or transformers' own classes on the
// device (hf_reference.py) — can read without lockstep:
//
//   config.json          Hugging Face config (model::to_hf_config_json)
//   model.safetensors    the weights under HF names and in HF layout (train::save_hf_model:
//                        GPT-2's Conv1D transposed, interleaved-RoPE q/k rows permuted)
//   grads.safetensors    lockstep's double-precision gradient of the mean loss, F64, the
//                        same names and layout as the weights
//   expected.json        batch, seq, ids, targets (-1: no target), lockstep's loss (double)
//                        and each row's last-position logits (double)
//
// The configs are chosen to expose forward bugs that the finite-difference
// checks cannot see (a bug written the same way into forward and backward):
// RoPE θ = 500000 and both layouts, grouped-query attention with group sizes
// 1, 2, 3 and 4, odd head and FFN sizes, several eps values, tied and untied
// heads, odd sequence lengths and one longer than a 64-key attention block.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/ad/rng.hpp"
#include "lockstep/io/safetensors.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/model/transformer.hpp"
#include "lockstep/train/checkpoint.hpp"

namespace lockstep::reference {

struct Case {
  std::string name;
  model::ModelConfig cfg;
  std::size_t batch = 1, seq = 1;
};

inline model::ModelConfig gpt2(std::int64_t vocab, std::int64_t ctx, std::int64_t d, std::int64_t heads,
                               std::int64_t ff, std::int64_t layers, double eps, bool tied) {
  model::ModelConfig c;
  c.family = model::Family::Gpt2;
  c.vocab_size = vocab;
  c.max_seq = ctx;
  c.d_model = d;
  c.n_layer = layers;
  c.n_head = c.n_kv_head = heads;
  c.head_dim = d / heads;
  c.d_ff = ff;
  c.norm_eps = eps;
  c.tie_embeddings = tied;
  return c;
}

inline model::ModelConfig rope_family(model::Family f, std::int64_t vocab, std::int64_t ctx, std::int64_t d,
                                      std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim,
                                      std::int64_t ff, std::int64_t layers, double eps, double theta,
                                      model::RopeLayout layout, bool tied) {
  model::ModelConfig c;
  c.family = f;
  c.vocab_size = vocab;
  c.max_seq = ctx;
  c.d_model = d;
  c.n_layer = layers;
  c.n_head = heads;
  c.n_kv_head = kv_heads;
  c.head_dim = head_dim;
  c.d_ff = ff;
  c.norm_eps = eps;
  c.rope_theta = theta;
  c.rope_layout = layout;
  c.tie_embeddings = tied;
  return c;
}

inline std::vector<Case> cases() {
  using model::Family;
  using model::RopeLayout;
  const auto half = RopeLayout::RotateHalf, inter = RopeLayout::Interleaved;
  return {
      {"gpt2_tied_h3_ff75", gpt2(131, 32, 48, 3, 75, 2, 1e-5, true), 2, 13},
      {"gpt2_untied_hd9_eps1e-3_T67", gpt2(97, 80, 36, 4, 77, 2, 1e-3, false), 1, 67},
      {"llama_theta5e5_gqa3_hd10_untied", rope_family(Family::Llama, 113, 32, 60, 6, 2, 10, 97, 2, 1e-6, 500000.0, half, false), 2, 11},
      {"llama_interleaved_mqa4_tied", rope_family(Family::Llama, 89, 32, 56, 4, 1, 14, 45, 2, 1e-5, 10000.0, inter, true), 3, 9},
      {"llama_interleaved_theta5e5_gqa2_T67", rope_family(Family::Llama, 71, 80, 40, 4, 2, 12, 58, 2, 1e-4, 500000.0, inter, false), 1, 67},
      {"llama_mha_hd_ne_d", rope_family(Family::Llama, 64, 16, 30, 2, 2, 18, 33, 1, 1e-5, 1000.0, half, true), 2, 5},
      {"bitnet_theta5e5_gqa2_ff70", rope_family(Family::Bitnet, 101, 32, 48, 4, 2, 12, 70, 2, 1e-5, 500000.0, half, true), 2, 7},
      {"bitnet_mha3_eps1e-6_interleaved_T67", rope_family(Family::Bitnet, 83, 80, 48, 3, 3, 16, 64, 2, 1e-6, 10000.0, inter, true), 1, 67},
  };
}

// Writes a case directory (see the top of the file). Weights: random values
// around a trained-looking scale, rounded to float, so the F32 checkpoint holds
// exactly the values the double spec model ran on.
inline void dump_case(const Case& k, const std::filesystem::path& dir, std::uint64_t seed) {
  namespace fs = std::filesystem;
  fs::remove_all(dir);
  fs::create_directories(dir);
  model::SpecModel<double> md(k.cfg);
  ad::Rng rng(seed);
  for (auto& p : md.params()) {
    const bool vec = p.shape.size() == 1;
    const bool norm = vec && p.name.find("bias") == std::string::npos;
    for (auto& v : p.value) {
      const double z = rng.normal();
      v = static_cast<double>(static_cast<float>(vec ? (norm ? 1.0 + 0.1 * z : 0.1 * z) : 0.3 * z));
    }
  }
  std::vector<std::int32_t> ids, targets;
  for (std::size_t i = 0; i < k.batch * k.seq; ++i) {
    ids.push_back(static_cast<std::int32_t>(rng.below(static_cast<std::size_t>(k.cfg.vocab_size))));
    targets.push_back(static_cast<std::int32_t>(rng.below(static_cast<std::size_t>(k.cfg.vocab_size))));
  }
  targets[1] = -1;  // one position without a target: the mean is over the others
  const double loss = md.run(ids, targets, k.batch, k.seq, true);

  // The weights through the checkpoint writer (HF names and layout).
  auto fm = model::make_cpu_model(k.cfg);
  auto& fp = fm->params();
  for (std::size_t i = 0; i < fp.size(); ++i)
    for (std::size_t e = 0; e < fp[i].value.size(); ++e) fp[i].value[e] = static_cast<float>(md.params()[i].value[e]);
  train::save_hf_model(dir.string(), *fm);

  // The gradients in the same layout: the writer's layout map is a
  // permutation, found by passing it each element's index (exact in float
  // below 2^24) and applied to the double gradient.
  std::vector<std::vector<double>> hf_grads;
  std::vector<std::vector<std::int64_t>> hf_shapes;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < fp.size(); ++i) {
    if (k.cfg.tie_embeddings && fp[i].name == "lm_head.weight") continue;
    model::Param index = fp[i];
    for (std::size_t e = 0; e < index.value.size(); ++e) index.value[e] = static_cast<float>(e);
    const train::HfTensor perm = train::to_hf_tensor(k.cfg, index);
    std::vector<double> g(perm.value.size());
    for (std::size_t e = 0; e < g.size(); ++e) g[e] = md.params()[i].grad[static_cast<std::size_t>(perm.value[e])];
    hf_grads.push_back(std::move(g));
    hf_shapes.push_back(perm.shape);
    names.push_back(fp[i].name);
  }
  std::vector<io::TensorRef> refs;
  for (std::size_t i = 0; i < names.size(); ++i)
    refs.push_back({names[i], io::DType::F64, hf_shapes[i],
                    {reinterpret_cast<const std::uint8_t*>(hf_grads[i].data()), hf_grads[i].size() * sizeof(double)}});
  io::write_safetensors((dir / "grads.safetensors").string(), refs);

  nlohmann::json j;
  j["case"] = k.name;
  j["batch"] = k.batch;
  j["seq"] = k.seq;
  j["ids"] = ids;
  j["targets"] = targets;
  j["loss"] = loss;
  j["seed"] = seed;
  for (std::size_t r = 0; r < k.batch; ++r)
    j["last_logits"].push_back(md.engine().last_logits(ids.data() + r * k.seq, k.seq));
  std::ofstream(dir / "expected.json") << j.dump(1);
}

}  // namespace lockstep::reference
