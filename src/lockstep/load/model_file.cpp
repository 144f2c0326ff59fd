#include "lockstep/load/model_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lockstep/io/atomic_file.hpp"
#include "lockstep/io/gguf_tensor.hpp"
#include "lockstep/io/safetensors.hpp"
#include "lockstep/model/params.hpp"
#include "lockstep/ops/quant.hpp"
#include "lockstep/tensor/convert.hpp"

namespace fs = std::filesystem;

namespace lockstep::load {

namespace {

[[noreturn]] void fail(const std::string& source, const std::string& msg) {
  throw std::runtime_error(io::escape_bytes(source) + ": " + msg);
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// HF suffix inside a layer <-> GGUF suffix inside blk.N.
struct LayerName {
  const char* hf;
  const char* gguf;
};
constexpr LayerName kLayerNames[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.attn_sub_norm.weight", "attn_sub_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"mlp.ffn_sub_norm.weight", "ffn_sub_norm.weight"},
};
constexpr LayerName kOuterNames[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};

// "<prefix><digits>.<rest>" -> (N, rest)
std::optional<std::pair<std::int64_t, std::string>> split_layer(const std::string& name, std::string_view prefix) {
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  std::size_t i = prefix.size(), j = i;
  while (j < name.size() && j - i < 9 && name[j] >= '0' && name[j] <= '9') ++j;
  if (j == i || j >= name.size() || name[j] != '.') return std::nullopt;
  return std::pair{std::stoll(name.substr(i, j - i)), name.substr(j + 1)};
}

// A BitLinear projection of a BitNet model (the tensors that hold ternary codes).
bool is_bitlinear(const model::ModelConfig& cfg, const std::string& hf_name) {
  if (cfg.family != model::Family::Bitnet) return false;
  for (const char* s : {".self_attn.q_proj.weight", ".self_attn.k_proj.weight", ".self_attn.v_proj.weight",
                        ".self_attn.o_proj.weight", ".mlp.gate_proj.weight", ".mlp.up_proj.weight",
                        ".mlp.down_proj.weight"})
    if (ends_with(hf_name, s)) return true;
  return false;
}

// Heads of a q/k projection whose rows llama.cpp permutes (0: none).
std::int64_t rope_heads(const model::ModelConfig& cfg, const std::string& hf_name) {
  if (ends_with(hf_name, ".self_attn.q_proj.weight")) return cfg.n_head;
  if (ends_with(hf_name, ".self_attn.k_proj.weight")) return cfg.n_kv_head;
  return 0;
}

// Row r of an interleaved-order [heads·hd, cols] matrix (llama.cpp's, Meta's)
// is row head·hd + (j % 2)·(hd/2) + j/2 (j = r mod hd) of the rotate-half
// order (HF's): llama.cpp's permute() inverted.
std::int64_t rotate_half_row(std::int64_t r, std::int64_t hd) {
  const std::int64_t head = r / hd, j = r % hd;
  return head * hd + (j % 2) * (hd / 2) + j / 2;
}

template <class T>
std::vector<T> permute_rows(const std::vector<T>& v, std::int64_t rows, std::int64_t hd, bool to_rotate_half) {
  const std::size_t cols = v.size() / static_cast<std::size_t>(rows);
  std::vector<T> out(v.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t h = rotate_half_row(r, hd);
    const std::size_t from = static_cast<std::size_t>(to_rotate_half ? r : h) * cols;
    const std::size_t to = static_cast<std::size_t>(to_rotate_half ? h : r) * cols;
    std::copy_n(v.begin() + static_cast<std::ptrdiff_t>(from), cols, out.begin() + static_cast<std::ptrdiff_t>(to));
  }
  return out;
}

std::string shape_str(const std::vector<std::int64_t>& s) { return tensor::dims_str(s); }

// A float BitNet projection holding only {-s, 0, +s} (bitnet.cpp's F16/F32
// files hold weight_quant's output): its codes and s.
std::optional<io::TernaryTensor> as_ternary_values(const std::vector<float>& v) {
  float s = 0;
  for (float x : v) {
    const float a = std::fabs(x);
    if (a == 0) continue;
    if (s == 0) s = a;
    if (a != s) return std::nullopt;
  }
  if (s == 0) return std::nullopt;  // all zero: keep as floats
  std::vector<std::int8_t> codes;
  codes.reserve(v.size());
  for (float x : v) codes.push_back(static_cast<std::int8_t>(x > 0 ? 1 : x < 0 ? -1 : 0));
  return io::TernaryTensor{std::move(codes), s};
}

// One parameter from its ternary codes and scale, held as the options say.
model::Param ternary_param(const model::ParamSpec& spec, std::vector<std::int8_t> codes, float scale,
                           const LoadOptions& opt, const std::string& source, std::vector<std::string>& notes) {
  model::Param p;
  p.name = spec.name;
  p.shape = spec.shape;
  p.decay = spec.decay;
  if (opt.ternary == TernaryAs::ternary2) {
    p.dtype = tensor::DType::ternary2;
    p.trainable = false;
    p.frozen_value = tensor::Storage::ternary(spec.shape, codes, scale);
    return p;
  }
  auto master = ternary_master(codes, scale);
  // Division by n does not reach every float: then the nearest scale that is
  // a mean of n floats (a few ulps away), said in the notes.
  float held = scale;
  for (int k = 1; !master && k <= 16; ++k) {
    held = k % 2 ? std::nextafter(scale, 1e38f) : std::nextafter(scale, 0.0f);
    for (int j = 1; j < (k + 1) / 2; ++j) held = k % 2 ? std::nextafter(held, 1e38f) : std::nextafter(held, 0.0f);
    master = ternary_master(codes, held);
  }
  if (!master)
    fail(source, fmt::format("tensor {}: no F32 master quantizes to its ternary codes with scale {:.9g} (below "
                             "BitLinear's 1e-5 floor?): load it as TERNARY2",
                             spec.name, static_cast<double>(scale)));
  if (held != scale)
    notes.push_back(fmt::format("{}: ternary scale {:.9g} is no mean of {} floats; the F32 model holds {:.9g}", spec.name,
                                static_cast<double>(scale), codes.size(), static_cast<double>(held)));
  p.value = std::move(*master);
  p.grad.assign(p.value.size(), 0.0f);
  return p;
}

model::Param float_param(const model::ParamSpec& spec, std::vector<float> values) {
  model::Param p;
  p.name = spec.name;
  p.shape = spec.shape;
  p.decay = spec.decay;
  p.value = std::move(values);
  p.grad.assign(p.value.size(), 0.0f);
  return p;
}

// From the values a file holds for this spec (lockstep's layout already):
// a BitNet projection with only {-s, 0, s} becomes ternary.
model::Param param_from_floats(const model::ModelConfig& cfg, const model::ParamSpec& spec, std::vector<float> v,
                               const LoadOptions& opt, const std::string& source, std::vector<std::string>& notes) {
  if (is_bitlinear(cfg, spec.name)) {
    if (auto t = as_ternary_values(v)) {
      notes.push_back(fmt::format("{}: values are {{-s, 0, s}} with s = {:.9g}: read as ternary codes", spec.name,
                                  static_cast<double>(t->scale)));
      return ternary_param(spec, std::move(t->codes), t->scale, opt, source, notes);
    }
  }
  return float_param(spec, std::move(v));
}

}  // namespace

std::optional<std::string> gguf_name_of(const std::string& hf) {
  for (const auto& n : kOuterNames)
    if (hf == n.hf) return std::string(n.gguf);
  if (auto l = split_layer(hf, "model.layers."))
    for (const auto& n : kLayerNames)
      if (l->second == n.hf) return fmt::format("blk.{}.{}", l->first, n.gguf);
  return std::nullopt;
}

std::optional<std::string> hf_name_of(const std::string& gguf) {
  for (const auto& n : kOuterNames)
    if (gguf == n.gguf) return std::string(n.hf);
  if (auto l = split_layer(gguf, "blk."))
    for (const auto& n : kLayerNames)
      if (l->second == n.gguf) return fmt::format("model.layers.{}.{}", l->first, n.hf);
  return std::nullopt;
}

std::optional<std::vector<float>> ternary_master(std::span<const std::int8_t> codes, float scale) {
  const std::size_t n = codes.size();
  std::size_t nnz = 0;
  for (std::int8_t c : codes) {
    if (c < -1 || c > 1) throw std::invalid_argument(fmt::format("ternary_master: code {} is not -1, 0 or 1", c));
    nnz += c != 0;
  }
  std::vector<float> w(n, 0.0f);
  if (nnz == 0) return w;  // every output is 0 whatever the scale
  if (!(scale >= 1e-5f) || !std::isfinite(scale) || n == 0) return std::nullopt;
  const auto quantizes_back = [&](const std::vector<float>& x) {
    const auto q = ops::quantize_ternary(x.data(), x.size());
    return q.scale == scale && std::equal(q.q.begin(), q.q.end(), codes.begin());
  };
  std::vector<std::size_t> nz;
  nz.reserve(nnz);
  for (std::size_t i = 0; i < n; ++i)
    if (codes[i] != 0) nz.push_back(i);
  // 1. Exact sums. A float S with S / n == scale (BitLinear's division) is
  // K · g, g its ulp, K < 2^24: nonzero magnitudes that are whole multiples of
  // g and add up to K · g make every partial sum of any order exact, so the
  // canonical sum is S. Each needs >= scale / 2 to quantize to ±1.
  const float nf = static_cast<float>(n);
  float s0 = static_cast<float>(static_cast<double>(scale) * static_cast<double>(nf));
  for (int k = 0; k < 4; ++k) s0 = std::nextafter(s0, 0.0f);
  float cand = s0;
  for (int k = 0; k < 9; ++k, cand = std::nextafter(cand, 1e38f)) {
    if (cand / nf != scale || !std::isnormal(cand)) continue;
    const double g = std::ldexp(1.0, std::ilogb(cand) - 23);
    const auto units = static_cast<std::uint64_t>(static_cast<double>(cand) / g);  // exact, in [2^23, 2^24)
    const auto umin = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ceil(0.51 * static_cast<double>(scale) / g)));
    if (static_cast<std::uint64_t>(nnz) * umin > units) continue;
    const std::uint64_t base = units / nnz, extra = units % nnz;
    for (std::size_t k2 = 0; k2 < nz.size(); ++k2)
      w[nz[k2]] = static_cast<float>(codes[nz[k2]]) * static_cast<float>(static_cast<double>(base + (k2 < extra ? 1 : 0)) * g);
    if (quantizes_back(w)) return w;
  }
  // 2. Large tensors (the grid above too coarse for their many nonzeros):
  // magnitudes c_lo for entries at or past t, c_hi before; the mean is
  // nondecreasing in t (rounding is monotone, and so is every node of the
  // canonical sum in each leaf), so a binary search finds the first t whose
  // mean reaches `scale` — which may step over it.
  const double c = static_cast<double>(scale) * static_cast<double>(n) / static_cast<double>(nnz);
  const double spread = 8.0 * c * std::ldexp(1.0, -23);
  const float c_lo = static_cast<float>(c - spread / 2), c_hi = static_cast<float>(c + spread / 2);
  const auto fill = [&](std::size_t t) {
    for (std::size_t k = 0; k < nz.size(); ++k) w[nz[k]] = static_cast<float>(codes[nz[k]]) * (k < t ? c_hi : c_lo);
  };
  const auto mean_of = [&](std::size_t t) {
    fill(t);
    return ops::quantize_ternary(w.data(), n).scale;
  };
  std::size_t lo = 0, hi = nnz;
  if (mean_of(hi) < scale || mean_of(lo) > scale) return std::nullopt;
  while (lo < hi) {  // first t with mean >= scale
    const std::size_t mid = lo + (hi - lo) / 2;
    if (mean_of(mid) >= scale) hi = mid; else lo = mid + 1;
  }
  fill(lo);
  if (!quantizes_back(w)) return std::nullopt;
  return w;
}

