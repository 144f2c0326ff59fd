// The C++ side of tests/load/adapter_crosscheck.py (PyPI safetensors reads the
// adapters lockstep writes, lockstep reads the ones it writes) and of the PEFT
// round trip on the device (tests/peft/peft_roundtrip.py):
//   adapter_tool write DIR                    an adapter of known values (value_at below) on two modules
//   adapter_tool write-for BASE DIR SEED T... a random adapter (r 4, alpha 8, nonzero B) on modules of
//                                             BASE whose last name is one of T (q_proj v_proj ...)
//   adapter_tool dump DIR                     JSON: the config and every tensor's values as f32 bit patterns
//   adapter_tool logits BASE ADAPTER|- MODE IDS...  logits of every position of IDS (comma-separated) as JSON
//                                             rows of floats; MODE: unmerged (load::make_adapted_model), merged
//                                             (load::merge_adapter, then the CPU model), base (no adapter)
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lockstep/load/adapted_model.hpp"
#include "lockstep/load/adapter.hpp"
#include "lockstep/load/model_file.hpp"

using namespace lockstep;

namespace {

// The values both sides compute: ((i·37 + salt) mod 101 − 50) / 64 in binary32 (exact).
float value_at(std::size_t i, std::size_t salt) {
  return static_cast<float>(static_cast<int>((i * 37 + salt) % 101) - 50) / 64.0f;
}

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

int write_known(const std::string& dir) {
  model::Adapter a;
  a.config.rank = 3;
  a.config.alpha = 6.0;
  a.config.dropout = 0.1;
  a.config.targets = {"q_proj", "down_proj"};
  a.config.base_model = "adapter_tool";
  const std::pair<const char*, std::pair<std::size_t, std::size_t>> mods[] = {
      {"model.layers.0.self_attn.q_proj", {8, 8}}, {"model.layers.1.mlp.down_proj", {20, 8}}};
  std::size_t salt = 0;
  for (const auto& [name, io_] : mods) {
    model::LoraTensor t;
    t.module = name;
    t.in = io_.first;
    t.out = io_.second;
    for (std::size_t i = 0; i < 3 * t.in; ++i) t.a.push_back(value_at(i, salt));
    for (std::size_t i = 0; i < t.out * 3; ++i) t.b.push_back(value_at(i, salt + 1));
    salt += 2;
    a.tensors.push_back(std::move(t));
  }
  load::save_adapter(dir, a);
  return 0;
}

int write_for(const std::string& base_path, const std::string& dir, std::uint32_t seed, std::vector<std::string> targets) {
  const load::LoadedModel base = load::load_model_file(base_path);
  model::Adapter a;
  a.config.rank = 4;
  a.config.alpha = 8.0;
  a.config.dropout = 0.0;
  a.config.targets = targets;
  a.config.base_model = base_path;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.2f);
  for (const model::Param& p : base.params) {
    if (p.shape.size() != 2 || p.name.size() < 7) continue;
    const std::string module = p.name.substr(0, p.name.size() - 7);  // ".weight"
    const std::string last = module.substr(module.rfind('.') + 1);
    if (std::find(targets.begin(), targets.end(), last) == targets.end()) continue;
    model::LoraTensor t;
    t.module = module;
    t.out = static_cast<std::size_t>(p.shape[0]);
    t.in = static_cast<std::size_t>(p.shape[1]);
    for (std::size_t i = 0; i < 4 * t.in; ++i) t.a.push_back(nd(rng));
    for (std::size_t i = 0; i < t.out * 4; ++i) t.b.push_back(nd(rng));
    a.tensors.push_back(std::move(t));
  }
  load::save_adapter(dir, a);
  std::printf("%zu modules\n", a.tensors.size());
  return 0;
}

int dump(const std::string& dir) {
  const model::Adapter a = load::load_adapter(dir);
  nlohmann::json j;
  j["config"] = {{"r", a.config.rank},          {"lora_alpha", a.config.alpha},   {"lora_dropout", a.config.dropout},
                 {"use_rslora", a.config.rslora}, {"target_modules", a.config.targets},
                 {"base_model_name_or_path", a.config.base_model}};
  for (const model::LoraTensor& t : a.tensors) {
    nlohmann::json e{{"module", t.module}, {"in", t.in}, {"out", t.out}};
    for (float v : t.a) e["a"].push_back(bits(v));
    for (float v : t.b) e["b"].push_back(bits(v));
    j["tensors"].push_back(e);
  }
  std::cout << j.dump() << "\n";
  return 0;
}

int logits(const std::string& base_path, const std::string& adapter_dir, const std::string& mode, const std::string& ids_text) {
  load::LoadedModel base = load::load_model_file(base_path);
  std::vector<std::int32_t> ids;
  std::stringstream ss(ids_text);
  for (std::string tok; std::getline(ss, tok, ',');) ids.push_back(std::stoi(tok));
  std::unique_ptr<model::Model> m;
  if (mode == "base") {
    m = load::make_loaded_model(std::move(base));
  } else if (mode == "unmerged") {
    m = load::make_adapted_model(std::move(base), load::load_adapter(adapter_dir));
  } else if (mode == "merged") {
    load::merge_adapter(load::load_adapter(adapter_dir), base.config, base.params);
    m = load::make_loaded_model(std::move(base));
  } else {
    throw std::invalid_argument("mode is unmerged, merged or base, got " + mode);
  }
  auto session = m->decoder(1, 0);
  const auto rows = session->prefill(0, ids, true, 0);
  const std::size_t V = static_cast<std::size_t>(m->config().vocab_size);
  std::string out = "[";
  for (std::size_t r = 0; r < ids.size(); ++r) {
    out += r ? ",[" : "[";
    for (std::size_t v = 0; v < V; ++v) out += fmt::format("{}{:.9g}", v ? "," : "", rows[r * V + v]);
    out += "]";
  }
  std::cout << out << "]\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "write" && argc == 3) return write_known(argv[2]);
    if (cmd == "write-for" && argc >= 6)
      return write_for(argv[2], argv[3], static_cast<std::uint32_t>(std::stoul(argv[4])),
                       std::vector<std::string>(argv + 5, argv + argc));
    if (cmd == "dump" && argc == 3) return dump(argv[2]);
    if (cmd == "logits" && argc == 6) return logits(argv[2], argv[3], argv[4], argv[5]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "adapter_tool: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: adapter_tool write DIR | write-for BASE DIR SEED TARGET... | dump DIR | "
                       "logits BASE ADAPTER|- unmerged|merged|base IDS\n");
  return 2;
}
