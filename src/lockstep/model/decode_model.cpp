// The decode-only CPU model (decode_model.hpp).
#include "lockstep/model/decode_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/model/decode.hpp"
#include "lockstep/model/params.hpp"
#include "lockstep/tensor/convert.hpp"
#include "lockstep/tensor/storage.hpp"
#include "lockstep/util/parallel.hpp"

namespace lockstep::model {
namespace {

using Backend = DecodeBackend<cpu::OpKernels>;

// What the engine reads of a parameter: a pointer and a size. For a weight
// held packed the pointer is only a key (one float of keys_, never read as
// the weight): the decode backend finds the packed form by it, and refuses a
// key it does not hold (DecodeBackend::held).
struct KeySpan {
  const float* p = nullptr;
  std::size_t n = 0;
  const float* data() const { return p; }
  std::size_t size() const { return n; }
  bool empty() const { return n == 0; }
};
struct HeldParam {
  std::string name;
  std::vector<std::int64_t> shape;
  KeySpan value, grad;  // grad: the same span (the engine checks sizes; a decode pass writes no gradient)
  bool decay = false;
  bool trainable = false;
};

enum class Role { embedding, head, bitlinear, linear, norm };

Role role_of(const ModelConfig& cfg, const ParamSpec& s) {
  if (s.name == "model.embed_tokens.weight") return Role::embedding;
  if (s.name == "lm_head.weight") return Role::head;
  if (s.shape.size() == 1) return Role::norm;
  return cfg.family == Family::Bitnet ? Role::bitlinear : Role::linear;
}

class CpuDecodeModel final : public DecodeModel {
 public:
  CpuDecodeModel(const ModelConfig& cfg, std::vector<Param> params, int threads) : cfg_((cfg.validate(), cfg)) {
    if (cfg_.family == Family::Gpt2)
      throw std::invalid_argument("the decode-only model holds llama and bitnet models (the families model files "
                                  "hold); a gpt2 model decodes through make_cpu_model");
    const std::vector<ParamSpec> specs = param_specs(cfg_);
    if (params.size() != specs.size())
      throw std::invalid_argument(fmt::format("decode-only model: {} parameters given, the config has {}",
                                              params.size(), specs.size()));
    threads = util::resolve_threads(threads);
    keys_.assign(params.size(), 0.0f);
    values_.reserve(params.size());
    eparams_.resize(params.size());
    for (std::size_t i = 0; i < params.size(); ++i) hold(specs[i], std::move(params[i]), i, threads);
  }

  const ModelConfig& config() const override { return cfg_; }
  DecodeModelBytes bytes() const override { return bytes_; }

  std::vector<Param>& params() override { refuse("has no parameter list (its weights are packed for decoding)"); }
  const std::vector<Param>& params() const override {
    refuse("has no parameter list (its weights are packed for decoding)");
  }
  void init(std::uint64_t) override { refuse("cannot be initialized (it holds a loaded model's weights)"); }
  float forward_backward(std::span<const std::int32_t>, std::span<const std::int32_t>, std::int64_t, std::int64_t,
                         bool, int) override {
    refuse("does not train (no gradients, no F32 masters)");
  }
  float loss(std::span<const std::int32_t>, std::span<const std::int32_t>, std::int64_t, std::int64_t,
             int) override {
    refuse("computes no loss (decode sessions and next_logits only)");
  }
  void set_recompute(bool) override {}

  // The window recompute as a prefill of the last max_seq tokens: the same
  // bits as the training model's next_logits (the decode promise "prefill =
  // the window recompute", tests/infer/decode_test.cpp).
  std::vector<float> next_logits(std::span<const std::int32_t> tokens, int threads) override {
    if (tokens.empty()) throw std::invalid_argument("next_logits: no tokens");
    const auto keep = std::min<std::size_t>(tokens.size(), static_cast<std::size_t>(cfg_.max_seq));
    auto d = decoder(1, keep);
    return d->prefill(0, tokens.subspan(tokens.size() - keep), false, threads);
  }

  std::unique_ptr<Decoder> decoder(std::size_t slots, std::size_t context) override {
    auto before = [this](int threads) { kernels_.threads = util::resolve_threads(threads); };
    auto s = std::make_unique<DecodeSession<cpu::OpKernels, HeldParam, decltype(before)>>(cfg_, eparams_, kernels_,
                                                                                         slots, context, before);
    s->decode_kernels().backend_state().held = &weights_;
    return s;
  }

 private:
  [[noreturn]] static void refuse(const char* what) {
    throw std::logic_error(std::string("the decode-only model ") + what +
                           ": load the model with load::make_loaded_model to train, export or read its parameters");
  }

  // p's values as f32 (F32 as they are, F16 widened: exact), p emptied.
  static std::vector<float> floats_of(Param& p) {
    std::vector<float> v = p.dtype == tensor::DType::f32 ? std::move(p.value) : tensor::to_f32(p.frozen_value);
    p = Param{};
    return v;
  }
  static bool f16_exact(const std::vector<float>& v) {
    return std::all_of(v.begin(), v.end(), [](float x) {
      const float r = tensor::f16_to_f32(tensor::f32_to_f16(x));
      return r == x && std::signbit(r) == std::signbit(x);  // -0 stays -0; NaN is not exact
    });
  }
  // Keeps f32 values as they are: the engine reads them where they are.
  const float* keep(std::vector<float> v, std::size_t& count) {
    v.shrink_to_fit();
    count += v.capacity() * sizeof(float);
    values_.push_back(std::move(v));
    return values_.back().data();
  }