std::vector<std::int8_t> hf_unpack_ternary(std::span<const std::uint8_t> packed, std::int64_t out, std::int64_t in,
                                           const std::string& what) {
  if (out % 4 != 0) throw std::runtime_error(what + ": packed BitNet weight needs out % 4 == 0, out = " + std::to_string(out));
  const std::int64_t rows = out / 4;
  if (static_cast<std::int64_t>(packed.size()) != rows * in)
    throw std::runtime_error(fmt::format("{}: {} packed bytes, expected {} x {}", what, packed.size(), rows, in));
  std::vector<std::int8_t> codes(static_cast<std::size_t>(out * in));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < in; ++c) {
      const std::uint8_t b = packed[static_cast<std::size_t>(r * in + c)];
      for (int i = 0; i < 4; ++i) {
        const int field = (b >> (2 * i)) & 3;
        if (field == 3) throw std::runtime_error(fmt::format("{}: packed row {} column {} holds the invalid field 3", what, r, c));
        codes[static_cast<std::size_t>((r + i * rows) * in + c)] = static_cast<std::int8_t>(field - 1);
      }
    }
  return codes;
}

std::vector<std::uint8_t> hf_pack_ternary(std::span<const std::int8_t> codes, std::int64_t out, std::int64_t in) {
  if (out % 4 != 0 || static_cast<std::int64_t>(codes.size()) != out * in)
    throw std::invalid_argument("hf_pack_ternary: needs out % 4 == 0 and out x in codes");
  const std::int64_t rows = out / 4;
  std::vector<std::uint8_t> packed(static_cast<std::size_t>(rows * in), 0);
  for (std::int64_t r = 0; r < out; ++r)
    for (std::int64_t c = 0; c < in; ++c)
      packed[static_cast<std::size_t>((r % rows) * in + c)] |=
          static_cast<std::uint8_t>((codes[static_cast<std::size_t>(r * in + c)] + 1) << (2 * (r / rows)));
  return packed;
}

