// LoRA adapter tensors as model parameters (lora_params.hpp).
#include "lockstep/model/lora_params.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "lockstep/model/params.hpp"
#include "lockstep/ops/quant.hpp"
#include "lockstep/num/rng.hpp"

namespace lockstep::model {

namespace {
constexpr const char* kTargets[] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

std::string target_of(const std::string& weight_name) {
  for (const char* t : kTargets) {
    const std::string tail = std::string(t) + ".weight";
    if (weight_name.size() > tail.size() &&
        weight_name.compare(weight_name.size() - tail.size(), tail.size(), tail) == 0 &&
        weight_name[weight_name.size() - tail.size() - 1] == '.')
      return t;
  }
  return {};
}
}  // namespace

bool is_lora_param(const std::string& name) {
  return name.find(".lora_A.weight") != std::string::npos || name.find(".lora_B.weight") != std::string::npos;
}

std::vector<std::string> lora_modules(const ModelConfig& cfg, const LoraConfig& lora) {
  if (cfg.family == Family::Gpt2)
    throw std::invalid_argument("LoRA: GPT-2 models are not supported (targets q_proj..down_proj are LLaMA/BitNet modules)");
  if (lora.targets.empty()) throw std::invalid_argument("LoRA: no target modules");
  for (const std::string& t : lora.targets)
    if (std::find_if(std::begin(kTargets), std::end(kTargets), [&](const char* k) { return t == k; }) ==
        std::end(kTargets))
      throw std::invalid_argument(fmt::format(
          "LoRA: unknown target module '{}' (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)", t));
  std::vector<std::string> out;
  for (const ParamSpec& s : param_specs(cfg)) {
    const std::string t = target_of(s.name);
    if (!t.empty() && std::find(lora.targets.begin(), lora.targets.end(), t) != lora.targets.end())
      out.push_back(s.name.substr(0, s.name.size() - std::string(".weight").size()));
  }
  return out;
}

void add_lora_params(std::vector<Param>& params, const ModelConfig& cfg, const LoraConfig& lora,
                     std::uint64_t seed) {
  if (lora.rank == 0) throw std::invalid_argument("LoRA: rank must be > 0 (r = 0 means no adapter)");
  if (!(lora.dropout >= 0.0 && lora.dropout < 1.0))
    throw std::invalid_argument(fmt::format("LoRA: dropout {} is not in [0, 1)", lora.dropout));
  for (const Param& p : params)
    if (is_lora_param(p.name)) throw std::invalid_argument("LoRA: the model already has adapter tensors (" + p.name + ")");
  const auto modules = lora_modules(cfg, lora);
  std::vector<Param> added;
  for (const std::string& m : modules) {
    const auto base = std::find_if(params.begin(), params.end(), [&](const Param& p) { return p.name == m + ".weight"; });
    if (base == params.end() || base->shape.size() != 2)
      throw std::invalid_argument("LoRA: the model has no matrix " + m + ".weight");
    const auto out = base->shape[0], in = base->shape[1];
    const auto r = static_cast<std::int64_t>(lora.rank);
    Param a;
    a.name = m + ".lora_A.weight";
    a.shape = {r, in};
    a.value.resize(static_cast<std::size_t>(r * in));
    a.grad.assign(a.value.size(), 0.0f);
    // torch.nn.init.kaiming_uniform_(a = sqrt(5)) on [r, in]: gain sqrt(2 / (1 + 5)),
    // bound = gain * sqrt(3 / fan_in) = 1 / sqrt(in).
    const auto bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(in)));
    const std::uint64_t stream = param_stream(a.name);
    for (std::size_t i = 0; i < a.value.size(); ++i) a.value[i] = num::rng::uniform(seed, stream, i, -bound, bound);
    Param b;
    b.name = m + ".lora_B.weight";
    b.shape = {out, r};
    b.value.assign(static_cast<std::size_t>(out * r), 0.0f);
    b.grad.assign(b.value.size(), 0.0f);
    added.push_back(std::move(a));
    added.push_back(std::move(b));
  }
  freeze(params);
  for (Param& p : added) params.push_back(std::move(p));
}

