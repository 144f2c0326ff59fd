// Shared set-up of the decode-with-adapters tests (CPU and GPU): a micro base
// with random values and a LoRA adapter on some targets, A and B random (or B
// zero), put in through model::set_adapter, the run's scale set.
#pragma once

#include <cctype>
#include <cmath>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "decode_util.hpp"
#include "lockstep/model/lora_params.hpp"

namespace lockstep::infer::testing {

struct LoraCase {
  std::string name;
  model::ModelConfig cfg;
  std::vector<std::string> targets;
  bool f16_b = false;  // B on the f16 grid (an F16 adapter file's values): the decode head's f16 panels for wide B
};
inline void PrintTo(const LoraCase& c, std::ostream* os) { *os << c.name; }
inline std::string lora_case_name(const ::testing::TestParamInfo<LoraCase>& i) {
  std::string s;
  for (char c : i.param.name) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s;
}

// Float (LLaMA) and ternary (BitNet) bases; q and v and an FFN target in each;
// every target in the wider variants; d_ff 4096 makes gate/up's B a Linear of
// 4096 outputs, which the CPU decode backend runs on column panels (f32, and
// f16 where B's values are f16).
inline std::vector<LoraCase> lora_cases() {
  const std::vector<std::string> all{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  std::vector<LoraCase> v{{"llama-micro/q,v,down", model::preset("llama-micro"), {"q_proj", "v_proj", "down_proj"}},
                          {"bitnet-micro/q,v,up", model::preset("bitnet-micro"), {"q_proj", "v_proj", "up_proj"}}};
  for (const auto& c : mt::micro_configs(true))
    if (c.name.find('/') != std::string::npos && c.cfg.family != model::Family::Gpt2)
      v.push_back({c.name + "/all", c.cfg, all});
  model::ModelConfig l = model::preset("llama-micro");
  l.d_ff = 4096;
  v.push_back({"llama-micro/dff4096,q,v,gate,up,f16-B", l, {"q_proj", "v_proj", "gate_proj", "up_proj"}, true});
  model::ModelConfig b = model::preset("bitnet-micro");
  b.d_ff = 4096;
  v.push_back({"bitnet-micro/dff4096,q,v,gate,up,down", b, {"q_proj", "v_proj", "gate_proj", "up_proj", "down_proj"}});
  return v;
}

inline model::LoraConfig lora_config(const LoraCase& c) {
  model::LoraConfig lc;
  lc.rank = 3;
  lc.alpha = 16.0;  // s = 16/3: u·s rounds
  lc.dropout = 0.1;  // never applied by an inference pass
  lc.targets = c.targets;
  return lc;
}

// The case's base values (the same on every model of the config).
inline void base_values(model::Model& m) { mt::randomize(m.params(), 0xdec0de, 0.2); }

// The adapter's values: A and B ~ N(0, 0.3²) (B zero with zero_b; on the f16 grid k/1024 with f16_b).
inline model::Adapter random_adapter(const LoraCase& c, const std::vector<model::Param>& with_lora, bool zero_b,
                                     std::uint64_t seed) {
  model::Adapter a = model::adapter_of(with_lora, lora_config(c));
  ad::Rng rng(seed);
  for (model::LoraTensor& t : a.tensors) {
    for (float& v : t.a) v = static_cast<float>(0.3 * rng.normal());
    for (float& v : t.b) {
      v = zero_b ? 0.0f : static_cast<float>(0.3 * rng.normal());
      if (c.f16_b) v = std::round(v * 1024.0f) / 1024.0f;
    }
  }
  return a;
}

// The base values, the adapter tensors appended (model::add_lora_params), set
// (model::set_adapter) and run (model::set_lora: the scale; dropout off, as inference).
inline void put_adapter(model::Model& m, const LoraCase& c, bool zero_b, std::uint64_t seed = 0xada) {
  const model::LoraConfig lc = lora_config(c);
  model::add_lora_params(m.params(), m.config(), lc, 5);
  const model::Adapter a = random_adapter(c, m.params(), zero_b, seed);
  model::set_adapter(m.params(), a);
  model::LoraRun run;
  run.scale = model::lora_scale(lc);
  run.dropout = lc.dropout;
  run.training = false;
  m.set_lora(run);
}

inline std::unique_ptr<model::Model> adapted_cpu_model(const LoraCase& c, bool zero_b) {
  auto m = model::make_cpu_model(c.cfg);
  base_values(*m);
  put_adapter(*m, c, zero_b);
  return m;
}

}  // namespace lockstep::infer::testing