// ---------------------------------------------------------------------------
// GGUF

model::ModelConfig gguf_model_config(const io::GgufFile& g) {
  const std::string& src = g.source;
  const io::GgufValue* arch_v = g.find("general.architecture");
  if (!arch_v) fail(src, "missing key general.architecture");
  if (arch_v->type() != io::GgufType::kString) fail(src, "general.architecture is not a string");
  const std::string arch = arch_v->as_string();
  model::ModelConfig c;
  if (arch == "llama") {
    c.family = model::Family::Llama;
  } else if (arch == "bitnet-b1.58" || arch == "bitnet-25") {
    c.family = model::Family::Bitnet;
  } else {
    fail(src, fmt::format("architecture \"{}\" is not supported (llama, bitnet-b1.58, bitnet-25){}", io::escape_bytes(arch),
                          arch == "bitnet" ? "; \"bitnet\" is llama.cpp's 1bitLLM BitNet, a different model" : ""));
  }
  const auto key = [&](const char* k) { return arch + "." + k; };
  const auto get_int = [&](const char* k, std::optional<std::int64_t> dflt = std::nullopt) -> std::int64_t {
    const io::GgufValue* v = g.find(key(k));
    if (!v) {
      if (dflt) return *dflt;
      fail(src, "missing key " + key(k));
    }
    try {
      return v->as_int();
    } catch (const std::runtime_error& e) {
      fail(src, e.what());
    }
  };
  const auto get_float = [&](const char* k, double dflt) -> double {
    const io::GgufValue* v = g.find(key(k));
    if (!v) return dflt;
    try {
      return v->as_float();
    } catch (const std::runtime_error& e) {
      fail(src, e.what());
    }
  };
  c.n_layer = get_int("block_count");
  c.d_model = get_int("embedding_length");
  c.d_ff = get_int("feed_forward_length");
  c.n_head = get_int("attention.head_count");
  c.n_kv_head = get_int("attention.head_count_kv", c.n_head);
  c.max_seq = get_int("context_length");
  c.head_dim = get_int("attention.key_length", c.n_head > 0 ? c.d_model / c.n_head : 0);
  if (get_int("attention.value_length", c.head_dim) != c.head_dim) fail(src, "attention.value_length differs from key_length");
  if (get_int("rope.dimension_count", c.head_dim) != c.head_dim)
    fail(src, fmt::format("rope.dimension_count {} is not the head size {} (partial rotary is not supported)",
                          get_int("rope.dimension_count"), c.head_dim));
  c.norm_eps = get_float("attention.layer_norm_rms_epsilon", 1e-5);
  c.rope_theta = get_float("rope.freq_base", 10000.0);
  if (g.find(key("rope.scaling.type")) && g.at(key("rope.scaling.type")).type() == io::GgufType::kString &&
      g.at(key("rope.scaling.type")).as_string() != "none")
    fail(src, "rope.scaling.type " + io::escape_bytes(g.at(key("rope.scaling.type")).as_string()) + " is not supported");
  c.rope_layout = model::RopeLayout::RotateHalf;  // llama's q/k rows are put back in HF order on load
  const io::GgufTensorInfo* embd = nullptr;
  bool has_output = false;
  for (const auto& t : g.tensors) {
    if (t.name == "token_embd.weight") embd = &t;
    if (t.name == "output.weight") has_output = true;
  }
  if (!embd) fail(src, "missing tensor token_embd.weight");
  if (embd->dims.size() != 2) fail(src, "token_embd.weight is not a matrix");
  c.vocab_size = static_cast<std::int64_t>(embd->dims[1]);
  if (static_cast<std::int64_t>(embd->dims[0]) != c.d_model)
    fail(src, fmt::format("token_embd.weight has rows of {}, embedding_length is {}", embd->dims[0], c.d_model));
  // Each layer has 9 tensors (11 for BitNet): a block_count the file cannot
  // hold is refused before a parameter table is built for it.
  if (c.n_layer < 0 || static_cast<std::uint64_t>(c.n_layer) > g.tensors.size() / 9)
    fail(src, fmt::format("block_count {} exceeds what its {} tensors hold", c.n_layer, g.tensors.size()));
  if (get_int("vocab_size", c.vocab_size) != c.vocab_size)
    fail(src, fmt::format("{} is {}, token_embd.weight has {} rows", key("vocab_size"), get_int("vocab_size"), c.vocab_size));
  c.tie_embeddings = !has_output;
  const auto token = [&](const char* k) -> std::int64_t {
    const io::GgufValue* v = g.find(k);
    if (!v) return -1;
    try {
      return v->as_int();
    } catch (const std::runtime_error& e) {
      fail(src, e.what());
    }
  };
  c.bos_token = token("tokenizer.ggml.bos_token_id");
  c.eos_token = token("tokenizer.ggml.eos_token_id");
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    fail(src, e.what());
  }
  return c;
}

