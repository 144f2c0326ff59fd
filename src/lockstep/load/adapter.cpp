#include "lockstep/load/adapter.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "lockstep/io/atomic_file.hpp"
#include "lockstep/io/escape.hpp"
#include "lockstep/ops/op.hpp"
#include "lockstep/tensor/convert.hpp"

namespace lockstep::load {
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kPrefix = "base_model.model.";
constexpr std::string_view kSuffixA = ".lora_A.weight";
constexpr std::string_view kSuffixB = ".lora_B.weight";
// A rank beyond this is no low-rank adapter (and keeps rank·in from overflowing).
constexpr std::uint64_t kMaxRank = 1u << 16;

bool ends_with(std::string_view s, std::string_view t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

[[noreturn]] void config_error(const std::string& source, const std::string& msg) {
  throw std::runtime_error(io::escape_bytes(fmt::format("{}: {}", source, msg)));
}

// A field PEFT may write but lockstep cannot honour must hold its "off" value
// (absent, null, false, an empty list or object, or `off`), else it is refused.
void require_off(const nlohmann::json& j, const char* key, const std::string& source, const char* why) {
  if (!j.contains(key)) return;
  const auto& v = j[key];
  const bool off = v.is_null() || (v.is_boolean() && !v.get<bool>()) || (v.is_array() && v.empty()) ||
                   (v.is_object() && v.empty());
  if (!off) config_error(source, fmt::format("'{}' is set ({}); lockstep does not compute {}: refused", key,
                                             v.dump().substr(0, 80), why));
}

std::vector<float> widen(const io::SafetensorsFile& file, const io::TensorInfo& t) {
  const auto bytes = file.bytes(t.name);
  const auto n = static_cast<std::size_t>(t.numel());
  std::vector<float> v(n);
  switch (t.dtype) {
    case io::DType::F32:
      std::memcpy(v.data(), bytes.data(), 4 * n);
      break;
    case io::DType::F16:
    case io::DType::BF16:
      for (std::size_t i = 0; i < n; ++i) {
        const auto h = static_cast<std::uint16_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8));
        v[i] = t.dtype == io::DType::F16 ? tensor::f16_to_f32(h) : tensor::bf16_to_f32(h);
      }
      break;
    default:
      throw std::runtime_error(io::escape_bytes(
          fmt::format("adapter tensor '{}' is {}; lockstep reads F32, F16 and BF16", t.name, io::dtype_name(t.dtype))));
  }
  return v;
}

void check_finite(const std::string& name, const std::vector<float>& v) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      throw std::invalid_argument(io::escape_bytes(
          fmt::format("adapter tensor '{}' holds {} at {}: refused (a NaN or Inf is never a weight)", name,
                      static_cast<double>(v[i]), i)));
}

void check_config(const model::LoraConfig& c) {
  if (c.rank == 0 || c.rank > kMaxRank) throw std::invalid_argument(fmt::format("adapter: rank {} out of range", c.rank));
  if (!std::isfinite(c.alpha)) throw std::invalid_argument("adapter: lora_alpha is not finite");
  if (!(c.dropout >= 0.0 && c.dropout < 1.0))
    throw std::invalid_argument(fmt::format("adapter: lora_dropout {} is not in [0, 1)", c.dropout));
}

}  // namespace

std::string peft_lora_a_name(const std::string& module) { return std::string(kPrefix) + module + std::string(kSuffixA); }
std::string peft_lora_b_name(const std::string& module) { return std::string(kPrefix) + module + std::string(kSuffixB); }

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
  if (r->is_number_unsigned() ? r->get<std::uint64_t>() == 0 || r->get<std::uint64_t>() > kMaxRank
                              : r->get<std::int64_t>() <= 0)
    config_error(source, fmt::format("'r' is {}; it must be in 1..{}", r->dump(), kMaxRank));
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

