// make_cpu_model: the float engine (transformer.hpp) on the fast CPU kernels
// (backend/cpu/ops.hpp). Its loss and gradients equal the float op-spec
// composition (Engine<float, SpecKernels<float>>) bit for bit, for any thread
// count: tests/model/cpu_model_test.cpp.
#include <algorithm>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/model/params.hpp"
#include "lockstep/model/transformer.hpp"
#include "lockstep/util/parallel.hpp"

namespace lockstep::model {
namespace {

class CpuModel final : public Model {
 public:
  explicit CpuModel(const ModelConfig& cfg)
      : cfg_((cfg.validate(), cfg)), specs_(param_specs(cfg)), params_(make_float_params(cfg)),
        engine_(cfg_, params_, kernels_) {}

  const ModelConfig& config() const override { return cfg_; }
  void set_recompute(bool recompute) override { engine_.recompute_blocks = recompute; }
  std::vector<Param>& params() override { return params_; }
  const std::vector<Param>& params() const override { return params_; }

  void init(std::uint64_t seed) override {
    require_runnable_params();
    for (std::size_t i = 0; i < params_.size(); ++i) {
      init_param(specs_[i], params_[i].value.data(), params_[i].value.size(), seed, 0);
      std::fill(params_[i].grad.begin(), params_[i].grad.end(), 0.0f);
    }
  }

  float forward_backward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets,
                         std::int64_t batch, std::int64_t seq, bool accumulate, int threads) override {
    check_batch(inputs, targets, batch, seq);
    require_runnable_params();
    kernels_.threads = util::resolve_threads(threads);
    return engine_.run(inputs.data(), targets.data(), static_cast<std::size_t>(batch),
                       static_cast<std::size_t>(seq), true, accumulate);
  }

  float loss(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, std::int64_t batch,
             std::int64_t seq, int threads) override {
    check_batch(inputs, targets, batch, seq);
    require_runnable_params();
    kernels_.threads = util::resolve_threads(threads);
    return engine_.run(inputs.data(), targets.data(), static_cast<std::size_t>(batch),
                       static_cast<std::size_t>(seq), false, false);
  }

  std::vector<float> next_logits(std::span<const std::int32_t> tokens, int threads) override {
    if (tokens.empty()) throw std::invalid_argument("next_logits: no tokens");
    require_runnable_params();
    // The context window: the last max_seq tokens.
    const auto keep = std::min<std::size_t>(tokens.size(), static_cast<std::size_t>(cfg_.max_seq));
    const std::int32_t* first = tokens.data() + (tokens.size() - keep);
    kernels_.threads = util::resolve_threads(threads);
    return engine_.last_logits(first, keep);
  }

 private:
  // The float kernels read every parameter as Param::value: a parameter the
  // caller put in another dtype (params() is writable) is refused by name.
  void require_runnable_params() const { require_f32_params(params_, "the CPU model"); }

  ModelConfig cfg_;
  std::vector<ParamSpec> specs_;
  std::vector<Param> params_;
  cpu::OpKernels kernels_;
  Engine<float, cpu::OpKernels> engine_;
};

}  // namespace

std::unique_ptr<Model> make_cpu_model(const ModelConfig& cfg) { return std::make_unique<CpuModel>(cfg); }

}  // namespace lockstep::model