namespace {

LoadedModel load_gguf_with(const io::GgufFile& g,
                           const std::function<std::vector<unsigned char>(const io::GgufTensorInfo&)>& data_of,
                           const LoadOptions& opt) {
  LoadedModel out;
  out.format = "gguf";
  out.config = gguf_model_config(g);
  const model::ModelConfig& cfg = out.config;
  std::map<std::string, const io::GgufTensorInfo*> by_name;
  for (const auto& t : g.tensors) by_name[t.name] = &t;
  std::set<std::string> used;
  for (const model::ParamSpec& spec : model::param_specs(cfg)) {
    const auto gname = gguf_name_of(spec.name);
    if (!gname) fail(g.source, "no GGUF name for parameter " + spec.name);
    const auto it = by_name.find(*gname);
    if (it == by_name.end()) fail(g.source, "missing tensor " + *gname);
    const io::GgufTensorInfo& info = *it->second;
    used.insert(*gname);
    const std::vector<std::int64_t> shape(info.dims.rbegin(), info.dims.rend());
    if (shape != spec.shape)
      fail(g.source, fmt::format("tensor {} has shape {}, the config needs {}", *gname, shape_str(shape), shape_str(spec.shape)));
    tensor::Storage st = io::gguf_storage(info, data_of(info), g.source);
    const std::int64_t heads = cfg.family == model::Family::Llama ? rope_heads(cfg, spec.name) : 0;
    if (st.dtype() == tensor::DType::ternary2) {
      if (!is_bitlinear(cfg, spec.name)) fail(g.source, "tensor " + *gname + " is I2_S, but it is not a BitLinear projection");
      out.params.push_back(ternary_param(spec, tensor::codes_of(st), st.scales()[0], opt, g.source, out.notes));
      continue;
    }
    if (opt.keep_f16 && st.dtype() == tensor::DType::f16 && heads == 0 && !is_bitlinear(cfg, spec.name)) {
      model::Param p;
      p.name = spec.name;
      p.shape = spec.shape;
      p.decay = spec.decay;
      p.dtype = tensor::DType::f16;
      p.trainable = false;
      p.frozen_value = std::move(st);
      out.params.push_back(std::move(p));
      continue;
    }
    std::vector<float> v = tensor::to_f32(st);
    if (heads > 0) v = permute_rows(v, spec.shape[0], spec.shape[0] / heads, /*to_rotate_half=*/true);
    if (st.dtype() != tensor::DType::f32 || info.type == io::kGgmlQ8_0)
      out.notes.push_back(fmt::format("{}: {} read as F32 (exact)", spec.name, io::ggml_type_label(info.type)));
    out.params.push_back(param_from_floats(cfg, spec, std::move(v), opt, g.source, out.notes));
  }
  for (const auto& t : g.tensors)
    if (!used.count(t.name) && t.name != "rope_freqs.weight")
      fail(g.source, "tensor " + io::escape_bytes(t.name) + " is not a parameter of this " +
                         std::string(model::family_name(cfg.family)) + " model");
  return out;
}

}  // namespace