  void hold(const ParamSpec& spec, Param p, std::size_t i, int threads) {
    if (p.name != spec.name || p.shape != spec.shape)
      throw std::invalid_argument(fmt::format("decode-only model: parameter {} ({}) is not the config's {} ({})", p.name,
                                              tensor::dims_str(p.shape), spec.name, tensor::dims_str(spec.shape)));
    if (p.name.find(".lora_") != std::string::npos)
      throw std::invalid_argument("decode-only model: LoRA adapter tensors are not held (" + p.name + ")");
    const Role role = role_of(cfg_, spec);
    const std::size_t n = tensor::numel_of(spec.shape);
    const bool ternary = p.dtype == tensor::DType::ternary2;
    if (p.dtype != tensor::DType::f32 && p.dtype != tensor::DType::f16 && !ternary)
      throw std::invalid_argument(fmt::format(
          "decode-only model: parameter '{}' is {}; it holds F32, F16 and TERNARY2 (BitLinear) weights", p.name,
          tensor::dtype_name(p.dtype)));
    if (ternary && role != Role::bitlinear)
      throw std::invalid_argument(fmt::format(
          "decode-only model: parameter '{}' is TERNARY2 but is no BitLinear projection of a bitnet model", p.name));
    if (p.dtype == tensor::DType::f32) {
      if (p.value.size() != n)
        throw std::invalid_argument(fmt::format("decode-only model: parameter '{}' holds {} values, its shape {}",
                                                p.name, p.value.size(), n));
    } else {
      check_param_storage(p);
    }
    const auto out = static_cast<std::size_t>(spec.shape[0]);
    const std::size_t in = spec.shape.size() > 1 ? static_cast<std::size_t>(spec.shape[1]) : 0;
    const float* key = &keys_[i];
    switch (role) {
      case Role::bitlinear: {
        cpu::TernaryMatrix t;
        if (ternary) {
          const std::vector<std::int8_t> codes = tensor::codes_of(p.frozen_value);
          t = cpu::pack_ternary(codes.data(), out, in, p.frozen_value.scales()[0], threads);
        } else {
          const std::vector<float> v = floats_of(p);
          t = Backend::pack_bitlinear(v.data(), out, in, threads);
        }
        t.words.shrink_to_fit();
        bytes_.ternary += t.words.capacity() * sizeof(std::uint32_t);
        weights_.ternary.emplace(key, std::move(t));
        break;
      }
      case Role::linear:
      case Role::head: {
        const std::vector<float> v = floats_of(p);
        add_packed(key, Backend::pack_linear(v.data(), out, in, threads), role == Role::head ? bytes_.head : bytes_.linear);
        break;
      }
      case Role::embedding: {
        std::vector<float> v = floats_of(p);
        if (cfg_.tie_embeddings) {
          Backend::Packed head = Backend::pack_linear(v.data(), out, in, threads);
          if (head.b.empty()) {  // on panels: the embedding rows are read from them
            add_packed(key, std::move(head), bytes_.head);
          } else {  // gemm_packed's layout: the rows kept beside it, f32 (a small vocabulary)
            key = keep(std::move(v), bytes_.embedding);
            add_packed(key, std::move(head), bytes_.head);
          }
        } else if (f16_exact(v)) {
          std::vector<std::uint16_t> h(v.size());
          for (std::size_t j = 0; j < v.size(); ++j) h[j] = tensor::f32_to_f16(v[j]);
          bytes_.embedding += h.capacity() * sizeof(std::uint16_t);
          weights_.half_rows.emplace(key, std::move(h));
        } else {
          key = keep(std::move(v), bytes_.embedding);
        }
        break;
      }
      case Role::norm:
        key = keep(floats_of(p), bytes_.norms);
        break;
    }
    HeldParam& e = eparams_[i];
    e.name = spec.name;
    e.shape = spec.shape;
    e.value = e.grad = KeySpan{key, n};
  }
  void add_packed(const float* key, Backend::Packed p, std::size_t& count) {
    p.shrink_to_fit();
    count += p.heap_bytes();
    weights_.packed.emplace(key, std::move(p));
  }

  ModelConfig cfg_;
  std::vector<float> keys_;                 // one a parameter: the keys of the packed weights
  std::vector<std::vector<float>> values_;  // the f32 values the engine reads where they are (norms, ...)
  std::vector<HeldParam> eparams_;
  Backend::Weights weights_;
  DecodeModelBytes bytes_;
  cpu::OpKernels kernels_;
};

}  // namespace

std::unique_ptr<DecodeModel> make_cpu_decode_model(const ModelConfig& cfg, std::vector<Param> params, int threads) {
  return std::make_unique<CpuDecodeModel>(cfg, std::move(params), threads);
}

}  // namespace lockstep::model