void freeze(std::vector<Param>& params) {
  for (Param& p : params) {
    p.trainable = false;
    std::vector<float>().swap(p.grad);
  }
}

bool is_bitlinear_weight(const ModelConfig& cfg, std::string_view name) {
  if (cfg.family != Family::Bitnet || !name.starts_with("model.layers.")) return false;
  for (std::string_view s : {".self_attn.q_proj.weight", ".self_attn.k_proj.weight", ".self_attn.v_proj.weight",
                             ".self_attn.o_proj.weight", ".mlp.gate_proj.weight", ".mlp.up_proj.weight",
                             ".mlp.down_proj.weight"})
    if (name.ends_with(s)) return true;
  return false;
}

std::size_t hold_frozen_ternary_as_codes(Model& model) {
  if (!model.runs_ternary_codes()) return 0;
  std::size_t converted = 0;
  for (Param& p : model.params()) {
    if (p.trainable || p.dtype != tensor::DType::f32 || !is_bitlinear_weight(model.config(), p.name)) continue;
    const ops::TernaryCodes<float> q = ops::quantize_ternary(p.value.data(), p.value.size());
    p.frozen_value = tensor::Storage::ternary(p.shape, q.q, q.scale);
    p.dtype = tensor::DType::ternary2;
    std::vector<float>().swap(p.value);
    std::vector<float>().swap(p.grad);
    ++converted;
  }
  return converted;
}

Adapter adapter_of(const std::vector<Param>& params, const LoraConfig& lora) {
  Adapter ad;
  ad.config = lora;
  for (const Param& p : params) {
    static const std::string kA = ".lora_A.weight";
    if (p.name.size() <= kA.size() || p.name.compare(p.name.size() - kA.size(), kA.size(), kA) != 0) continue;
    const std::string module = p.name.substr(0, p.name.size() - kA.size());
    const auto b = std::find_if(params.begin(), params.end(),
                                [&](const Param& q) { return q.name == module + ".lora_B.weight"; });
    if (b == params.end()) throw std::invalid_argument("LoRA: " + p.name + " has no lora_B partner");
    LoraTensor t;
    t.module = module;
    t.in = static_cast<std::size_t>(p.shape.at(1));
    t.out = static_cast<std::size_t>(b->shape.at(0));
    t.a = p.value;
    t.b = b->value;
    ad.config.rank = static_cast<std::size_t>(p.shape.at(0));
    ad.tensors.push_back(std::move(t));
  }
  return ad;
}

void set_adapter(std::vector<Param>& params, const Adapter& adapter) {
  std::size_t found = 0;
  for (const Param& p : params) found += p.name.find(".lora_A.weight") != std::string::npos ? 1 : 0;
  if (found != adapter.tensors.size())
    throw std::invalid_argument(fmt::format("LoRA: the adapter has {} modules, the model {}", adapter.tensors.size(), found));
  for (const LoraTensor& t : adapter.tensors) {
    for (const char* which : {".lora_A.weight", ".lora_B.weight"}) {
      const bool is_a = which[6] == 'A';
      const std::vector<float>& v = is_a ? t.a : t.b;
      const auto p = std::find_if(params.begin(), params.end(), [&](const Param& q) { return q.name == t.module + which; });
      if (p == params.end()) throw std::invalid_argument("LoRA: the model has no adapter tensor " + t.module + which);
      if (v.size() != p->value.size() ||
          static_cast<std::size_t>(p->shape.at(is_a ? 1 : 0)) != (is_a ? t.in : t.out))
        throw std::invalid_argument(fmt::format("LoRA: {}{} holds {} values, the model's is {}", t.module, which,
                                                v.size(), tensor::dims_str(p->shape)));
      p->value = v;
    }
  }
}

std::uint64_t lora_dropout_stream(std::uint64_t pass, const std::string& module) {
  return param_stream(fmt::format("lora.dropout/{}/{}", pass, module));
}

}  // namespace lockstep::model