LoadedModel load_gguf_model_bytes(std::span<const unsigned char> bytes, const std::string& source,
                                  const LoadOptions& opt) {
  const io::GgufFile g = io::gguf_parse(bytes, source);
  return load_gguf_with(g, [&](const io::GgufTensorInfo& t) {
    const auto d = io::gguf_tensor_data(bytes, g, t);
    return std::vector<unsigned char>(d.begin(), d.end());
  }, opt);
}

LoadedModel load_gguf_model(const std::string& path, const LoadOptions& opt) {
  const io::GgufFile g = io::gguf_read(path);
  return load_gguf_with(g, [&](const io::GgufTensorInfo& t) { return io::gguf_read_tensor_data(path, g, t); }, opt);
}

// ---------------------------------------------------------------------------
// Hugging Face

namespace {

// The safetensors files of a HF directory: model.safetensors, or the shards
// model.safetensors.index.json names.
std::vector<std::string> hf_weight_files(const fs::path& dir) {
  if (fs::exists(dir / "model.safetensors")) return {(dir / "model.safetensors").string()};
  const fs::path index = dir / "model.safetensors.index.json";
  if (!fs::exists(index)) fail(dir.string(), "neither model.safetensors nor model.safetensors.index.json");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(io::read_file_text(index.string()));
  } catch (const nlohmann::json::exception& e) {
    fail(index.string(), std::string("not valid JSON: ") + e.what());
  }
  if (!j.contains("weight_map") || !j["weight_map"].is_object()) fail(index.string(), "no weight_map object");
  std::set<std::string> files;
  for (const auto& [k, v] : j["weight_map"].items()) {
    if (!v.is_string()) fail(index.string(), "weight_map value of " + k + " is not a string");
    const std::string f = v.get<std::string>();
    if (f.find('/') != std::string::npos || f.find("..") != std::string::npos) fail(index.string(), "shard name " + f + " is not a file name");
    files.insert((dir / f).string());
  }
  return {files.begin(), files.end()};
}

std::vector<float> hf_floats(const io::SafetensorsFile& f, const io::TensorInfo& t, const std::string& what) {
  const auto b = f.bytes(t.name);
  const std::size_t n = static_cast<std::size_t>(t.numel());
  std::vector<float> v(n);
  const auto u16 = [&](std::size_t i) { return static_cast<std::uint16_t>(b[2 * i] | (b[2 * i + 1] << 8)); };
  switch (t.dtype) {
    case io::DType::F32: std::memcpy(v.data(), b.data(), 4 * n); break;
    case io::DType::BF16: for (std::size_t i = 0; i < n; ++i) v[i] = tensor::bf16_to_f32(u16(i)); break;
    case io::DType::F16: for (std::size_t i = 0; i < n; ++i) v[i] = tensor::f16_to_f32(u16(i)); break;
    default: fail(what, fmt::format("tensor {} is {}; lockstep reads F32, BF16 and F16 here", t.name, io::dtype_name(t.dtype)));
  }
  return v;
}

}  // namespace