std::vector<model::LoraTensor> adapter_tensors(const io::SafetensorsFile& file, const model::LoraConfig& config) {
  struct Pair {
    const io::TensorInfo* a = nullptr;
    const io::TensorInfo* b = nullptr;
  };
  std::vector<std::string> order;
  std::map<std::string, Pair> pairs;
  // Modules in the order of their data (lockstep writes the adapter's order;
  // the header's JSON object has none).
  std::vector<const io::TensorInfo*> by_offset;
  for (const io::TensorInfo& t : file.tensors()) by_offset.push_back(&t);
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [](const io::TensorInfo* x, const io::TensorInfo* y) { return x->begin < y->begin; });
  for (const io::TensorInfo* tp : by_offset) {
    const io::TensorInfo& t = *tp;
    const bool is_a = ends_with(t.name, kSuffixA), is_b = ends_with(t.name, kSuffixB);
    if (t.name.compare(0, kPrefix.size(), kPrefix) != 0 || !(is_a || is_b))
      throw std::runtime_error(io::escape_bytes(fmt::format(
          "adapter tensor '{}' is not base_model.model.<module>.lora_A.weight or .lora_B.weight: refused", t.name)));
    const std::string module =
        t.name.substr(kPrefix.size(), t.name.size() - kPrefix.size() - (is_a ? kSuffixA.size() : kSuffixB.size()));
    if (module.empty()) throw std::runtime_error(io::escape_bytes(fmt::format("adapter tensor '{}' names no module", t.name)));
    auto [it, fresh] = pairs.try_emplace(module);
    if (fresh) order.push_back(module);
    (is_a ? it->second.a : it->second.b) = &t;
  }
  std::vector<model::LoraTensor> out;
  const auto r = static_cast<std::int64_t>(config.rank);
  for (const std::string& module : order) {
    const Pair& p = pairs[module];
    if (p.a == nullptr || p.b == nullptr)
      throw std::runtime_error(io::escape_bytes(
          fmt::format("adapter module '{}' has {} but no {}", module, p.a ? "lora_A" : "lora_B", p.a ? "lora_B" : "lora_A")));
    if (p.a->shape.size() != 2 || p.a->shape[0] != r || p.a->shape[1] <= 0)
      throw std::runtime_error(io::escape_bytes(fmt::format("adapter tensor '{}' has shape [{}]; expected [r = {}, in]",
                                                            p.a->name, fmt::join(p.a->shape, ", "), r)));
    if (p.b->shape.size() != 2 || p.b->shape[1] != r || p.b->shape[0] <= 0)
      throw std::runtime_error(io::escape_bytes(fmt::format("adapter tensor '{}' has shape [{}]; expected [out, r = {}]",
                                                            p.b->name, fmt::join(p.b->shape, ", "), r)));
    model::LoraTensor t;
    t.module = module;
    t.in = static_cast<std::size_t>(p.a->shape[1]);
    t.out = static_cast<std::size_t>(p.b->shape[0]);
    t.a = widen(file, *p.a);
    t.b = widen(file, *p.b);
    out.push_back(std::move(t));
  }
  return out;
}

void check_adapter_finite(const model::Adapter& adapter) {
  for (const model::LoraTensor& t : adapter.tensors) {
    check_finite(peft_lora_a_name(t.module), t.a);
    check_finite(peft_lora_b_name(t.module), t.b);
  }
}

void check_adapter_shapes(const model::Adapter& adapter) {
  check_config(adapter.config);
  const std::size_t r = adapter.config.rank;
  std::set<std::string> seen;
  for (const model::LoraTensor& t : adapter.tensors) {
    if (t.module.empty()) throw std::invalid_argument("adapter: a tensor names no module");
    if (!seen.insert(t.module).second)
      throw std::invalid_argument(io::escape_bytes(fmt::format("adapter module '{}' appears twice", t.module)));
    if (t.in == 0 || t.out == 0 || t.a.size() != r * t.in || t.b.size() != t.out * r)
      throw std::invalid_argument(io::escape_bytes(
          fmt::format("adapter module '{}': lora_A holds {} values and lora_B {}; rank {}, in {}, out {} need {} and {}",
                      t.module, t.a.size(), t.b.size(), r, t.in, t.out, r * t.in, t.out * r)));
  }
}

void save_adapter(const std::string& dir, const model::Adapter& adapter) {
  // Every check and both serializations before the first byte is written.
  check_adapter_shapes(adapter);
  check_adapter_finite(adapter);
  const std::string config = adapter_config_json(adapter.config);
  std::vector<io::TensorRef> refs;
  const auto r = static_cast<std::int64_t>(adapter.config.rank);
  for (const model::LoraTensor& t : adapter.tensors) {
    refs.push_back(io::TensorRef::f32(peft_lora_a_name(t.module), {r, static_cast<std::int64_t>(t.in)}, t.a));
    refs.push_back(io::TensorRef::f32(peft_lora_b_name(t.module), {static_cast<std::int64_t>(t.out), r}, t.b));
  }
  const std::vector<std::uint8_t> weights = io::serialize_safetensors(refs, {{"format", "pt"}});
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot create the adapter directory '{}': {}", dir, ec.message()));
  io::write_file_atomic((fs::path(dir) / kAdapterWeightsFile).string(), weights);
  io::write_file_atomic((fs::path(dir) / kAdapterConfigFile).string(),
                        {reinterpret_cast<const std::uint8_t*>(config.data()), config.size()});
}

