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

#include "lockstep/io/atomic_file.hpp"
#include "lockstep/io/escape.hpp"
#include "lockstep/num/hash.hpp"
#include "lockstep/ops/op.hpp"
#include "lockstep/tensor/convert.hpp"

namespace lockstep::load {
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kPrefix = "base_model.model.";
constexpr std::string_view kSuffixA = ".lora_A.weight";
constexpr std::string_view kSuffixB = ".lora_B.weight";
// The weights file's metadata names the config file it was saved with (its
// hash), so a pair torn by a crash between the two renames is refused, not
// read as a mix. PEFT ignores the key; PEFT's own files do not have it.
constexpr const char* kConfigHashKey = "lockstep.adapter_config_hash";

std::string config_hash(const std::string& text) { return num::hash_hex(num::hash_bytes(text.data(), text.size())); }

bool ends_with(std::string_view s, std::string_view t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
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
  if (c.rank == 0 || c.rank > kMaxAdapterRank) throw std::invalid_argument(fmt::format("adapter: rank {} out of range", c.rank));
  if (!std::isfinite(c.alpha)) throw std::invalid_argument("adapter: lora_alpha is not finite");
  if (!(c.dropout >= 0.0 && c.dropout < 1.0))
    throw std::invalid_argument(fmt::format("adapter: lora_dropout {} is not in [0, 1)", c.dropout));
}

}  // namespace

std::string peft_lora_a_name(const std::string& module) { return std::string(kPrefix) + module + std::string(kSuffixA); }
std::string peft_lora_b_name(const std::string& module) { return std::string(kPrefix) + module + std::string(kSuffixB); }

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
  const std::vector<std::uint8_t> weights = io::serialize_safetensors(refs, {{"format", "pt"}, {kConfigHashKey, config_hash(config)}});
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
  const std::string config_text = io::read_file_text(config_path);
  a.config = parse_adapter_config(config_text, config_path);
  const io::SafetensorsFile file = io::SafetensorsFile::read(weights_path);
  if (const auto it = file.metadata().find(kConfigHashKey);
      it != file.metadata().end() && it->second != config_hash(config_text))
    throw std::runtime_error(fmt::format("adapter '{}': {} and {} are from different saves (a save was interrupted "
                                         "between its two files, or one was replaced): save the adapter again",
                                         dir, kAdapterWeightsFile, kAdapterConfigFile));
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