LoadedModel load_hf_model(const std::string& path, const LoadOptions& opt) {
  fs::path dir = path;
  if (fs::is_regular_file(dir)) dir = dir.parent_path();
  if (dir.empty()) dir = ".";
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path)) fail(dir.string(), "no config.json");
  const std::string config_text = io::read_file_text(config_path.string());
  LoadedModel out;
  out.format = "hf";
  out.config = model::from_hf_config_json(config_text, config_path.string());
  {
    // transformers 5 writes RoPE as rope_parameters {rope_type, rope_theta}
    // instead of a top-level rope_theta.
    const nlohmann::json j = nlohmann::json::parse(config_text);
    if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
      const auto& rp = j["rope_parameters"];
      const std::string type = rp.value("rope_type", std::string("default"));
      if (type != "default") fail(config_path.string(), "rope_parameters.rope_type '" + type + "' is not supported (default)");
      if (!j.contains("rope_theta") && rp.contains("rope_theta")) {
        if (!rp["rope_theta"].is_number()) fail(config_path.string(), "rope_parameters.rope_theta is not a number");
        out.config.rope_theta = rp["rope_theta"].get<double>();
      }
    }
    if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
      fail(config_path.string(), "rope_scaling is not supported");
  }
  const model::ModelConfig& cfg = out.config;
  if (cfg.family == model::Family::Gpt2) fail(config_path.string(), "GPT-2 checkpoints load with lockstep's own checkpoint reader");
  std::vector<io::SafetensorsFile> files;
  std::map<std::string, std::pair<std::size_t, const io::TensorInfo*>> by_name;
  for (const std::string& f : fs::is_regular_file(path) ? std::vector<std::string>{path} : hf_weight_files(dir)) {
    files.push_back(io::SafetensorsFile::read(f));
  }
  for (std::size_t i = 0; i < files.size(); ++i)
    for (const auto& t : files[i].tensors()) {
      if (by_name.count(t.name)) fail(dir.string(), "tensor " + io::escape_bytes(t.name) + " is in two shards");
      by_name[t.name] = {i, &t};
    }
  std::set<std::string> used;
  const std::string src = dir.string();
  if (static_cast<std::uint64_t>(cfg.n_layer) > by_name.size() / 9)
    fail(src, fmt::format("num_hidden_layers {} exceeds what its {} tensors hold", cfg.n_layer, by_name.size()));
  for (const model::ParamSpec& spec : model::param_specs(cfg)) {
    const auto it = by_name.find(spec.name);
    if (it == by_name.end()) fail(src, "missing tensor " + spec.name);
    used.insert(spec.name);
    const io::SafetensorsFile& f = files[it->second.first];
    const io::TensorInfo& t = *it->second.second;
    const std::string scale_name = spec.name.substr(0, spec.name.size() - std::string("weight").size()) + "weight_scale";
    const auto scale_it = by_name.find(scale_name);
    if (scale_it != by_name.end()) {
      if (!is_bitlinear(cfg, spec.name)) fail(src, "tensor " + scale_name + " belongs to no BitLinear projection");
      used.insert(scale_name);
      const io::TensorInfo& si = *scale_it->second.second;
      const auto sv = hf_floats(files[scale_it->second.first], si, src);
      if (sv.size() != 1) fail(src, fmt::format("tensor {} has {} values, expected 1", scale_name, sv.size()));
      if (!(std::isfinite(sv[0]) && sv[0] > 0)) fail(src, fmt::format("tensor {} is {}", scale_name, static_cast<double>(sv[0])));
      if (t.dtype == io::DType::U8) {
        // transformers' BitLinear: packed codes, y = acc / (input_scale · weight_scale).
        const std::vector<std::int64_t> want{spec.shape[0] / 4, spec.shape[1]};
        if (t.shape != want) fail(src, fmt::format("packed tensor {} has shape {}, expected {}", spec.name, shape_str(t.shape), shape_str(want)));
        auto codes = hf_unpack_ternary(f.bytes(t.name), spec.shape[0], spec.shape[1], src + ": " + spec.name);
        out.format = "hf-packed";
        out.params.push_back(ternary_param(spec, std::move(codes), step_from_hf_weight_scale(sv[0]), opt, src, out.notes));
      } else {
        // transformers' AutoBitLinear, offline: float {-1, 0, 1} weights, y = (x · W) · weight_scale.
        if (t.shape != spec.shape) fail(src, fmt::format("tensor {} has shape {}, expected {}", spec.name, shape_str(t.shape), shape_str(spec.shape)));
        const auto v = hf_floats(f, t, src);
        std::vector<std::int8_t> codes(v.size());
        for (std::size_t i = 0; i < v.size(); ++i) {
          if (v[i] != -1.0f && v[i] != 0.0f && v[i] != 1.0f)
            fail(src, fmt::format("tensor {} has weight_scale but holds {} at {} (expected -1, 0, 1)", spec.name, static_cast<double>(v[i]), i));
          codes[i] = static_cast<std::int8_t>(v[i]);
        }
        out.params.push_back(ternary_param(spec, std::move(codes), sv[0], opt, src, out.notes));
      }
      continue;
    }
    if (t.shape != spec.shape)
      fail(src, fmt::format("tensor {} has shape {}, expected {}", spec.name, shape_str(t.shape), shape_str(spec.shape)));
    std::vector<float> v = hf_floats(f, t, src);
    if (cfg.rope_layout == model::RopeLayout::Interleaved)
      if (const std::int64_t heads = rope_heads(cfg, spec.name); heads > 0)
        v = permute_rows(v, spec.shape[0], spec.shape[0] / heads, /*to_rotate_half=*/false);
    out.params.push_back(float_param(spec, std::move(v)));  // HF masters: BitLinear quantizes them online
  }
  for (const auto& [name, where] : by_name) {
    if (used.count(name)) continue;
    if (name == "lm_head.weight" && cfg.tie_embeddings) {
      out.notes.push_back("lm_head.weight ignored: the config ties it to the embedding");
      continue;
    }
    if (ends_with(name, ".rotary_emb.inv_freq")) continue;
    fail(src, "tensor " + io::escape_bytes(name) + " is not a parameter of this " + std::string(model::family_name(cfg.family)) + " model");
  }
  return out;
}

LoadedModel load_model_file(const std::string& path, const LoadOptions& opt) {
  std::error_code ec;
  if (fs::is_directory(path, ec) || ends_with(path, ".safetensors")) return load_hf_model(path, opt);
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(io::escape_bytes(path) + ": cannot open");
  char magic[4] = {};
  f.read(magic, 4);
  if (f.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0) return load_gguf_model(path, opt);
  throw std::runtime_error(io::escape_bytes(path) + ": neither a GGUF file nor a Hugging Face directory or .safetensors file");
}

