// adapter_config.json: PEFT's LoraConfig fields, read and written. Its own
// file so that the fuzz target (fuzz/fuzz_adapter_config.cpp) builds it alone.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lockstep/io/escape.hpp"
#include "lockstep/load/adapter.hpp"

namespace lockstep::load {
namespace {

[[noreturn]] void config_error(const std::string& source, const std::string& msg) {
  throw std::runtime_error(io::escape_bytes(fmt::format("{}: {}", source, msg)));
}

// A field PEFT may write but lockstep cannot honour must hold its "off" value
// (absent, null, false, an empty list or object), else it is refused.
void require_off(const nlohmann::json& j, const char* key, const std::string& source, const char* why) {
  if (!j.contains(key)) return;
  const auto& v = j[key];
  const bool off = v.is_null() || (v.is_boolean() && !v.get<bool>()) || (v.is_array() && v.empty()) ||
                   (v.is_object() && v.empty());
  if (!off) config_error(source, fmt::format("'{}' is set ({}); lockstep does not compute {}: refused", key,
                                             v.dump().substr(0, 80), why));
}

}  // namespace

model::LoraConfig parse_adapter_config(std::string_view text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    config_error(source, fmt::format("not valid JSON ({})", e.what()));
  }
  if (!j.is_object()) config_error(source, "not a JSON object");
  auto field = [&](const char* key) -> const nlohmann::json* {
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  };
  model::LoraConfig c;
  c.targets.clear();

  const auto* type = field("peft_type");
  if (type == nullptr || !type->is_string()) config_error(source, "'peft_type' is missing or not a string");
  if (type->get<std::string>() != "LORA")
    config_error(source, fmt::format("'peft_type' is '{}'; lockstep reads LORA adapters", type->get<std::string>()));

  const auto* r = field("r");
  if (r == nullptr || !r->is_number_integer()) config_error(source, "'r' is missing or not an integer");
  if (r->is_number_unsigned() ? r->get<std::uint64_t>() == 0 || r->get<std::uint64_t>() > kMaxAdapterRank
                              : r->get<std::int64_t>() <= 0)
    config_error(source, fmt::format("'r' is {}; it must be in 1..{}", r->dump(), kMaxAdapterRank));
  c.rank = static_cast<std::size_t>(r->get<std::uint64_t>());

  const auto* alpha = field("lora_alpha");
  if (alpha == nullptr) {
    c.alpha = 8.0;  // PEFT's LoraConfig default
  } else {
    if (!alpha->is_number()) config_error(source, "'lora_alpha' is not a number");
    c.alpha = alpha->get<double>();
    if (!std::isfinite(c.alpha)) config_error(source, "'lora_alpha' is not finite");
  }

  const auto* dropout = field("lora_dropout");
  c.dropout = 0.0;  // PEFT's default
  if (dropout != nullptr) {
    if (!dropout->is_number()) config_error(source, "'lora_dropout' is not a number");
    c.dropout = dropout->get<double>();
    if (!(c.dropout >= 0.0 && c.dropout < 1.0))
      config_error(source, fmt::format("'lora_dropout' is {}; it must be in [0, 1)", dropout->dump()));
  }

  if (const auto* t = field("target_modules")) {
    if (t->is_string()) {
      c.targets.push_back(t->get<std::string>());  // PEFT: a regular expression over module names
    } else if (t->is_array()) {
      for (const auto& e : *t) {
        if (!e.is_string()) config_error(source, "'target_modules' holds a non-string");
        c.targets.push_back(e.get<std::string>());
      }
    } else {
      config_error(source, "'target_modules' is neither a list of names nor a string");
    }
  }

  if (const auto* b = field("bias")) {
    if (!b->is_string()) config_error(source, "'bias' is not a string");
    if (b->get<std::string>() != "none")
      config_error(source, fmt::format("'bias' is '{}'; lockstep's adapters train no bias (\"none\")",
                                       b->get<std::string>()));
  }
  if (const auto* tt = field("task_type")) {
    if (!tt->is_string() || tt->get<std::string>() != "CAUSAL_LM")
      config_error(source, fmt::format("'task_type' is {}; lockstep runs CAUSAL_LM adapters", tt->dump()));
  }
  if (const auto* base = field("base_model_name_or_path")) {
    if (!base->is_string()) config_error(source, "'base_model_name_or_path' is not a string");
    c.base_model = base->get<std::string>();
  }
  if (const auto* rs = field("use_rslora")) {
    if (!rs->is_boolean()) config_error(source, "'use_rslora' is not true or false");
    c.rslora = rs->get<bool>();
  }
  require_off(j, "use_dora", source, "DoRA's magnitude vectors");
  require_off(j, "rank_pattern", source, "per-module ranks");
  require_off(j, "alpha_pattern", source, "per-module alphas");
  require_off(j, "modules_to_save", source, "modules saved whole");
  require_off(j, "layer_replication", source, "replicated layers");
  require_off(j, "use_qalora", source, "QA-LoRA");
  require_off(j, "lora_bias", source, "a bias on lora_B");
  require_off(j, "trainable_token_indices", source, "trainable token embeddings");
  require_off(j, "target_parameters", source, "LoRA on bare parameters");
  return c;
}

std::string adapter_config_json(const model::LoraConfig& c) {
  nlohmann::ordered_json j;
  // The fields of PEFT's LoraConfig (peft/tuners/lora/config.py) and PeftConfig,
  // with PEFT's defaults where lockstep has no say.
  j["alpha_pattern"] = nlohmann::ordered_json::object();
  j["auto_mapping"] = nullptr;
  j["base_model_name_or_path"] = c.base_model.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.base_model);
  j["bias"] = "none";
  j["fan_in_fan_out"] = false;
  j["inference_mode"] = true;
  j["init_lora_weights"] = true;
  j["layers_pattern"] = nullptr;
  j["layers_to_transform"] = nullptr;
  // PEFT's lora_alpha is an int; a whole alpha is written as one.
  if (std::floor(c.alpha) == c.alpha && std::fabs(c.alpha) < 9.0e15)
    j["lora_alpha"] = static_cast<std::int64_t>(c.alpha);
  else
    j["lora_alpha"] = c.alpha;
  j["lora_dropout"] = c.dropout;
  j["modules_to_save"] = nullptr;
  j["peft_type"] = "LORA";
  j["r"] = c.rank;
  j["rank_pattern"] = nlohmann::ordered_json::object();
  j["revision"] = nullptr;
  j["target_modules"] = c.targets;
  j["task_type"] = "CAUSAL_LM";
  j["use_dora"] = false;
  j["use_rslora"] = c.rslora;
  return j.dump(2) + "\n";
}

}  // namespace lockstep::load