model::Adapter load_adapter(const std::string& dir) {
  if (!fs::is_directory(dir))
    throw std::runtime_error(fmt::format("adapter '{}' is not a directory (PEFT's: {} + {})", dir, kAdapterConfigFile,
                                         kAdapterWeightsFile));
  const std::string config_path = (fs::path(dir) / kAdapterConfigFile).string();
  const std::string weights_path = (fs::path(dir) / kAdapterWeightsFile).string();
  for (const auto& p : {config_path, weights_path})
    if (!fs::exists(p)) throw std::runtime_error(fmt::format("adapter '{}' has no {}", dir, fs::path(p).filename().string()));
  model::Adapter a;
  a.config = parse_adapter_config(io::read_file_text(config_path), config_path);
  const io::SafetensorsFile file = io::SafetensorsFile::read(weights_path);
  try {
    a.tensors = adapter_tensors(file, a.config);
    if (a.tensors.empty()) throw std::runtime_error("it holds no lora_A/lora_B tensors");
    check_adapter_shapes(a);
    check_adapter_finite(a);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("{}: {}", weights_path, e.what()));
  }
  return a;
}

void validate_adapter(const model::Adapter& adapter, const model::ModelConfig& config,
                      const std::vector<model::Param>& params) {
  (void)config;
  check_adapter_shapes(adapter);
  std::unordered_map<std::string, const model::Param*> by_name;
  for (const model::Param& p : params) by_name.emplace(p.name, &p);
  for (const model::LoraTensor& t : adapter.tensors) {
    auto it = by_name.find(t.module + ".weight");
    if (it == by_name.end())
      throw std::invalid_argument(io::escape_bytes(
          fmt::format("adapter module '{}' is not in the base model (it has no parameter '{}.weight')", t.module, t.module)));
    const model::Param& p = *it->second;
    if (p.shape.size() != 2 || p.shape[0] != static_cast<std::int64_t>(t.out) ||
        p.shape[1] != static_cast<std::int64_t>(t.in))
      throw std::invalid_argument(io::escape_bytes(
          fmt::format("adapter module '{}' is [out {}, in {}] but the base weight '{}' is [{}]", t.module, t.out, t.in,
                      p.name, fmt::join(p.shape, ", "))));
  }
}

void merge_adapter(const model::Adapter& adapter, const model::ModelConfig& config, std::vector<model::Param>& params) {
  if (config.family == model::Family::Bitnet)
    throw std::invalid_argument(
        "merge: a BitNet base's projections are ternary (BitLinear quantizes W + BA·s again): only a float base is merged");
  validate_adapter(adapter, config, params);
  check_adapter_finite(adapter);
  const float s = static_cast<float>(model::lora_scale(adapter.config));
  const std::size_t r = adapter.config.rank;
  std::unordered_map<std::string, model::Param*> by_name;
  for (model::Param& p : params) by_name.emplace(p.name, &p);
  // Every merged weight is computed before the first is written: a refusal changes nothing.
  std::vector<std::pair<model::Param*, std::vector<float>>> merged;
  for (const model::LoraTensor& t : adapter.tensors) {
    model::Param& p = *by_name.at(t.module + ".weight");
    if (p.dtype != tensor::DType::f32 || p.value.size() != t.out * t.in)
      throw std::invalid_argument(fmt::format("merge: base weight '{}' is not held as F32 values", p.name));
    std::vector<float> w(t.out * t.in);
    ops::matmul_dyw(t.out, r, t.in, t.b.data(), t.a.data(), w.data());  // BA[m,k] = chain_j B[m,j]·A[j,k]
    for (std::size_t i = 0; i < w.size(); ++i) {
      w[i] = p.value[i] + w[i] * s;
      if (!std::isfinite(w[i]))
        throw std::invalid_argument(fmt::format("merge: '{}' would hold {} at {}", p.name, static_cast<double>(w[i]), i));
    }
    merged.emplace_back(&p, std::move(w));
  }
  for (auto& [p, w] : merged) p->value = std::move(w);
}

}  // namespace lockstep::load