// ---------------------------------------------------------------------------
// Writing GGUF

std::string gguf_architecture(const model::ModelConfig& cfg) {
  switch (cfg.family) {
    case model::Family::Llama: return "llama";
    case model::Family::Bitnet: return "bitnet-b1.58";
    default: throw std::invalid_argument(fmt::format("GGUF export: family {} is not supported (llama, bitnet)", model::family_name(cfg.family)));
  }
}

std::vector<unsigned char> serialize_gguf_model(const model::ModelConfig& cfg, const std::vector<model::Param>& params,
                                                const GgufWriteOptions& opt);

namespace {

io::GgufWriter gguf_model_writer(const model::ModelConfig& cfg, const std::vector<model::Param>& params,
                                 const GgufWriteOptions& opt) {
  using io::GgufType;
  using io::GgufValue;
  const std::string arch = gguf_architecture(cfg);
  const bool i2s = opt.matrix_type == io::kGgmlTypeI2S;
  if (i2s && cfg.family != model::Family::Bitnet) throw std::invalid_argument("GGUF export: I2_S holds BitNet's ternary projections only");
  const std::uint32_t embd_type = opt.embedding_type.value_or(io::kGgmlF32);
  io::GgufWriter w;
  w.set("general.architecture", GgufValue::string(arch));
  w.set("general.name", GgufValue::string(opt.name));
  const auto file_type = [](std::uint32_t t) -> std::int64_t {
    switch (t) {
      case io::kGgmlF32: return 0;
      case io::kGgmlF16: return 1;
      case io::kGgmlQ8_0: return 7;
      case io::kGgmlBF16: return 32;
      case io::kGgmlTypeI2S: return io::kGgufFileTypeI2S;
      default: throw std::invalid_argument("GGUF export: matrix type " + io::ggml_type_label(t) + " is not written (F32, F16, BF16, Q8_0, I2_S)");
    }
  };
  w.set("general.file_type", GgufValue::integer(GgufType::kU32, file_type(opt.matrix_type)));
  const auto u32 = [&](const std::string& k, std::int64_t v) { w.set(arch + "." + k, GgufValue::integer(GgufType::kU32, v)); };
  u32("vocab_size", cfg.vocab_size);
  u32("context_length", cfg.max_seq);
  u32("embedding_length", cfg.d_model);
  u32("block_count", cfg.n_layer);
  u32("feed_forward_length", cfg.d_ff);
  u32("attention.head_count", cfg.n_head);
  u32("attention.head_count_kv", cfg.n_kv_head);
  u32("attention.key_length", cfg.head_dim);
  u32("attention.value_length", cfg.head_dim);
  u32("rope.dimension_count", cfg.head_dim);
  w.set(arch + ".attention.layer_norm_rms_epsilon", GgufValue::f32(static_cast<float>(cfg.norm_eps)));
  w.set(arch + ".rope.freq_base", GgufValue::f32(static_cast<float>(cfg.rope_theta)));
  if (cfg.bos_token >= 0) w.set("tokenizer.ggml.bos_token_id", GgufValue::integer(GgufType::kU32, cfg.bos_token));
  if (cfg.eos_token >= 0) w.set("tokenizer.ggml.eos_token_id", GgufValue::integer(GgufType::kU32, cfg.eos_token));
  for (const auto& [k, v] : opt.extra) w.set(k, v);
  // llama.cpp requires tokenizer.ggml.model (its vocabulary loader stops at a
  // file without it); "no_vocab" is its name for a file with no vocabulary (read
  // by every llama.cpp since 2024, bitnet.cpp's fork included), which
  // it loads with vocab_size placeholder tokens (synthetic benchmark models).
  const bool has_tokenizer = std::any_of(opt.extra.begin(), opt.extra.end(),
                                         [](const auto& kv) { return kv.first == "tokenizer.ggml.model"; });
  if (!has_tokenizer) w.set("tokenizer.ggml.model", GgufValue::string("no_vocab"));
  const std::vector<model::ParamSpec> specs = model::param_specs(cfg);
  if (specs.size() != params.size()) throw std::invalid_argument("GGUF export: the parameters do not match the config");
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const model::Param& p = params[i];
    if (p.name != specs[i].name || p.shape != specs[i].shape)
      throw std::invalid_argument("GGUF export: parameter " + p.name + " does not match the config's " + specs[i].name);
    model::check_param_storage(p);
    const std::string gname = *gguf_name_of(p.name);
    std::vector<std::uint64_t> dims(p.shape.rbegin(), p.shape.rend());
    if (is_bitlinear(cfg, p.name) && (i2s || opt.bitnet_ternary_floats || p.dtype == tensor::DType::ternary2)) {
      std::vector<std::int8_t> codes;
      float scale = 0;
      if (p.dtype == tensor::DType::ternary2) {
        codes = tensor::codes_of(p.frozen_value);
        scale = p.frozen_value.scales()[0];
      } else if (p.dtype == tensor::DType::f32) {
        auto q = ops::quantize_ternary(p.value.data(), p.value.size());  // the model's own BitLinear quantizer
        codes = std::move(q.q);
        scale = q.scale;
      } else {
        throw std::invalid_argument("GGUF export: " + p.name + " is " + std::string(tensor::dtype_name(p.dtype)));
      }
      if (i2s) {
        w.add_tensor(gname, dims, io::kGgmlTypeI2S, io::i2s_pack(codes, scale));
        continue;
      }
      std::vector<float> v(codes.size());  // ternary into a float type: code · scale, as bitnet.cpp's converter
      for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(codes[k]) * scale;
      w.add_tensor(gname, dims, opt.matrix_type, io::gguf_quantize(opt.matrix_type, v, p.name));
      continue;
    }
    std::vector<float> v = p.dtype == tensor::DType::f32 ? p.value : tensor::to_f32(p.frozen_value);
    if (cfg.family == model::Family::Llama)
      if (const std::int64_t heads = rope_heads(cfg, p.name); heads > 0)
        v = permute_rows(v, p.shape[0], p.shape[0] / heads, /*to_rotate_half=*/false);
    if (cfg.family != model::Family::Gpt2 && cfg.rope_layout == model::RopeLayout::Interleaved && rope_heads(cfg, p.name) > 0)
      throw std::invalid_argument("GGUF export: a model with lockstep's interleaved RoPE layout is not written (llama.cpp's llama permutes HF's rotate-half rows)");
    std::uint32_t type = io::kGgmlF32;
    if (p.shape.size() == 2) type = p.name == "model.embed_tokens.weight" ? embd_type : (i2s ? embd_type : opt.matrix_type);
    // A row that is not whole Q8_0 blocks stays F32 (llama.cpp's quantizer falls back per tensor too).
    if (type == io::kGgmlQ8_0 && dims[0] % 32 != 0) type = io::kGgmlF32;
    w.add_tensor(gname, dims, type, io::gguf_quantize(type, v, p.name));
  }
  return w;
}

}  // namespace

