#include "lockstep/load/adapted_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lockstep/backend/cpu/decode.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/load/adapter.hpp"
#include "lockstep/model/decode.hpp"
#include "lockstep/model/lora_params.hpp"
#include "lockstep/model/transformer.hpp"
#include "lockstep/ops/lora.hpp"
#include "lockstep/util/parallel.hpp"

namespace lockstep::load {
namespace {

// One adapted projection: the op's config (alpha chosen so that the op's
// float(alpha / r) is the adapter's scale) and its A and B.
struct AdaptedSite {
  const model::LoraTensor* lora = nullptr;
  double op_alpha = 0.0;
};

// The CPU kernel set with ops::Linear replaced by ops::LoraLinear's
// specification where the weight is an adapted module's (found by the weight's
// address: the engine passes Param::value.data() of the projection).
class LoraKernels : public ad::KeyedKernels<LoraKernels, float> {
 public:
  using Index = ops::Index;
  using Aux = cpu::Aux;

  int threads = 1;
  cpu::OpKernels inner;
  std::unordered_map<const float*, AdaptedSite> sites;

  void begin_forward() {
    inner.threads = threads;
    inner.begin_forward();
  }
  void add_into(std::size_t n, float* acc, const float* x) { inner.add_into(n, acc, x); }

  template <class C, class A, class... X>
    requires requires(cpu::OpKernels& k, const C& c, const A& a, X&... x) { k.run(c, a, x...); }
  void run(const C& c, const A& a, X&... x) {
    inner.run(c, a, x...);
  }
  void run(const ops::Linear::Config& c, const ops::Linear::FwdArgs<float>& a) {
    const auto it = sites.find(a.w);
    if (it == sites.end()) {
      inner.run(c, a);
      return;
    }
    const model::LoraTensor& t = *it->second.lora;
    const ops::LoraLinear::Config lc{c.rows, c.in, c.out, t.a.size() / t.in, it->second.op_alpha, c.bias};
    auto tensor_of = [](std::vector<std::size_t> shape, const float* p) {
      Tensor<float> x(std::move(shape));
      std::copy(p, p + x.data.size(), x.data.begin());
      return x;
    };
    ops::LoraLinear::Inputs<float> in{tensor_of({c.rows, c.in}, a.x), tensor_of({c.out, c.in}, a.w), {},
                                      tensor_of({lc.rank, c.in}, t.a.data()), tensor_of({c.out, lc.rank}, t.b.data())};
    if (c.bias) in.b = tensor_of({c.out}, a.b);
    const auto out = ops::LoraLinear::forward(lc, in);
    std::copy(out.y.data.begin(), out.y.data.end(), a.y);
  }
};

}  // namespace
}  // namespace lockstep::load

namespace lockstep::model {
// The decode mode's backend for LoraKernels: the CPU's cache writes and cached
// attention; no packed projections (DecodeKernels then calls LoraKernels::run
// for every projection, where the adapted ones are caught).
template <>
struct DecodeBackend<load::LoraKernels> {
  struct State {};
  static void store_rows(load::LoraKernels&, const float* src, std::size_t ld, std::size_t rows, std::size_t width,
                         float* dst) {
    cpu::store_rows(src, ld, rows, width, dst);
  }
  static void attention(load::LoraKernels& k, State&, const ops::CachedAttention::Config& c,
                        const ops::CachedAttention::Args<float>& a) {
    cpu::cached_attention(c, a, k.threads);
  }
};
}  // namespace lockstep::model

namespace lockstep::load {
namespace {

class AdaptedCpuModel final : public model::Model {
 public:
  AdaptedCpuModel(LoadedModel base, model::Adapter adapter)
      : cfg_(base.config), params_(std::move(base.params)), adapter_(std::move(adapter)), engine_(cfg_, params_, kernels_) {
    model::require_f32_params(params_, "the adapted CPU model");
    const float s = adapter_scale(adapter_.config);
    const double rank = static_cast<double>(adapter_.config.rank);
    const double op_alpha = static_cast<double>(s) * rank;
    if (static_cast<float>(op_alpha / rank) != s)
      throw std::invalid_argument(fmt::format("adapter: scale {} is not float(alpha' / r) for any alpha' lockstep finds",
                                              static_cast<double>(s)));
    std::unordered_map<std::string, const float*> weight_of;
    for (const model::Param& p : params_) weight_of.emplace(p.name, p.value.data());
    for (const model::LoraTensor& t : adapter_.tensors)
      kernels_.sites.emplace(weight_of.at(t.module + ".weight"), AdaptedSite{&t, op_alpha});
  }

  const model::ModelConfig& config() const override { return cfg_; }
  std::vector<model::Param>& params() override { return params_; }
  const std::vector<model::Param>& params() const override { return params_; }
  void init(std::uint64_t) override { throw std::logic_error("the adapted CPU model runs a loaded base: no init"); }
  float forward_backward(std::span<const std::int32_t>, std::span<const std::int32_t>, std::int64_t, std::int64_t,
                         bool, int) override {
    throw std::logic_error("the adapted CPU model (load/adapted_model.hpp) runs inference only; finetuning is the "
                           "model's LoRA layers' work");
  }
  float loss(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, std::int64_t batch,
             std::int64_t seq, int threads) override {
    if (batch <= 0 || seq <= 0 || seq > cfg_.max_seq || inputs.size() != static_cast<std::size_t>(batch * seq) ||
        targets.size() != inputs.size())
      throw std::invalid_argument("adapted model loss: inputs/targets must hold batch*seq tokens, seq <= max_seq");
    before_pass(threads);
    return engine_.run(inputs.data(), targets.data(), static_cast<std::size_t>(batch), static_cast<std::size_t>(seq),
                       false, false);
  }
  std::vector<float> next_logits(std::span<const std::int32_t> tokens, int threads) override {
    if (tokens.empty()) throw std::invalid_argument("next_logits: no tokens");
    before_pass(threads);
    const auto keep = std::min<std::size_t>(tokens.size(), static_cast<std::size_t>(cfg_.max_seq));
    return engine_.last_logits(tokens.data() + (tokens.size() - keep), keep);
  }
  std::unique_ptr<model::Decoder> decoder(std::size_t slots, std::size_t context) override {
    auto before = [this](int threads) { before_pass(threads); };
    return std::make_unique<model::DecodeSession<LoraKernels, model::Param, decltype(before)>>(
        cfg_, params_, kernels_, slots, context, before);
  }
  void set_recompute(bool recompute) override { engine_.recompute_blocks = recompute; }