std::vector<unsigned char> serialize_gguf_model(const model::ModelConfig& cfg, const std::vector<model::Param>& params,
                                                const GgufWriteOptions& opt) {
  return gguf_model_writer(cfg, params, opt).serialize();
}

void write_gguf_model(const std::string& path, const model::ModelConfig& cfg, const std::vector<model::Param>& params,
                      const GgufWriteOptions& opt) {
  gguf_model_writer(cfg, params, opt).write(path);
}

void write_hf_model(const std::string& dir, const model::ModelConfig& cfg, const std::vector<model::Param>& params,
                    bool bf16) {
  fs::create_directories(dir);
  std::vector<std::vector<std::uint8_t>> bytes;
  bytes.reserve(2 * params.size());  // refs point into it
  std::vector<io::TensorRef> refs;
  bool packed = false;
  for (const model::Param& p : params) {
    model::check_param_storage(p);
    if (p.dtype == tensor::DType::ternary2) {
      if (!is_bitlinear(cfg, p.name)) throw std::invalid_argument("HF export: " + p.name + " is ternary but no BitLinear projection");
      packed = true;
      bytes.push_back(hf_pack_ternary(tensor::codes_of(p.frozen_value), p.shape[0], p.shape[1]));
      refs.push_back({p.name, io::DType::U8, {p.shape[0] / 4, p.shape[1]}, bytes.back()});
      const float ws = 1.0f / p.frozen_value.scales()[0];
      bytes.emplace_back(4);
      std::memcpy(bytes.back().data(), &ws, 4);
      refs.push_back({p.name.substr(0, p.name.size() - 6) + "weight_scale", io::DType::F32, {1}, bytes.back()});
      continue;
    }
    const std::vector<float> v = p.dtype == tensor::DType::f32 ? p.value : tensor::to_f32(p.frozen_value);
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i])) throw std::invalid_argument(fmt::format("HF export: {} holds {} at {}", p.name, static_cast<double>(v[i]), i));
    if (bf16) {
      bytes.emplace_back(2 * v.size());
      for (std::size_t i = 0; i < v.size(); ++i) {
        const std::uint16_t h = tensor::f32_to_bf16(v[i]);
        bytes.back()[2 * i] = static_cast<std::uint8_t>(h);
        bytes.back()[2 * i + 1] = static_cast<std::uint8_t>(h >> 8);
      }
      refs.push_back({p.name, io::DType::BF16, p.shape, bytes.back()});
    } else {
      bytes.emplace_back(4 * v.size());
      if (!v.empty()) std::memcpy(bytes.back().data(), v.data(), 4 * v.size());
      refs.push_back({p.name, io::DType::F32, p.shape, bytes.back()});
    }
  }
  nlohmann::json j = nlohmann::json::parse(model::to_hf_config_json(cfg));
  if (packed) {
    j["quantization_config"] = {{"quant_method", "bitnet"}, {"linear_class", "bitlinear"}, {"quantization_mode", "offline"}};
  } else if (cfg.family == model::Family::Bitnet) {
    j["quantization_config"] = {{"quant_method", "bitnet"}, {"linear_class", "autobitlinear"}, {"quantization_mode", "online"}};
  }
  if (bf16) j["torch_dtype"] = "bfloat16";
  const std::string text = j.dump(2) + "\n";
  io::write_file_atomic((fs::path(dir) / "config.json").string(),
                        std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
  io::write_safetensors((fs::path(dir) / "model.safetensors").string(), refs, {{"format", "pt"}});
}

}  // namespace lockstep::load