 private:
  void before_pass(int threads) {
    model::require_f32_params(params_, "the adapted CPU model");
    kernels_.threads = util::resolve_threads(threads);
  }

  model::ModelConfig cfg_;
  std::vector<model::Param> params_;
  model::Adapter adapter_;
  LoraKernels kernels_;
  model::Engine<float, LoraKernels, model::Param> engine_;
};

// The projections whose forward is an ops::Linear in the float families
// (LLaMA's and GPT-2's; the head too): LoraLinear replaces exactly these.
bool is_linear_projection(const std::string& module) {
  static const char* const kNames[] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                       "down_proj", "c_attn", "c_proj", "c_fc", "lm_head"};
  const std::string last = module.substr(module.rfind('.') + 1);
  return std::any_of(std::begin(kNames), std::end(kNames), [&](const char* n) { return last == n; });
}

}  // namespace

float adapter_scale(const model::LoraConfig& config) { return static_cast<float>(model::lora_scale(config)); }

bool model_layers_adapt(const model::ModelConfig& cfg, const model::Adapter& adapter) {
  if (cfg.family == model::Family::Gpt2) return false;  // lora_modules refuses GPT-2: its c_attn is fused
  model::LoraConfig every;
  every.targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  const std::vector<std::string> adapted = model::lora_modules(cfg, every);
  return std::all_of(adapter.tensors.begin(), adapter.tensors.end(), [&](const model::LoraTensor& t) {
    return std::find(adapted.begin(), adapted.end(), t.module) != adapted.end();
  });
}

std::unique_ptr<model::Model> make_spec_adapted_model(LoadedModel base, model::Adapter adapter) {
  if (base.config.family == model::Family::Bitnet)
    throw std::invalid_argument("--adapter: a BitNet base's projections are BitLinear; the adapted CPU model adapts "
                                "float ops::Linear projections only (LLaMA, GPT-2)");
  if (base.config.linear != model::LinearMode::Float)
    throw std::invalid_argument("--adapter: the base runs the int8 units; the adapted CPU model adapts float projections");
  validate_adapter(adapter, base.config, base.params);
  for (const model::LoraTensor& t : adapter.tensors)
    if (!is_linear_projection(t.module))
      throw std::invalid_argument(fmt::format("adapter module '{}' is not a linear projection the adapted model runs "
                                              "as ops::LoraLinear (q/k/v/o/gate/up/down_proj, c_attn, c_proj, c_fc, "
                                              "lm_head)",
                                              t.module));
  return std::make_unique<AdaptedCpuModel>(std::move(base), std::move(adapter));
}

std::unique_ptr<model::Model> make_adapted_model(LoadedModel base, model::Adapter adapter, const std::string& device) {
  validate_adapter(adapter, base.config, base.params);
  if (base.config.linear != model::LinearMode::Float)
    throw std::invalid_argument("--adapter: the base runs the int8 units; the LoRA branch is float (units + LoRA is "
                                "not run)");
  if (!model_layers_adapt(base.config, adapter)) {
    if (device != "cpu")
      throw std::invalid_argument(fmt::format(
          "--adapter: a module of this adapter (GPT-2's c_attn/c_proj/c_fc, lm_head) runs only in the adapted CPU "
          "model: use --device cpu, or --merge-adapter for '{}'",
          device));
    return make_spec_adapted_model(std::move(base), std::move(adapter));
  }
  // The model's LoRA layers: the adapter tensors under the names the engine
  // finds them by (lora_branch.hpp), every parameter frozen (no gradients held).
  const model::LoraConfig config = adapter.config;
  std::unique_ptr<model::Model> m = make_loaded_model(std::move(base), device);
  std::vector<model::Param>& ps = m->params();
  model::freeze(ps);
  for (const model::LoraTensor& t : adapter.tensors) {
    const auto r = static_cast<std::int64_t>(t.a.size() / t.in);
    for (const bool is_a : {true, false}) {
      model::Param p;
      p.name = t.module + (is_a ? ".lora_A.weight" : ".lora_B.weight");
      p.shape = is_a ? std::vector<std::int64_t>{r, static_cast<std::int64_t>(t.in)}
                     : std::vector<std::int64_t>{static_cast<std::int64_t>(t.out), r};
      p.value.resize(static_cast<std::size_t>(p.shape[0] * p.shape[1]));
      p.trainable = false;
      p.decay = false;
      ps.push_back(std::move(p));
    }
  }
  model::set_adapter(ps, adapter);  // the values, each checked against its tensor's shape
  model::LoraRun run;
  run.scale = model::lora_scale(config);
  run.training = false;
  m->set_lora(run);
  return m;
}

}  // namespace lockstep::load
